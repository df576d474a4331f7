#!/usr/bin/env python3
"""Benchmarks of the SQL API against the running cluster (`./kafgres start`).

Measured from SQL through psycopg 3, with confluent-kafka (librdkafka) on the
Kafka side, all in this one process so the clocks agree:

  send.single_tx      one kafgres.send() per transaction: sends/s
  send.multi_tx       --per-tx sends per transaction (one statement): sends/s
  send.batch          kafgres.send_batch() of --batch values per transaction: records/s
  send.visible        commit-to-visible latency: COMMIT returning -> a long-polling
                      consumer receiving the record (p50/p99/max, one record at a time)
  send.wal_retention  WAL the SQL bridge's `kafgres_sql_bridge` slot retains (current WAL position minus its
                      restart_lsn) sampled every 0.5 s during --retention-seconds of
                      send_batch() load from two sessions: max and last, with the WAL
                      rate, so "bounded" is a number, not a claim
  consume.throughput  kafgres.consume(max_records => --consume-batch), COMMIT per call: records/s
  consume.latency     producer ack (acks=all) -> kafgres.consume(wait => ...) returning
                      the record (p50/p99/max, one record at a time); also from the
                      produce() call

Each figure prints one line of space-separated key=value pairs, starting with
`figure=`, e.g.

  figure=send.single_tx rate=2140.3 unit=sends/s count=6421 seconds=3.00

The default run takes about 20 s. The throughput figures count committed
transactions; `drain_s` says how long after the last COMMIT the broker had
appended everything (so `visible_rate` is records/s until visible).

Usage: scripts/bench/sql_bench.py [--seconds 3] [--samples 200] [--only send.visible ...]
Needs psycopg 3 and confluent-kafka (both in tests/requirements.txt; use .kafgres/venv/bin/python).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, Producer, TopicPartition

REPO_ROOT = Path(__file__).resolve().parents[2]
# The SQL bridge's physical slot (crates/kafgres/src/bridge/slot.rs, SLOT_NAME).
BRIDGE_SLOT = "kafgres_sql_bridge"
FIGURES = [
    "send.single_tx", "send.multi_tx", "send.batch", "send.visible", "send.wal_retention",
    "consume.throughput", "consume.latency",
]


def read_env(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    if not path.is_file():
        return env
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            env[key.strip()] = " ".join(shlex.split(value))
    return env


def emit(figure: str, **fields: object) -> None:
    parts = [f"figure={figure}"]
    for key, value in fields.items():
        parts.append(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}")
    print(" ".join(parts), flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def emit_latency(figure: str, seconds: list[float], **extra: object) -> None:
    ms = [s * 1000 for s in seconds]
    emit(figure, p50_ms=percentile(ms, 50), p99_ms=percentile(ms, 99), max_ms=max(ms),
         mean_ms=statistics.fmean(ms), samples=len(ms), **extra)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        env = read_env(Path(args.env))
        self.conninfo = args.pg or (
            f"host={env.get('PGHOST', '127.0.0.1')} port={env.get('PGPORT', '5433')} "
            f"user={env.get('PGUSER', 'postgres')} dbname={env.get('PGDATABASE', 'postgres')}"
        )
        self.bootstrap = args.bootstrap or env.get("KAFGRES_BOOTSTRAP", "127.0.0.1:9092")
        self.args = args
        self.admin_conn = psycopg.connect(self.conninfo, autocommit=True)
        self.topics: list[str] = []

    def topic(self, tag: str, partitions: int = 1) -> str:
        name = f"sql-bench-{tag}-{uuid.uuid4().hex[:8]}"
        self.admin_conn.execute("select kafgres.create_topic(%s, %s)", (name, partitions))
        self.topics.append(name)
        return name

    def close(self) -> None:
        for name in self.topics:
            try:
                self.admin_conn.execute("select kafgres.delete_topic(%s)", (name,))
            except psycopg.Error as e:
                print(f"# could not delete {name}: {e}", file=sys.stderr)
        self.admin_conn.close()

    def log_end(self, topic: str) -> int:
        return self.admin_conn.execute(
            "select coalesce(sum(log_end_offset), 0) from kafgres.partition_status where topic = %s", (topic,)
        ).fetchone()[0]

    def wait_visible(self, topic: str, count: int, timeout_s: float = 60.0) -> float:
        """Seconds until the topic holds `count` records (polled every 5 ms)."""
        started = time.perf_counter()
        while self.log_end(topic) < count:
            if time.perf_counter() - started > timeout_s:
                raise SystemExit(f"{topic}: fewer than {count} records visible after {timeout_s:.0f}s")
            time.sleep(0.005)
        return time.perf_counter() - started

    # --- sends -------------------------------------------------------------------------------

    def sends(self, figure: str, statement: str, params_for, records_per_tx: int, unit: str) -> None:
        topic = self.topic(figure.replace(".", "-"), partitions=self.args.partitions)
        value = "x" * self.args.value_bytes
        with psycopg.connect(self.conninfo) as conn:
            conn.execute(statement, params_for(topic, value, 0))  # warm-up, not counted
            conn.rollback()
            count = txs = 0
            started = time.perf_counter()
            deadline = started + self.args.seconds
            while time.perf_counter() < deadline:
                conn.execute(statement, params_for(topic, value, txs))
                conn.commit()
                txs += 1
                count += records_per_tx
            elapsed = time.perf_counter() - started
        drain = self.wait_visible(topic, count)
        emit(figure, rate=count / elapsed, unit=unit, count=count, transactions=txs, seconds=elapsed,
             drain_s=drain, visible_rate=count / (elapsed + drain), value_bytes=self.args.value_bytes)

    def send_single_tx(self) -> None:
        self.sends("send.single_tx", "select kafgres.send(%s, %s::text, key => %s)",
                   lambda t, v, i: (t, v, f"k{i}"), 1, "sends/s")

    def send_multi_tx(self) -> None:
        n = self.args.per_tx
        self.sends("send.multi_tx",
                   "select count(kafgres.send(%s, %s::text, key => 'k' || i)) from generate_series(1, %s) i",
                   lambda t, v, i: (t, v, n), n, "sends/s")

    def send_batch(self) -> None:
        n = self.args.batch
        self.sends("send.batch",
                   "select kafgres.send_batch(%s, array_fill(%s::text, array[%s]))",
                   lambda t, v, i: (t, v, n), n, "records/s")

    def send_visible(self) -> None:
        topic = self.topic("visible")
        received: dict[int, float] = {}
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"sql-bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "fetch.wait.max.ms": 10000, "fetch.min.bytes": 1,
            "fetch.error.backoff.ms": 0,
        })
        consumer.assign([TopicPartition(topic, 0, 0)])  # a fresh topic: from its first record
        stop = threading.Event()

        def poll_loop() -> None:
            while not stop.is_set():
                msg = consumer.poll(0.05)
                if msg is not None and msg.error() is None:
                    received[int(msg.value())] = time.perf_counter()

        poller = threading.Thread(target=poll_loop, daemon=True)
        poller.start()
        latencies = []
        try:
            with psycopg.connect(self.conninfo) as conn:
                # The first 50 records warm up the connections and are not counted.
                for i in range(-50, self.args.samples):
                    conn.execute("select kafgres.send(%s, %s::text, partition => 0)", (topic, str(i)))
                    conn.commit()
                    committed = time.perf_counter()
                    deadline = committed + 10
                    while i not in received:
                        if time.perf_counter() > deadline:
                            raise SystemExit(f"send.visible: record {i} not received within 10 s")
                        time.sleep(0.0001)
                    if i >= 0:
                        latencies.append(received[i] - committed)
        finally:
            stop.set()
            poller.join(2)
            consumer.close()
        emit_latency("send.visible", latencies, measured="commit_return_to_consumer_poll")

    def send_wal_retention(self) -> None:
        topic = self.topic("retention", partitions=self.args.partitions)
        value = "x" * self.args.value_bytes
        stop = threading.Event()

        def load() -> None:
            with psycopg.connect(self.conninfo) as conn:
                while not stop.is_set():
                    conn.execute("select kafgres.send_batch(%s, array_fill(%s::text, array[%s]))",
                                 (topic, value, self.args.batch))
                    conn.commit()

        loaders = [threading.Thread(target=load, daemon=True) for _ in range(2)]
        sample = ("select pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, pg_current_wal_lsn()::text "
                  f"from pg_replication_slots where slot_name = '{BRIDGE_SLOT}'")
        first_lsn = self.admin_conn.execute("select pg_current_wal_lsn()::text").fetchone()[0]
        for t in loaders:
            t.start()
        retained: list[int] = []
        started = time.perf_counter()
        try:
            while time.perf_counter() - started < self.args.retention_seconds:
                time.sleep(0.5)
                row = self.admin_conn.execute(sample).fetchone()
                if row is None:
                    raise SystemExit(f"send.wal_retention: no slot named {BRIDGE_SLOT} (is the SQL bridge running?)")
                retained.append(int(row[0]))
        finally:
            stop.set()
            for t in loaders:
                t.join(30)
        elapsed = time.perf_counter() - started
        wal = self.admin_conn.execute("select pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint",
                                      (first_lsn,)).fetchone()[0]
        emit("send.wal_retention", max_mb=max(retained) / 1e6, last_mb=retained[-1] / 1e6,
             median_mb=statistics.median(retained) / 1e6, wal_mb_per_s=wal / 1e6 / elapsed,
             samples=len(retained), seconds=elapsed)

    # --- consume -----------------------------------------------------------------------------

    def produce(self, topic: str, count: int, partitions: int) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})
        value = b"x" * self.args.value_bytes
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, value=value, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        if producer.flush(60) != 0:
            raise SystemExit("produce: records left unacknowledged after 60 s")

    def consume_throughput(self) -> None:
        partitions = self.args.partitions
        topic = self.topic("consume", partitions=partitions)
        total = self.args.consume_records
        self.produce(topic, total, partitions)
        self.wait_visible(topic, total)
        group = f"sql-bench-{uuid.uuid4().hex[:8]}"
        count = calls = 0
        with psycopg.connect(self.conninfo) as conn:
            started = time.perf_counter()
            while count < total:
                n = conn.execute("select count(*) from kafgres.consume(%s, %s, %s)",
                                 (group, topic, self.args.consume_batch)).fetchone()[0]
                conn.commit()
                calls += 1
                count += n
                if n == 0 and time.perf_counter() - started > 60:
                    raise SystemExit(f"consume.throughput: stuck at {count} of {total} records")
            elapsed = time.perf_counter() - started
        emit("consume.throughput", rate=count / elapsed, unit="records/s", count=count, calls=calls,
             seconds=elapsed, max_records=self.args.consume_batch, value_bytes=self.args.value_bytes)

    def consume_latency(self) -> None:
        topic = self.topic("consume-latency")
        group = f"sql-bench-{uuid.uuid4().hex[:8]}"
        returned: dict[int, float] = {}
        errors: list[str] = []
        stop = threading.Event()

        def consume_loop() -> None:
            with psycopg.connect(self.conninfo) as conn:
                while not stop.is_set():
                    try:
                        rows = conn.execute("select value from kafgres.consume_text(%s, %s, 100, wait => '1 second')",
                                            (group, topic)).fetchall()
                        now = time.perf_counter()
                        conn.commit()
                    except psycopg.Error as e:
                        errors.append(str(e).splitlines()[0])
                        return
                    for (value,) in rows:
                        returned[int(value)] = now

        consumer = threading.Thread(target=consume_loop, daemon=True)
        consumer.start()
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})
        from_ack, from_produce = [], []
        try:
            for i in range(-20, self.args.samples):
                acked: list[float] = []
                produced = time.perf_counter()
                producer.produce(topic, value=str(i).encode(), partition=0,
                                 on_delivery=lambda err, msg: acked.append(time.perf_counter()))
                producer.flush(10)
                deadline = time.perf_counter() + 10
                while i not in returned:
                    if errors or time.perf_counter() > deadline:
                        raise SystemExit(f"consume.latency: record {i} not returned by consume ({errors})")
                    time.sleep(0.0001)
                if i >= 0 and acked:
                    from_ack.append(returned[i] - acked[0])
                    from_produce.append(returned[i] - produced)
        finally:
            stop.set()
            consumer.join(5)
        emit_latency("consume.latency", from_ack, measured="producer_ack_to_consume_return")
        emit_latency("consume.latency_from_produce", from_produce, measured="produce_call_to_consume_return")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=str(REPO_ROOT / ".kafgres" / "env"), help="the env file ./kafgres start wrote")
    parser.add_argument("--pg", help="libpq conninfo (default: from the env file)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: from the env file)")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each send throughput figure")
    parser.add_argument("--samples", type=int, default=200, help="samples per latency figure")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--per-tx", type=int, default=100, help="sends per transaction for send.multi_tx")
    parser.add_argument("--batch", type=int, default=1000, help="values per send_batch() call")
    parser.add_argument("--retention-seconds", type=float, default=30.0, help="load duration for send.wal_retention")
    parser.add_argument("--consume-records", type=int, default=200000)
    parser.add_argument("--consume-batch", type=int, default=500, help="max_records per consume() call")
    parser.add_argument("--only", nargs="+", choices=FIGURES, help="run only these figures")
    args = parser.parse_args()

    bench = Bench(args)
    runners = {
        "send.single_tx": bench.send_single_tx,
        "send.multi_tx": bench.send_multi_tx,
        "send.batch": bench.send_batch,
        "send.visible": bench.send_visible,
        "send.wal_retention": bench.send_wal_retention,
        "consume.throughput": bench.consume_throughput,
        "consume.latency": bench.consume_latency,
    }
    try:
        for figure in args.only or FIGURES:
            runners[figure]()
    finally:
        bench.close()


if __name__ == "__main__":
    main()
