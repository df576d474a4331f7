#!/usr/bin/env python3
"""Change data capture benchmarks: Kafgres's `kafgres.capture` (docs/cdc.md)
and, with `--debezium`, Debezium's PostgreSQL connector in a Kafka Connect
worker against its own Postgres and Apache Kafka on the same machine
(scripts/bench/debezium_env.py), the same workload on each, in one run.

Each target captures a fresh table `(id bigserial PRIMARY KEY, v text,
at_us bigint)`. pgbench writes it (so the writers cost what a C client
costs, not what Python does), and a confluent-kafka (librdkafka) consumer
reads the change topic:

  cdc.single_tx   pgbench with --sessions clients, one INSERT of one row per
                  transaction, for --seconds: committed changes/s (rows in the
                  table), and visible_rate, the changes/s until the last one was
                  on the topic (drain_s after pgbench ended)
  cdc.batch_tx    the same with --batch rows per transaction (one INSERT ... SELECT)
  cdc.latency     INSERT-to-consumer latency at --rate transactions/s of one
                  row each (pgbench -R: Poisson arrivals, --latency-sessions
                  clients, --latency-seconds): each row carries
                  clock_timestamp() at its INSERT in at_us, and the consumer
                  subtracts it from its clock when the change arrives, so the
                  COMMIT (its WAL flush) is inside the figure. p50, p99, p99.9,
                  max in ms; pgbench's own schedule lag is printed beside it

Each figure prints one line of key=value pairs starting with `figure=`, e.g.

  figure=cdc.single_tx target=kafgres rate=1523.1 unit=changes/s count=4570 seconds=3.00 ...

Postgres settings are each target's defaults (`synchronous_commit = on`,
`fsync = on`): a change counts once its transaction committed durably.

Usage: .kafgres/venv/bin/python scripts/bench/cdc_bench.py [--debezium] [--rounds 3] [--seconds 5]
       [--sessions 4] [--batch 100] [--rate 1000] [--latency-seconds 10] [--latency-sessions 4]
       [--only cdc.latency ...]
Needs the dev cluster (`./kafgres start`); --debezium also Java and Maven (it starts its own Postgres,
Kafka and Connect on ports 5470, 19470, 18470).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_bench import REPO_ROOT, read_env  # noqa: E402

FIGURES = ["cdc.single_tx", "cdc.batch_tx", "cdc.latency"]
COLUMNS_DDL = "id bigserial PRIMARY KEY, v text NOT NULL, at_us bigint NOT NULL"
PGBENCH = Path(os.environ.get("KAFGRES_PG_BIN", "/usr/lib/postgresql/15/bin")) / "pgbench"
DRAIN_TIMEOUT_S = 120.0
WATERMARK_TIMEOUT_S = 10.0


@dataclass
class Target:
    name: str
    pg_conninfo: str
    bootstrap: str
    topic: str
    table: str


@contextlib.contextmanager
def kafgres_capture(table: str) -> Iterator[Target]:
    """A fresh captured table on the dev cluster; dropped and its topic deleted afterwards."""
    env = read_env(REPO_ROOT / ".kafgres" / "env")
    conninfo = (f"host={env.get('PGHOST', '127.0.0.1')} port={env.get('PGPORT', '5433')} "
                f"user={env.get('PGUSER', 'postgres')} dbname={env.get('PGDATABASE', 'postgres')}")
    bootstrap = env.get("KAFGRES_BOOTSTRAP", "127.0.0.1:9092")
    topic = f"bench.cdc.{table}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{table} ({COLUMNS_DDL})")
        conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{table}", topic))
    try:
        yield Target("kafgres", conninfo, bootstrap, topic, table)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS public.{table}")
            conn.execute("SELECT kafgres.delete_topic(%s)", (topic,))


def make_consumer(target: Target) -> Consumer:
    return Consumer({
        "bootstrap.servers": target.bootstrap, "group.id": f"cdc-bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
    })


def end_offset(target: Target) -> int:
    """The change topic's end offset; 0 while it does not exist (Debezium's appears with its first change)."""
    consumer = make_consumer(target)
    try:
        return consumer.get_watermark_offsets(TopicPartition(target.topic, 0), timeout=WATERMARK_TIMEOUT_S)[1]
    except KafkaException as e:
        if e.args[0].code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
            return 0
        raise
    finally:
        consumer.close()


def insert_script(rows_per_tx: int) -> str:
    """The pgbench script of one transaction: `rows_per_tx` rows, stamped with the time of the INSERT."""
    return ("INSERT INTO public.{table} (v, at_us) SELECT repeat('x', 64), "
            "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint "
            f"FROM generate_series(1, {rows_per_tx});\n")


def pgbench(target: Target, script: str, clients: int, seconds: float, rate: float | None = None) -> str:
    """Runs pgbench against the target's Postgres; returns its report."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write(script.format(table=target.table))
        f.flush()
        command = [str(PGBENCH), "-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(int(seconds)),
                   "-f", f.name]
        if rate is not None:
            command += ["-R", str(rate)]
        result = subprocess.run(command + [target.pg_conninfo], capture_output=True, text=True,
                                timeout=seconds + 120)
    if result.returncode != 0:
        raise SystemExit(f"{target.name}: pgbench failed: {result.stderr.strip()}")
    return result.stdout


def row_count(target: Target) -> int:
    with psycopg.connect(target.pg_conninfo, autocommit=True) as conn:
        return conn.execute(f"SELECT count(*) FROM public.{target.table}").fetchone()[0]


def wait_for_end_offset(target: Target, count: int) -> float:
    """Seconds until the topic holds `count` records; fails after DRAIN_TIMEOUT_S."""
    started = time.monotonic()
    while end_offset(target) < count:
        if time.monotonic() - started > DRAIN_TIMEOUT_S:
            raise SystemExit(f"{target.name}: the change topic did not reach {count} records "
                             f"within {DRAIN_TIMEOUT_S:.0f}s (it has {end_offset(target)})")
        time.sleep(0.005)
    return time.monotonic() - started


def throughput(target: Target, figure: str, rows_per_tx: int, sessions: int, seconds: float) -> None:
    rows_before, base = row_count(target), end_offset(target)
    started = time.monotonic()
    pgbench(target, insert_script(rows_per_tx), sessions, seconds)
    elapsed = time.monotonic() - started
    count = row_count(target) - rows_before
    drain = wait_for_end_offset(target, base + count)
    print(f"figure={figure} target={target.name} rate={count / elapsed:.1f} unit=changes/s count={count} "
          f"seconds={elapsed:.2f} sessions={sessions} rows_per_tx={rows_per_tx} drain_s={drain:.3f} "
          f"visible_rate={count / (elapsed + drain):.1f}", flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def latency(target: Target, rate: float, seconds: float, sessions: int) -> None:
    """Single-row transactions at `rate` per second; each change's latency from its INSERT to the consumer."""
    rows_before, base = row_count(target), end_offset(target)
    latencies_ms: list[float] = []
    consumer = make_consumer(target)
    consumer.assign([TopicPartition(target.topic, 0, base)])
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None or msg.value() is None:
                continue
            now_us = time.time() * 1_000_000
            after = json.loads(msg.value()).get("after") or {}
            if "at_us" in after:
                latencies_ms.append((now_us - after["at_us"]) / 1000)

    receiver = threading.Thread(target=receive)
    receiver.start()
    try:
        time.sleep(1.0)  # the consumer's first fetch is in flight before the first change
        report = pgbench(target, insert_script(1), sessions, seconds, rate)
        count = row_count(target) - rows_before
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while len(latencies_ms) < count and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        receiver.join(10)
        consumer.close()
    if len(latencies_ms) != count:
        raise SystemExit(f"{target.name}: {len(latencies_ms)} of {count} changes reached the consumer")
    ms = sorted(latencies_ms)
    tps = re.search(r"tps = ([0-9.]+)", report)
    lag = re.search(r"rate limit schedule lag: avg ([0-9.]+) \(max ([0-9.]+)\) ms", report)
    print(f"figure=cdc.latency target={target.name} rate={rate:.0f} achieved_rate={tps.group(1) if tps else '?'} "
          f"sessions={sessions} count={count} p50_ms={percentile(ms, 0.5):.2f} p99_ms={percentile(ms, 0.99):.2f} "
          f"p999_ms={percentile(ms, 0.999):.2f} max_ms={ms[-1]:.2f} mean_ms={statistics.fmean(ms):.2f} "
          f"schedule_lag_avg_ms={lag.group(1) if lag else '?'} schedule_lag_max_ms={lag.group(2) if lag else '?'}",
          flush=True)


def run_figures(target: Target, args: argparse.Namespace) -> None:
    for figure in args.only or FIGURES:
        if figure == "cdc.single_tx":
            throughput(target, figure, 1, args.sessions, args.seconds)
        elif figure == "cdc.batch_tx":
            throughput(target, figure, args.batch, args.sessions, args.seconds)
        elif figure == "cdc.latency":
            latency(target, args.rate, args.latency_seconds, args.latency_sessions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debezium", action="store_true", help="also Debezium + Kafka Connect + Apache Kafka")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--latency-sessions", type=int, default=4)
    parser.add_argument("--only", nargs="*", choices=FIGURES)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        targets = []
        table = f"cdc_bench_{uuid.uuid4().hex[:8]}"
        targets.append(stack.enter_context(kafgres_capture(table)))
        if args.debezium:
            from debezium_env import debezium_capture

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafgres-debezium-")))
            d = stack.enter_context(debezium_capture(table, COLUMNS_DDL, workdir))
            targets.append(Target(d.name, d.pg_conninfo, d.bootstrap, d.topic, table))
        for round_number in range(1, args.rounds + 1):
            for target in targets:  # side by side: each round runs every target
                print(f"# round {round_number} {target.name}", flush=True)
                run_figures(target, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
