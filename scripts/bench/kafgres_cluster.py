"""The Kafgres cluster that ./kafgres start runs, seen from the benchmark.

Where it is comes from .kafgres/env (written by ./kafgres start), or the
launcher's defaults. The broker is the background worker whose
pg_stat_activity.backend_type is 'kafgres broker' (crates/kafgres/src/worker):
its pid is what the runs sample for RSS and CPU, looked up again before each
run since a restart changes it.

`kafgres.flush_policy` reloads (`pg_reload_conf()`), but the comparison sets it
with `ALTER SYSTEM SET` and a restart (./kafgres restart), so that each policy's
runs start from a freshly started broker. The policy found at the start is put
back when the comparison ends.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from apache_kafka import port_open

PG_BIN = Path("/usr/lib/postgresql/15/bin")
READY_TIMEOUT_S = 120


def run_bench(binary: str, *args: str, timeout_s: float) -> dict[str, str]:
    """Runs kafgres-bench; returns the fields of its last `key=value` line (its summary)."""
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"kafgres-bench {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    line = [row for row in done.stdout.splitlines() if "=" in row][-1]
    return dict(field.split("=", 1) for field in line.split() if "=" in field)


def read_env(root: Path) -> dict[str, str]:
    env = {
        "PGHOST": "127.0.0.1",
        "PGPORT": os.environ.get("KAFGRES_PG_PORT", "5433"),
        "PGUSER": "postgres",
        "PGDATABASE": "postgres",
        "KAFGRES_BOOTSTRAP": f"127.0.0.1:{os.environ.get('KAFGRES_KAFKA_PORT', '9092')}",
    }
    path = root / ".kafgres/env"
    if path.exists():
        for row in path.read_text().splitlines():
            key, sep, value = row.partition("=")
            if sep:
                env[key.strip()] = value.strip()
    return env


class KafgresCluster:
    def __init__(self, root: Path):
        self.root = root
        self.env = read_env(root)
        self.original_policy: tuple[str, bool] | None = None

    @property
    def bootstrap(self) -> str:
        return self.env["KAFGRES_BOOTSTRAP"]

    @property
    def kafka_port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def pg_env(self) -> dict[str, str]:
        keys = ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")
        return {**os.environ, **{k: self.env[k] for k in keys}}

    def reload_until(self, marker: bytes, timeout_s: float = 30.0) -> None:
        """pg_reload_conf(), then waits for the server log line containing `marker` (the broker worker's own)."""
        log = Path(self.env.get("KAFGRES_PG_LOG", self.root / ".kafgres/cluster/postgres.log"))
        offset = log.stat().st_size
        self.psql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout_s
        while marker not in log.read_bytes()[offset:]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {marker!r} in {log} within {timeout_s:.0f} s of the reload")
            time.sleep(0.05)

    def psql(self, sql: str, database: str | None = None) -> str:
        command = [str(PG_BIN / "psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
        if database:
            command += ["-d", database]
        done = subprocess.run(command, env=self.pg_env(), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def start(self) -> None:
        """./kafgres start: builds and installs the extension if needed, starts the cluster."""
        subprocess.run([str(self.root / "kafgres"), "start"], check=True, timeout=3600)
        self.env = read_env(self.root)

    def worker_pid(self) -> int | None:
        try:
            out = self.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafgres broker'")
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        return int(out.splitlines()[0]) if out else None

    def log_dir(self) -> Path | None:
        """Where the broker keeps topic data: kafgres.log_dir, else $PGDATA/kafgres."""
        try:
            row = self.psql("SELECT current_setting('kafgres.log_dir'), current_setting('data_directory')")
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        log_dir, _, data_directory = row.partition("|")
        return Path(log_dir) if log_dir else Path(data_directory) / "kafgres"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (port_open("127.0.0.1", self.kafka_port) and self.worker_pid()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafgres is not serving on {self.bootstrap} (no 'kafgres broker' worker)")
            time.sleep(0.5)

    def versions(self) -> dict[str, str]:
        out = {"postgres": self.psql("SHOW server_version")}
        out["kafgres"] = self.psql("SELECT extversion FROM pg_extension WHERE extname = 'kafgres'")
        return out

    def flush_policy(self) -> tuple[str, bool]:
        """The current policy, and whether ALTER SYSTEM (postgresql.auto.conf) set it."""
        row = self.psql("SELECT setting, coalesce(sourcefile, '') FROM pg_settings WHERE name = 'kafgres.flush_policy'")
        setting, _, source = row.partition("|")
        return setting, source.endswith("postgresql.auto.conf")

    def set_flush_policy(self, policy: str) -> None:
        """Makes the running policy `policy`, restarting Postgres only if it differs."""
        current = self.flush_policy()
        if self.original_policy is None:
            self.original_policy = current
        if current[0] == policy:
            return
        self.psql(f"ALTER SYSTEM SET kafgres.flush_policy = '{policy}'")
        self.restart()
        if self.flush_policy()[0] != policy:
            raise RuntimeError(f"kafgres.flush_policy is not {policy} after the restart")

    def restore_flush_policy(self) -> None:
        """Puts back the policy found at the start (and how it was set)."""
        if self.original_policy is None:
            return
        policy, from_alter_system = self.original_policy
        if self.flush_policy() == self.original_policy:
            return
        if from_alter_system:
            self.psql(f"ALTER SYSTEM SET kafgres.flush_policy = '{policy}'")
        else:
            self.psql("ALTER SYSTEM RESET kafgres.flush_policy")
        self.restart()

    def restart(self) -> None:
        print("[bench] restarting Postgres (./kafgres restart)", flush=True)
        subprocess.run([str(self.root / "kafgres"), "restart"], check=True, timeout=600)
        self.wait_ready()
