"""Two throwaway clusters that take turns as primary and hot standby (issue 19).

Each node keeps the settings that are its own (ports, node id, walreceiver
name, synchronous_standby_names) in `node.conf`, included last from
postgresql.conf: pg_basebackup and pg_rewind copy postgresql.conf and
postgresql.auto.conf from the other node, so the node's own file is written
again after each copy.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import psycopg

from support import PG_BIN, ThrowawayCluster, as_postgres, port_is_free


class Node(ThrowawayCluster):
    def __init__(self, name: str, pg_port: int, kafka_port: int, node_id: int, listeners: str = "") -> None:
        super().__init__(f"failover-{name}", pg_port, kafka_port)
        self.name = name
        self.node_id = node_id
        self.sync_names = ""
        # kafgres.listeners of this node (more listeners beside the primary one), if any.
        self.listeners = listeners

    # --- configuration -------------------------------------------------------

    def write_node_conf(self, sync_names: str | None = None) -> None:
        if sync_names is not None:
            self.sync_names = sync_names
        text = "\n".join([
            "# this node's own settings (written by the failover test)",
            f"port = {self.pg_port}",
            f"unix_socket_directories = '{self.socket_dir}'",
            f"kafgres.port = {self.kafka_port}",
            f"kafgres.node_id = {self.node_id}",
            f"cluster_name = '{self.name}'",
            f"synchronous_standby_names = '{self.sync_names}'",
            *([f"kafgres.listeners = '{self.listeners}'"] if self.listeners else []),
            "",
        ])
        path = self.pgdata / "node.conf"
        path.write_text(text)
        os.chown(path, _uid("postgres"), _gid("postgres"))

    def init_primary(self) -> None:
        self.init({
            "wal_log_hints": "on",
            "hot_standby": "on",
            "wal_keep_size": "'256MB'",
            "kafgres.flush_policy": "fsync",
            "kafgres.group_initial_rebalance_delay_ms": "0",
            "include_if_exists": "'node.conf'",
        })
        self.write_node_conf()

    def copy_of(self, primary: "Node") -> None:
        """A base backup of `primary` (topic data included) as this node's data directory, set up as its standby."""
        as_postgres(
            str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.pg_port), "-U", "postgres",
            "-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast", timeout_s=300,
        )
        self.write_node_conf("")

    def rewind_from(self, primary: "Node") -> str:
        """pg_rewind this (stopped, possibly crashed) node onto `primary`'s timeline, as its standby."""
        # A promotion's end-of-recovery checkpoint runs in the background; until it is done the promoted
        # node's pg_control still names the old timeline and pg_rewind sees nothing to rewind.
        primary.sql("CHECKPOINT")
        result = as_postgres(
            str(PG_BIN / "pg_rewind"), "-D", str(self.pgdata), "-R",
            f"--source-server=host=127.0.0.1 port={primary.pg_port} user=postgres dbname=postgres",
            timeout_s=300,
        )
        self.write_node_conf("")
        return result.stdout + result.stderr

    def reload(self) -> None:
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "reload")

    def set_sync_names(self, names: str) -> None:
        self.write_node_conf(names)
        self.reload()
        deadline = time.monotonic() + 20
        while self.sql("SHOW synchronous_standby_names")[0][0] != names:
            assert time.monotonic() < deadline, "the reload did not take synchronous_standby_names"
            time.sleep(0.05)

    # --- life ----------------------------------------------------------------

    def promote(self) -> None:
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60", "promote")

    def kill_everything(self) -> None:
        """SIGKILL the postmaster and every process it started (a machine that dies)."""
        pid = self.postmaster_pid()
        assert pid is not None, "no postmaster to kill"
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        os.kill(pid, signal.SIGKILL)
        for child in children:
            try:
                os.kill(int(child), signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while not (port_is_free(self.kafka_port) and port_is_free(self.pg_port) and not _alive(pid)):
            assert time.monotonic() < deadline, f"{self.name}'s processes did not go away"
            time.sleep(0.05)
        # Nothing here reaps the orphaned postmaster: its zombie would make the next start (and pg_rewind's crash
        # recovery) take postmaster.pid for a live server's. A machine that died leaves no process at all.
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)
        for leftover in self.socket_dir.glob(f".s.PGSQL.{self.pg_port}*"):
            leftover.unlink(missing_ok=True)

    def in_recovery(self) -> bool:
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])

    def replication(self) -> dict:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            cur = conn.execute("SELECT * FROM kafgres.replication")
            return dict(zip([d.name for d in cur.description], cur.fetchone()))

    def replicas(self) -> list[dict]:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            cur = conn.execute("SELECT * FROM kafgres.replicas")
            names = [d.name for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def replica_partitions(self) -> list[dict]:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            cur = conn.execute("SELECT * FROM kafgres.replica_partitions")
            names = [d.name for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def wait_for_role(self, role: str, timeout_s: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout_s
        last: dict = {}
        while time.monotonic() < deadline:
            try:
                last = self.replication()
                if last["role"] == role:
                    return last
            except psycopg.Error as e:
                last = {"error": str(e)}
            time.sleep(0.05)
        raise AssertionError(f"{self.name} is not {role} after {timeout_s:.0f}s: {last}\n{self.log_tail()}")


@contextlib.contextmanager
def node_pair(nodes, ready_timeout_s: float, keep_logs_in: Path | None = None) -> Iterator[tuple["Node", "Node"]]:
    """Two nodes on `nodes` ((name, pg port, kafka port, node id[, kafgres.listeners]) each): the first a serving primary with the
    extension, the second not made yet. Both are destroyed at the end (their server logs printed with
    KAFGRES_KEEP_FAILOVER_LOGS, or copied into `keep_logs_in`)."""
    import pytest

    for _, pg, kafka, *_ in nodes:
        if not (port_is_free(pg) and port_is_free(kafka)):
            pytest.fail(f"port {pg} or {kafka} is taken: a failover cluster of an earlier run is still up?")
    first, second = (Node(*n) for n in nodes)
    try:
        first.init_primary()
        first.start()
        first.sql("CREATE EXTENSION kafgres")
        first.wait_until_serving(ready_timeout_s)
        yield first, second
    finally:
        for node in (first, second):
            if os.environ.get("KAFGRES_KEEP_FAILOVER_LOGS"):
                print(f"--- {node.name} log tail ---\n{node.log_tail(80)}")
            if keep_logs_in is not None:
                (keep_logs_in / f"{node.name}.postgres.log").write_text(node.log_text())
            node.destroy()


def wait_until_caught_up(primary: Node, standby: Node, timeout_s: float = 120.0) -> None:
    """Until the standby streams the WAL synchronously (if named) and its broker has copied everything the
    leader had from now on: its fetch offsets reached every partition's log end after this call began."""
    since = primary.sql("SELECT now()")[0][0]
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        wal = primary.sql(
            "SELECT sync_state, replay_lsn = pg_current_wal_lsn() FROM pg_stat_replication "
            f"WHERE application_name = '{standby.name}'"
        )
        replicas = [r for r in primary.replicas() if r["name"] == standby.name]
        last = (wal, replicas)
        wal_ok = bool(wal) and (wal[0][0] in ("sync", "quorum") or not primary.sync_names)
        caught_up_at = replicas[0]["caught_up_at"] if replicas else None
        if wal_ok and replicas and replicas[0]["connected"] and caught_up_at is not None and caught_up_at > since:
            return
        time.sleep(0.1)
    raise AssertionError(f"{standby.name} did not catch up with {primary.name}: {last}\n{standby.log_tail()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie until its parent reaps it: gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _gid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid
