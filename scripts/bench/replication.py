#!/usr/bin/env python3
"""Replication to a standby, measured (issue 19; docs/benchmarks.md).

Runs against the dev cluster (`./kafgres start`) and a standby of it that it
makes and removes itself (`./kafgres standby`), both on this machine:

1. produce throughput, 1 KiB and 256 KiB records, acks=all, with no standby,
   an asynchronous one and a synchronous one, in alternating rounds;
2. acks=all latency of sequential sends (p50/p99), the same three ways;
3. replication lag while producing 1 KiB records at a steady ~100 MB/s to an
   asynchronous standby (sampled from kafgres.replicas);
4. catch-up: the standby stopped, a backlog of --backlog-mb written, the
   standby started again: MB/s until it has everything;
5. the WAL path as a custom resource manager would take it: the same bytes
   written as WAL records (pg_logical_emit_message, the nearest thing
   PostgreSQL 15 offers without a C rmgr), with and without the synchronous
   standby, to compare with the follower's figures;
6. promotion: `pg_ctl promote` to the first acks=all produce the standby takes.

Every figure printed is measured in this run. Usage:
    scripts/bench-replication.sh [--rounds N] [--seconds S] [--backlog-mb MB]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = os.environ.get("KAFGRES_BENCH_BIN", str(ROOT / "target/release/kafgres-bench"))
PRIMARY = "127.0.0.1:9092"
STANDBY = "127.0.0.1:9093"
PG = {"PGHOST": "127.0.0.1", "PGPORT": "5433", "PGUSER": "postgres", "PGDATABASE": "postgres"}


def sh(*cmd: str, env: dict | None = None, check: bool = True, timeout: float = 900) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def psql(sql: str, port: str = "5433") -> str:
    return sh("psql", "-Atc", sql, env={**PG, "PGPORT": port}).strip()


def bench(*args: str) -> dict[str, str]:
    line = sh(BENCH, *args, check=False).strip().splitlines()
    if not line:
        sys.exit(f"kafgres-bench {' '.join(args)} printed nothing")
    return dict(kv.split("=", 1) for kv in line[-1].split())


def kafgres(*args: str) -> None:
    sh(str(ROOT / "kafgres"), *args)


def standby_mode(mode: str) -> None:
    """none | async | sync: the dev cluster's standby set up that way, caught up."""
    if mode == "none":
        kafgres("standby", "destroy")
        return
    running = subprocess.run(["psql", "-Atc", "SELECT 1"], capture_output=True, env={**os.environ, **PG, "PGPORT": "5434"})
    if running.returncode != 0:
        kafgres("standby", "start")
    psql(f"ALTER SYSTEM SET synchronous_standby_names = '{'kafgres_standby' if mode == 'sync' else ''}'")
    psql("SELECT pg_reload_conf()")
    wait_caught_up(120)


def wait_caught_up(timeout_s: float) -> float:
    started = time.monotonic()
    since = psql("SELECT now()")
    while time.monotonic() - started < timeout_s:
        row = psql(f"SELECT connected AND caught_up_at > '{since}' FROM kafgres.replicas WHERE name = 'kafgres_standby'")
        if row == "t":
            return time.monotonic() - started
        time.sleep(0.05)
    sys.exit(f"the standby did not catch up within {timeout_s}s: {psql('SELECT * FROM kafgres.replicas')}")


def throughput(size: int, seconds: int, tag: str) -> float:
    topic = f"bench-repl-{tag}-{size}"
    r = bench("produce", "--bootstrap", PRIMARY, "--topic", topic, "--create-partitions", "4", "--producers", "4",
              "--size", str(size), "--seconds", str(seconds), "--acks", "all", "--deadline-s", str(seconds + 120))
    bench("delete-topics", "--bootstrap", PRIMARY, topic)
    if r.get("errors") != "0":
        print(f"  ({tag} {size}: {r.get('errors')} errors)")
    return float(r["mb_per_s"])


def latency(tag: str) -> tuple[float, float]:
    topic = f"bench-repl-sync-{tag}"
    r = bench("sync", "--bootstrap", PRIMARY, "--topic", topic, "--create-partitions", "1", "--count", "3000",
              "--size", "1024")
    bench("delete-topics", "--bootstrap", PRIMARY, topic)
    ms = lambda v: float(v.rstrip("ms"))  # noqa: E731
    return ms(r["p50"]), ms(r["p99"])


def lag_under_load(seconds: int) -> dict[str, float]:
    topic = "bench-repl-lag"
    load = subprocess.Popen(
        [BENCH, "produce", "--bootstrap", PRIMARY, "--topic", topic, "--create-partitions", "4", "--producers", "2",
         "--size", "1024", "--rate", "100000", "--seconds", str(seconds), "--acks", "all"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    lags: list[int] = []
    ages: list[float] = []
    time.sleep(1)
    while load.poll() is None:
        row = psql("SELECT lag_records, extract(epoch FROM now() - coalesce(caught_up_at, now())) "
                   "FROM kafgres.replicas WHERE name = 'kafgres_standby'")
        if row:
            lag, age = row.split("|")
            lags.append(int(lag))
            ages.append(float(age))
        time.sleep(0.2)
    out = dict(kv.split("=", 1) for kv in (load.stdout.read() if load.stdout else "").split())
    bench("delete-topics", "--bootstrap", PRIMARY, topic)
    return {
        "mb_per_s": float(out.get("mb_per_s", "nan")),
        "lag_records_mean": statistics.mean(lags) if lags else float("nan"),
        "lag_records_max": max(lags) if lags else float("nan"),
        "behind_s_max": max(ages) if ages else float("nan"),
        "samples": len(lags),
    }


def catch_up(backlog_mb: int) -> float:
    topic = "bench-repl-backlog"
    kafgres("standby", "stop")
    count = backlog_mb * 1024
    bench("produce", "--bootstrap", PRIMARY, "--topic", topic, "--create-partitions", "4", "--producers", "4",
          "--size", "1024", "--count", str(count), "--acks", "1", "--deadline-s", "600")
    started = time.monotonic()
    kafgres("standby", "start")
    # The standby's broker starts, then copies: catch-up is counted from its start.
    wait_caught_up(900)
    elapsed = time.monotonic() - started
    bench("delete-topics", "--bootstrap", PRIMARY, topic)
    return backlog_mb / elapsed


def wal_path(size: int, mb: int = 256) -> float:
    """MB/s of `size`-byte payloads written as WAL records and committed: what logging each appended batch in
    the WAL (a custom resource manager's path) costs before the segment files are written at all."""
    psql("CHECKPOINT")
    rows = mb * (1 << 20) // size
    started = time.monotonic()
    # 16 commits: each waits for the standby when it is synchronous.
    for _ in range(16):
        psql(f"SELECT count(pg_logical_emit_message(true, 'kafgres-bench', repeat('x', {size}))) "
             f"FROM generate_series(1, {rows // 16})")
    return mb / (time.monotonic() - started)


def promotion() -> float:
    """The primary stopped (so that no client is sent back to it), the standby promoted: seconds from the
    promote command to the first acks=all produce the promoted broker answered."""
    topic = "bench-repl-promote"
    bench("sync", "--bootstrap", PRIMARY, "--topic", topic, "--create-partitions", "1", "--count", "10")
    wait_caught_up(60)
    primary_pgdata = env_file()["KAFGRES_PGDATA"]
    sh("runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D", primary_pgdata, "-m", "fast",
       "-w", "stop")
    started = time.monotonic()
    sh("runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl", "-D", standby_pgdata(), "-w", "promote")
    try:
        while True:
            r = bench("sync", "--bootstrap", STANDBY, "--topic", topic, "--count", "1", "--warmup", "0",
                      "--message-timeout-ms", "5000")
            if r.get("errors") == "0":
                return time.monotonic() - started
            if time.monotonic() - started > 60:
                sys.exit("the promoted standby took no produce within 60 s")
    finally:
        kafgres("standby", "destroy")
        kafgres("start")


def env_file() -> dict[str, str]:
    return dict(line.split("=", 1) for line in (ROOT / ".kafgres/env").read_text().split() if "=" in line)


def standby_pgdata() -> str:
    """scripts/kafgres.sh's standby_paths: the cluster directory with -standby."""
    cluster = Path(env_file()["KAFGRES_PGDATA"]).parent
    return str(cluster.parent / (cluster.name + "-standby") / "pgdata")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--backlog-mb", type=int, default=1024)
    parser.add_argument("--lag-seconds", type=int, default=15)
    args = parser.parse_args()

    modes = ["none", "async", "sync"]
    tput: dict[tuple[str, int], list[float]] = {}
    lat: dict[str, list[tuple[float, float]]] = {}
    for round_no in range(args.rounds):
        for mode in modes if round_no % 2 == 0 else list(reversed(modes)):
            standby_mode(mode)
            for size in (1024, 262144):
                tput.setdefault((mode, size), []).append(throughput(size, args.seconds, mode))
            lat.setdefault(mode, []).append(latency(mode))
            print(f"round {round_no + 1} {mode}: 1KiB {tput[(mode, 1024)][-1]:.0f} MB/s, "
                  f"256KiB {tput[(mode, 262144)][-1]:.0f} MB/s, sync p50/p99 {lat[mode][-1][0]:.3f}/{lat[mode][-1][1]:.3f} ms",
                  flush=True)

    standby_mode("async")
    lag = lag_under_load(args.lag_seconds)
    rate = catch_up(args.backlog_mb)
    standby_mode("none")
    wal_alone = {size: wal_path(size) for size in (1024, 262144)}
    standby_mode("sync")
    wal_sync = {size: wal_path(size) for size in (1024, 262144)}
    psql("ALTER SYSTEM RESET synchronous_standby_names")
    psql("SELECT pg_reload_conf()")
    promote_s = promotion()

    print("\n== replication figures (medians over rounds) ==")
    for size, label in ((1024, "1 KiB"), (262144, "256 KiB")):
        base = statistics.median(tput[("none", size)])
        for mode in modes:
            value = statistics.median(tput[(mode, size)])
            print(f"produce {label:7} acks=all, standby {mode:5}: {value:8.0f} MB/s  ({100 * value / base:5.1f}% of none)")
    for mode in modes:
        p50 = statistics.median(x[0] for x in lat[mode])
        p99 = statistics.median(x[1] for x in lat[mode])
        print(f"sequential acks=all 1 KiB, standby {mode:5}: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print(f"async standby at {lag['mb_per_s']:.0f} MB/s offered: lag mean {lag['lag_records_mean']:.0f} records, "
          f"max {lag['lag_records_max']} records, behind at most {lag['behind_s_max']:.2f} s ({lag['samples']} samples)")
    print(f"catch-up after a {args.backlog_mb} MB backlog: {rate:.0f} MB/s")
    for size, label in ((1024, "1 KiB"), (262144, "256 KiB")):
        print(f"the same bytes as {label} WAL records (custom-rmgr path): no standby {wal_alone[size]:.0f} MB/s, "
              f"synchronous standby {wal_sync[size]:.0f} MB/s")
    print(f"pg_ctl promote to the first acks=all produce: {promote_s:.2f} s")


if __name__ == "__main__":
    main()
