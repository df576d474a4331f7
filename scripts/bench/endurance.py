"""Endurance: an hour at half the maximum, producers, a consumer group and the SQL API together
(issue 24, target 5). Is the broker flat: RSS, open files, end-to-end p99 and throughput per minute?

    .kafgres/venv/bin/python scripts/bench/endurance.py [--minutes 60] [--load 0.5]
    .kafgres/venv/bin/python scripts/bench/endurance.py --minutes 2 --rate 2000 --no-chart   # CI's smoke

Against the running cluster of `./kafgres start` (.kafgres/env); needs the e2e venv's
confluent-kafka and psycopg (`.kafgres/venv`), and for the chart the bench venv's matplotlib
(`.kafgres/bench/venv`, made by `./kafgres bench`), which renders it in a child process.

1. The maximum: unless --rate is given, the producers below send unpaced for --calibrate-s
   seconds into a topic of their own (deleted after), alone: records acknowledged per second.
2. The run, for --minutes at --load times that maximum (or at --rate), all at once:
   - --producers processes (confluent-kafka, acks=all), each paced to its share of the rate on a
     fixed schedule; each value starts with its scheduled send time (CLOCK_MONOTONIC, shared by
     the processes of one machine), so latency counts from the schedule (no coordinated omission);
   - a consumer group of --consumers processes subscribed to the topic, reading everything from
     the beginning, auto-committing; each notes every offset it reads and the latency of each
     record (read time minus scheduled send time);
   - the SQL API in one session: transactions of `kafgres.send` (--sql-batch records each,
     --sql-txn-per-s a second) into a topic of their own, and `kafgres.consume_text` of a SQL
     group in a transaction of its own after each.
   Every --sample-s seconds (60: per minute) it records the broker's RSS (VmRSS of the process
   with backend_type 'kafgres broker'), its open files (/proc/PID/fd), records acknowledged and
   read, end-to-end p50/p99, the group's lag (kafgres.consumer_lag) and the SQL records.
3. The check: every record the topic holds was read by the group, each partition's offsets
   without a gap from 0 to its high watermark, as many as the producers had acknowledged, no
   delivery, consumer or SQL error; every SQL send consumed once.
4. The verdict per series: the mean of the last three samples against the mean of the first
   three after the warm-up (minute 5, or the first 20% of a run shorter than 25 minutes),
   against the 5% the issue allows (growth for RSS, files and p99, a drop for throughput).

It fails clearly (exit status 1, a message) if the broker restarts or goes away, a client
process dies, or anything waits past its deadline; its topics are deleted at the end, always.
Results: .kafgres/bench/endurance/<id>/results.json; the chart: docs/bench-endurance.svg.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import signal
import statistics
import subprocess
import sys
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".kafgres/bench/endurance"
CHART_PYTHON = ROOT / ".kafgres/bench/venv/bin/python"
BROKER_BACKEND_TYPE = "kafgres broker"
FLAT_LIMIT = 0.05
REPORT_INTERVAL_S = 1.0
GROUP_JOIN_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 120.0
PROCESS_STOP_TIMEOUT_S = 30.0
TOPIC_TIMEOUT_S = 30.0
# Bounds each partition's disk use: an hour at hundreds of MB/s would fill any disk. Retention
# runs at each roll; a group that fell this far behind would find a gap (an error, not a skip).
TOPIC_CONFIGS = {"segment.bytes": str(64 << 20), "retention.bytes": str(512 << 20)}


def say(text: str) -> None:
    print(f"[endurance] {text}", flush=True)


class RunFailed(RuntimeError):
    """The run could not go on: the broker went away, a client died, a deadline passed."""


# ---------------------------------------------------------------- configuration


@dataclass
class Settings:
    bootstrap: str
    pg_dsn: str
    topic: str
    sql_topic: str
    group: str
    sql_group: str
    size: int
    partitions: int
    producers: int
    consumers: int
    sql_batch: int
    sql_txn_per_s: float


def read_env() -> dict[str, str]:
    """The cluster's coordinates from .kafgres/env (written by ./kafgres start), else the defaults."""
    env = {"KAFGRES_BOOTSTRAP": "127.0.0.1:9092", "PGHOST": "127.0.0.1", "PGPORT": "5433",
           "PGUSER": "postgres", "PGDATABASE": "postgres"}
    path = Path(os.environ.get("KAFGRES_ENV_FILE", ROOT / ".kafgres/env"))
    if path.is_file():
        for row in path.read_text().splitlines():
            key, sep, value = row.removeprefix("export ").partition("=")
            if sep:
                env[key.strip()] = value.strip().strip("'\"")
    return env


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60, help="length of the run (default 60)")
    parser.add_argument("--load", type=float, default=0.5, help="share of the measured maximum (default 0.5)")
    parser.add_argument("--rate", type=int, help="records/s of all producers together; skips the maximum")
    parser.add_argument("--calibrate-s", type=int, default=15, help="length of the maximum's run (default 15)")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3, help="members of the consumer group")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--size", type=int, default=1024, help="record value bytes (at least 8; default 1024)")
    parser.add_argument("--sql-batch", type=int, default=10, help="kafgres.send calls per transaction")
    parser.add_argument("--sql-txn-per-s", type=float, default=20, help="SQL send transactions per second")
    parser.add_argument("--sample-s", type=float, default=60, help="seconds per sample (default 60: per minute)")
    parser.add_argument("--out", type=Path, help="results directory (default .kafgres/bench/endurance/<id>)")
    parser.add_argument("--chart", type=Path, default=ROOT / "docs/bench-endurance.svg")
    parser.add_argument("--no-chart", action="store_true", help="write no chart")
    args = parser.parse_args()
    if args.minutes <= 0 or not 0 < args.load <= 1 or args.size < 8 or args.sample_s < 5:
        parser.error("--minutes > 0, 0 < --load <= 1, --size >= 8 and --sample-s >= 5")
    if min(args.producers, args.consumers, args.partitions, args.sql_batch) < 1 or args.sql_txn_per_s <= 0:
        parser.error("producers, consumers, partitions, --sql-batch and --sql-txn-per-s must be positive")
    return args


# ---------------------------------------------------------------- latency histogram


def bucket_ms(latency_ms: float) -> float:
    """The histogram bucket of a latency: 0.1 ms wide below 10 ms, 1 ms below 1 s, then 100 ms."""
    if latency_ms < 10:
        return max(0.0, int(latency_ms * 10) / 10)
    if latency_ms < 1000:
        return float(int(latency_ms))
    return float(int(latency_ms / 100) * 100)


def merge_histogram(into: dict[float, int], other: dict[float, int]) -> None:
    for bucket, count in other.items():
        into[bucket] = into.get(bucket, 0) + count


def histogram_quantile(histogram: dict[float, int], q: float) -> float | None:
    """The bucket (its lower bound, ms) holding the nearest-rank q quantile; None when empty."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, min(total, int(-(-q * total // 1))))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return bucket
    return max(histogram)


# ---------------------------------------------------------------- client processes


def producer_main(index: int, settings: Settings, topic: str, rate: float | None, seconds: float,
                  stop: Any, out: Any) -> None:
    """Sends `rate` records/s (unpaced if None) for `seconds`, each value stamped with its scheduled
    send time; reports acknowledged and failed records every second and at the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from confluent_kafka import KafkaException, Producer

    counts = {"acked": 0, "failed": 0}
    first_error: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            counts["acked"] += 1
        else:
            counts["failed"] += 1
            if not first_error:
                first_error.append(str(err))

    producer = Producer({"bootstrap.servers": settings.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False, "message.timeout.ms": 30000,
                         "client.id": f"endurance-producer-{index}"})
    tail = os.urandom(settings.size - 8)
    sent, reported = 0, {"acked": 0, "failed": 0}
    behind_max_s = 0.0
    start = time.monotonic_ns()
    end = start + int(seconds * 1e9)
    last_report = time.monotonic()

    def report(kind: str) -> None:
        nonlocal last_report
        out.put((kind, index, {"acked": counts["acked"] - reported["acked"],
                               "failed": counts["failed"] - reported["failed"], "sent": sent,
                               "behind_max_s": behind_max_s, "first_error": first_error[:1]}))
        reported.update(counts)
        last_report = time.monotonic()

    try:
        while not stop.is_set():
            now = time.monotonic_ns()
            if now >= end:
                break
            due = (now - start) * rate / 1e9 if rate else sent + 1000
            if sent >= due:
                producer.poll(min(0.005, (sent + 1 - due) / rate))
            while sent < due:
                scheduled = start + int(sent * 1e9 / rate) if rate else time.monotonic_ns()
                try:
                    producer.produce(topic, scheduled.to_bytes(8, "little") + tail, on_delivery=on_delivery)
                except BufferError:
                    producer.poll(0.05)
                    break
                sent += 1
            if rate:
                behind_max_s = max(behind_max_s, (time.monotonic_ns() - start) / 1e9 - sent / rate)
            producer.poll(0)
            if time.monotonic() - last_report >= REPORT_INTERVAL_S:
                report("produced")
        deadline = time.monotonic() + 60
        while len(producer) > 0 and time.monotonic() < deadline:
            producer.flush(1)
            if time.monotonic() - last_report >= REPORT_INTERVAL_S:
                report("produced")
        counts["failed"] += len(producer)  # never acknowledged within the deadline
    except KafkaException as err:
        first_error.append(f"producer: {err}")
        counts["failed"] += 1
    report("producer_done")


def consumer_main(index: int, settings: Settings, stop: Any, out: Any) -> None:
    """A member of the group: reads, notes every (partition, offset) as intervals and each record's
    latency from its scheduled send time; reports every second and its intervals at the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from confluent_kafka import Consumer, KafkaException

    state = {"assigned": 0, "rebalances": 0}

    def on_assign(_consumer: Any, partitions: list) -> None:
        state["assigned"] = len(partitions)
        state["rebalances"] += 1

    def on_revoke(_consumer: Any, _partitions: list) -> None:
        state["assigned"] = 0

    consumer = Consumer({"bootstrap.servers": settings.bootstrap, "group.id": settings.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True,
                         "auto.commit.interval.ms": 1000, "client.id": f"endurance-consumer-{index}"})
    consumer.subscribe([settings.topic], on_assign=on_assign, on_revoke=on_revoke)
    intervals: dict[int, list[list[int]]] = {}
    histogram: dict[float, int] = {}
    read = duplicates = 0
    errors: list[str] = []
    last_report = time.monotonic()

    def report(kind: str, final: dict | None = None) -> None:
        nonlocal histogram, read, last_report
        out.put((kind, index, {"read": read, "histogram": histogram, "duplicates": duplicates,
                               "errors": errors[:5], "error_count": len(errors), "assigned": state["assigned"],
                               "rebalances": state["rebalances"], **(final or {})}))
        histogram, read = {}, 0
        last_report = time.monotonic()

    try:
        while not stop.is_set():
            # consume(n, timeout) waits the whole timeout for n records: at a few records per
            # millisecond that is latency of the client's making. So: wait for one, take the rest.
            first = consumer.poll(0.2)
            messages = [first, *consumer.consume(999, 0)] if first is not None else []
            now_ns = time.monotonic_ns()
            for message in messages:
                if message.error():
                    errors.append(str(message.error()))
                    continue
                partition, offset = message.partition(), message.offset()
                spans = intervals.setdefault(partition, [])
                if spans and spans[-1][1] == offset:
                    spans[-1][1] += 1
                elif any(lo <= offset < hi for lo, hi in spans):
                    duplicates += 1
                    continue
                else:
                    spans.append([offset, offset + 1])
                read += 1
                scheduled = int.from_bytes(message.value()[:8], "little")
                latency = bucket_ms((now_ns - scheduled) / 1e6)
                histogram[latency] = histogram.get(latency, 0) + 1
            if time.monotonic() - last_report >= REPORT_INTERVAL_S:
                report("consumed")
    except KafkaException as err:
        errors.append(f"consumer: {err}")
    try:
        consumer.close()
    except KafkaException as err:
        errors.append(f"close: {err}")
    report("consumer_done", {"intervals": {str(p): merge_spans(s) for p, s in intervals.items()}})


def merge_spans(spans: list[list[int]]) -> list[list[int]]:
    """[lo, hi) spans sorted and joined where they touch or overlap."""
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def sql_main(settings: Settings, stop: Any, drain: Any, out: Any) -> None:
    """The SQL API: a transaction of --sql-batch kafgres.send calls, then kafgres.consume_text of
    the SQL group in a transaction of its own, --sql-txn-per-s times a second; after `drain`, only
    consumes until everything sent was read. Any SQL error ends it (reported)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import psycopg

    sent = consumed = duplicates = 0
    seen: set[int] = set()
    reported = {"sent": 0, "consumed": 0}
    error = ""
    txn_ms: list[float] = []
    interval = 1 / settings.sql_txn_per_s
    next_due = time.monotonic()
    last_report = time.monotonic()

    def report(kind: str) -> None:
        nonlocal txn_ms, last_report
        out.put((kind, 0, {"sent": sent - reported["sent"], "consumed": consumed - reported["consumed"],
                           "txn_ms": txn_ms, "duplicates": duplicates, "error": error,
                           "missing": sorted(set(range(sent)) - seen)[:10] if kind == "sql_done" else [],
                           "missing_count": len(set(range(sent)) - seen) if kind == "sql_done" else 0}))
        reported.update(sent=sent, consumed=consumed)
        txn_ms = []
        last_report = time.monotonic()

    try:
        with psycopg.connect(settings.pg_dsn, connect_timeout=10) as conn:
            conn.execute("SET statement_timeout = '30s'")
            conn.commit()
            while not stop.is_set():
                if not drain.is_set():
                    started = time.monotonic()
                    with conn.transaction():
                        conn.execute("SELECT kafgres.send(%s, g::text) FROM generate_series(%s::bigint, %s::bigint) g",
                                     (settings.sql_topic, sent, sent + settings.sql_batch - 1))
                    txn_ms.append((time.monotonic() - started) * 1e3)
                    sent += settings.sql_batch
                with conn.transaction():
                    rows = conn.execute("SELECT value FROM kafgres.consume_text(%s, %s, 1000)",
                                        (settings.sql_group, settings.sql_topic)).fetchall()
                for (value,) in rows:
                    number = int(value)
                    if number in seen:
                        duplicates += 1
                    else:
                        seen.add(number)
                        consumed += 1
                if time.monotonic() - last_report >= REPORT_INTERVAL_S:
                    report("sql")
                next_due += interval
                pause = next_due - time.monotonic()
                if pause > 0:
                    stop.wait(pause)
                else:
                    next_due = time.monotonic()
    except (psycopg.Error, ValueError) as err:
        error = f"{type(err).__name__}: {err}".strip()
    report("sql_done")


# ---------------------------------------------------------------- the broker's process


def memory_rss_kb(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Cluster:
    """The dev cluster through one psycopg connection: the broker's pid, lag, topics."""

    def __init__(self, dsn: str):
        import psycopg

        self.psycopg = psycopg
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        self.conn.execute("SET statement_timeout = '30s'")

    def value(self, sql: str, params: tuple = ()) -> Any:
        try:
            row = self.conn.execute(sql, params).fetchone()
        except self.psycopg.OperationalError as err:
            raise RunFailed(f"Postgres went away ({err}); rerun once the cluster is back") from err
        return row[0] if row else None

    def broker_pid(self) -> int:
        pid = self.value("SELECT pid FROM pg_stat_activity WHERE backend_type = %s", (BROKER_BACKEND_TYPE,))
        if not pid:
            raise RunFailed(f"no '{BROKER_BACKEND_TYPE}' process in pg_stat_activity: is the broker running?")
        return int(pid)

    def lag(self, group: str) -> int:
        return int(self.value("SELECT coalesce(sum(lag), 0) FROM kafgres.consumer_lag WHERE group_id = %s",
                              (group,)) or 0)

    def close(self) -> None:
        self.conn.close()


def create_topic(admin: Any, name: str, partitions: int, configs: dict[str, str]) -> None:
    """CreateTopics through the broker (not SQL, so a cleanup needs only the broker)."""
    from confluent_kafka.admin import NewTopic

    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
        operation_timeout=TOPIC_TIMEOUT_S, request_timeout=TOPIC_TIMEOUT_S)
    futures[name].result(timeout=TOPIC_TIMEOUT_S + 5)


def delete_topic(admin: Any, name: str) -> None:
    """DeleteTopics; a topic that is not there is fine."""
    from confluent_kafka import KafkaError, KafkaException

    futures = admin.delete_topics([name], operation_timeout=TOPIC_TIMEOUT_S,
                                                    request_timeout=TOPIC_TIMEOUT_S)
    try:
        futures[name].result(timeout=TOPIC_TIMEOUT_S + 5)
    except KafkaException as err:
        if err.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(low, high) of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"endurance-probe-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in range(partitions)}
    finally:
        consumer.close()


# ---------------------------------------------------------------- the run


@dataclass
class Minute:
    """What one sample period accumulates, and its figures once closed."""

    index: int
    acked: int = 0
    failed: int = 0
    read: int = 0
    histogram: dict[float, int] = field(default_factory=dict)
    sql_sent: int = 0
    sql_consumed: int = 0
    sql_txn_ms: list[float] = field(default_factory=list)

    def close(self, seconds: float, rss_kb: int, files: int, lag: int, at_s: float) -> dict[str, Any]:
        return {
            "minute": self.index + 1, "at_s": round(at_s, 1), "seconds": round(seconds, 2),
            "rss_mb": round(rss_kb / 1024, 1), "open_files": files,
            "produced_per_s": round(self.acked / seconds, 1), "read_per_s": round(self.read / seconds, 1),
            "failed": self.failed, "e2e_p50_ms": histogram_quantile(self.histogram, 0.50),
            "e2e_p99_ms": histogram_quantile(self.histogram, 0.99), "lag": lag,
            "sql_sent": self.sql_sent, "sql_consumed": self.sql_consumed,
            "sql_txn_p99_ms": round(sorted(self.sql_txn_ms)[int(0.99 * (len(self.sql_txn_ms) - 1))], 2)
            if self.sql_txn_ms else None,
        }


class Endurance:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        env = read_env()
        run_id = time.strftime("%Y%m%d-%H%M%S")
        tag = uuid.uuid4().hex[:6]
        self.out_dir: Path = args.out or STATE / run_id
        self.out_dir.mkdir(parents=True, exist_ok=True)
        dsn = (f"host={env['PGHOST']} port={env['PGPORT']} user={env['PGUSER']} "
               f"dbname={env['PGDATABASE']}")
        self.settings = Settings(
            bootstrap=env["KAFGRES_BOOTSTRAP"], pg_dsn=dsn, topic=f"endurance-{tag}",
            sql_topic=f"endurance-{tag}-sql", group=f"endurance-{tag}", sql_group=f"endurance-{tag}-sql",
            size=args.size, partitions=args.partitions, producers=args.producers, consumers=args.consumers,
            sql_batch=args.sql_batch, sql_txn_per_s=args.sql_txn_per_s)
        self.context = mp.get_context("spawn")
        self.out = self.context.Queue()
        self.stop_producers = self.context.Event()
        self.stop_consumers = self.context.Event()
        self.stop_sql = self.context.Event()
        self.drain_sql = self.context.Event()
        self.processes: list[Any] = []
        self.topics: list[str] = []
        self.cluster = Cluster(dsn)
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient({"bootstrap.servers": self.settings.bootstrap})
        self.results: dict[str, Any] = {"command": sys.argv, "settings": asdict(self.settings),
                                        "arguments": {k: str(v) for k, v in vars(args).items()}, "samples": []}
        self.finals: dict[str, dict[int, dict]] = {"producer_done": {}, "consumer_done": {}, "sql_done": {}}
        self.assigned: dict[int, int] = {}
        self.errors: list[str] = []

    # -- processes

    def spawn(self, target: Any, *args: Any) -> Any:
        process = self.context.Process(target=target, args=args, daemon=True)
        process.start()
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for event in (self.stop_producers, self.stop_consumers, self.stop_sql):
            event.set()
        deadline = time.monotonic() + PROCESS_STOP_TIMEOUT_S
        for process in self.processes:
            process.join(max(0.1, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)

    def receive(self, timeout_s: float, minute: Minute | None) -> None:
        """Takes the client processes' reports for up to `timeout_s` into `minute`."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                kind, index, body = self.out.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            self.take(kind, index, body, minute)
            if time.monotonic() >= deadline:
                return

    def take(self, kind: str, index: int, body: dict, minute: Minute | None) -> None:
        if kind in self.finals:
            self.finals[kind][index] = body
        if kind in ("produced", "producer_done"):
            if minute:
                minute.acked += body["acked"]
                minute.failed += body["failed"]
            self.results.setdefault("acked_total", 0)
            self.results["acked_total"] += body["acked"]
            if body["failed"]:
                self.errors.append(f"producer {index}: {body['failed']} failed ({body['first_error']})")
        elif kind in ("consumed", "consumer_done"):
            self.assigned[index] = body["assigned"]
            if minute:
                minute.read += body["read"]
                merge_histogram(minute.histogram, body["histogram"])
            self.results.setdefault("read_total", 0)
            self.results["read_total"] += body["read"]
        elif kind in ("sql", "sql_done"):
            if minute:
                minute.sql_sent += body["sent"]
                minute.sql_consumed += body["consumed"]
                minute.sql_txn_ms += body["txn_ms"]
            for key in ("sent", "consumed"):
                self.results[f"sql_{key}_total"] = self.results.get(f"sql_{key}_total", 0) + body[key]
            if body["error"]:
                self.errors.append(f"SQL: {body['error']}")

    def check_alive(self, broker_pid: int) -> None:
        pid = self.cluster.broker_pid()
        if pid != broker_pid:
            raise RunFailed(f"the broker restarted (pid {broker_pid}, now {pid}); rerun")
        dead = [p for p in self.processes if not p.is_alive() and p.exitcode not in (0, None)]
        if dead:
            raise RunFailed(f"client process {dead[0].name} died with exit code {dead[0].exitcode}")
        if self.errors:
            raise RunFailed(f"errors: {self.errors[:3]}")

    # -- phases

    def calibrate(self) -> float:
        """The records/s the whole mix sustains: the producers unpaced while the group reads, into a
        topic and group of their own; the lower of the rates acknowledged and read."""
        settings = replace(self.settings, topic=f"{self.settings.topic}-max", group=f"{self.settings.group}-max")
        self.create_topic(settings.topic)
        seconds = self.args.calibrate_s
        say(f"the maximum: {self.args.producers} producers unpaced for {seconds} s into {settings.topic} "
            f"while a group of {self.args.consumers} reads it")
        stop_consumers, stop_producers = self.context.Event(), self.context.Event()
        self.start_group(settings, stop_consumers)
        window = Minute(0)
        started = time.monotonic()
        for i in range(self.args.producers):
            self.spawn(producer_main, i, settings, settings.topic, None, seconds, stop_producers, self.out)
        deadline = started + seconds + 120
        while len(self.finals["producer_done"]) < self.args.producers:
            if time.monotonic() > deadline:
                raise RunFailed("the producers of the maximum's run did not finish in time")
            self.receive(1.0, window)
            if self.errors:
                raise RunFailed(f"errors in the maximum's run: {self.errors[:3]}")
        elapsed = time.monotonic() - started
        stop_consumers.set()
        deadline = time.monotonic() + PROCESS_STOP_TIMEOUT_S
        while len(self.finals["consumer_done"]) < self.args.consumers and time.monotonic() < deadline:
            self.receive(1.0, None)  # the members' last reports (a process exits once its queue is read)
        self.stop_all()
        acked_per_s, read_per_s = window.acked / elapsed, window.read / elapsed
        rate = min(acked_per_s, read_per_s)
        self.results["maximum"] = {"records_per_s": round(rate, 1), "acked_per_s": round(acked_per_s, 1),
                                   "read_per_s": round(read_per_s, 1), "seconds": round(elapsed, 1)}
        self.delete_topic(settings.topic)
        # The run proper starts from nothing.
        self.processes.clear()
        self.finals = {kind: {} for kind in self.finals}
        self.assigned = {}
        for key in ("acked_total", "read_total"):
            self.results.pop(key, None)
        for event in (self.stop_producers, self.stop_consumers, self.stop_sql):
            event.clear()
        say(f"maximum: {rate:,.0f} records/s ({acked_per_s:,.0f} acknowledged/s, {read_per_s:,.0f} read/s)")
        return rate

    def create_topic(self, name: str, partitions: int | None = None) -> None:
        self.topics.append(name)
        create_topic(self.admin, name, partitions or self.args.partitions, TOPIC_CONFIGS)

    def delete_topic(self, name: str) -> None:
        try:
            delete_topic(self.admin, name)
        except Exception as err:  # noqa: BLE001 - reported; the other topics still go
            say(f"could not delete topic {name} (delete it by hand): {err}")
        if name in self.topics:
            self.topics.remove(name)

    def start_group(self, settings: Settings, stop: Any) -> None:
        self.assigned = {}
        for i in range(self.args.consumers):
            self.spawn(consumer_main, i, settings, stop, self.out)
        deadline = time.monotonic() + GROUP_JOIN_TIMEOUT_S
        # Every partition assigned, and every member has some (when there are enough partitions).
        members_needed = min(self.args.consumers, self.args.partitions)
        while (sum(self.assigned.values()) < self.args.partitions
               or sum(1 for n in self.assigned.values() if n) < members_needed):
            if time.monotonic() > deadline:
                raise RunFailed(f"the group had {sum(self.assigned.values())} of {self.args.partitions} "
                                f"partitions assigned after {GROUP_JOIN_TIMEOUT_S:.0f} s")
            self.receive(0.5, None)
        say(f"group {settings.group}: {self.args.consumers} members, every partition assigned")

    def run(self) -> int:
        rate = self.args.rate or self.args.load * self.calibrate()
        seconds = self.args.minutes * 60
        self.results["rate"] = round(rate, 1)
        self.create_topic(self.settings.topic)
        self.create_topic(self.settings.sql_topic, 1)
        self.start_group(self.settings, self.stop_consumers)
        broker_pid = self.cluster.broker_pid()
        self.results["broker_pid"] = broker_pid
        say(f"{self.args.minutes:g} min at {rate:,.0f} records/s ({self.args.producers} producers, "
            f"{self.args.size} B), SQL {self.args.sql_txn_per_s:g} txn/s of {self.args.sql_batch} sends; "
            f"broker pid {broker_pid}")
        self.spawn(sql_main, self.settings, self.stop_sql, self.drain_sql, self.out)
        for i in range(self.args.producers):
            self.spawn(producer_main, i, self.settings, self.settings.topic, rate / self.args.producers, seconds,
                       self.stop_producers, self.out)
        started = time.monotonic()
        periods = max(1, round(seconds / self.args.sample_s))
        for index in range(periods):
            minute = Minute(index)
            period_start = time.monotonic()
            period_end = started + (index + 1) * seconds / periods
            while time.monotonic() < period_end:
                self.receive(min(5.0, max(0.0, period_end - time.monotonic())), minute)
                self.check_alive(broker_pid)
            sample = minute.close(time.monotonic() - period_start, memory_rss_kb(broker_pid), open_files(broker_pid),
                                  self.cluster.lag(self.settings.group), time.monotonic() - started)
            self.results["samples"].append(sample)
            say(f"{'minute' if self.args.sample_s == 60 else 'sample'} {sample['minute']}: rss {sample['rss_mb']} MB, files {sample['open_files']}, "
                f"{sample['produced_per_s']:,.0f} produced/s, {sample['read_per_s']:,.0f} read/s, e2e p99 "
                f"{sample['e2e_p99_ms']} ms, lag {sample['lag']:,}, SQL {sample['sql_sent']} sent "
                f"{sample['sql_consumed']} consumed")
        self.finish(broker_pid)
        return self.verdict()

    def finish(self, broker_pid: int) -> None:
        """Producers end, the group and the SQL consumer read what is left, then the check."""
        deadline = time.monotonic() + 90
        while len(self.finals["producer_done"]) < self.args.producers:
            if time.monotonic() > deadline:
                raise RunFailed("the producers did not finish within 90 s of the end")
            self.receive(1.0, None)
        self.results["producers"] = {i: {"sent": f["sent"], "behind_max_s": round(f["behind_max_s"], 3)}
                                     for i, f in sorted(self.finals["producer_done"].items())}
        self.drain_sql.set()
        marks = high_watermarks(self.settings.bootstrap, self.settings.topic, self.args.partitions)
        held = sum(high for _low, high in marks.values())
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.results.get("read_total", 0) < held and time.monotonic() < deadline:
            self.receive(1.0, None)
            self.check_alive(broker_pid)
        self.stop_consumers.set()
        deadline = time.monotonic() + PROCESS_STOP_TIMEOUT_S + DRAIN_TIMEOUT_S
        while len(self.finals["consumer_done"]) < self.args.consumers and time.monotonic() < deadline:
            self.receive(1.0, None)
        # The SQL consumer reads on (it sends no more since drain_sql) until it has everything.
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline and not self.finals["sql_done"]:
            if self.results.get("sql_consumed_total", 0) >= self.results.get("sql_sent_total", 0):
                break
            self.receive(1.0, None)
        self.stop_sql.set()
        deadline = time.monotonic() + PROCESS_STOP_TIMEOUT_S
        while not self.finals["sql_done"] and time.monotonic() < deadline:
            self.receive(1.0, None)
        self.results["check"] = self.check(marks)

    def check(self, marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
        problems: list[str] = list(self.errors)
        if len(self.finals["consumer_done"]) < self.args.consumers:
            problems.append(f"only {len(self.finals['consumer_done'])} of {self.args.consumers} consumers reported")
        spans: dict[int, list[list[int]]] = {}
        for final in self.finals["consumer_done"].values():
            for partition, partition_spans in final["intervals"].items():
                spans.setdefault(int(partition), []).extend(partition_spans)
            if final["error_count"]:
                problems.append(f"consumer errors: {final['errors']}")
        for partition, (_low, high) in sorted(marks.items()):
            merged = merge_spans(spans.get(partition, []))
            if high and merged != [[0, high]]:
                problems.append(f"partition {partition}: read {merged[:4]} of [0, {high})")
        held = sum(high for _low, high in marks.values())
        acked = self.results.get("acked_total", 0)
        if held != acked:
            problems.append(f"the topic holds {held:,} records, the producers had {acked:,} acknowledged")
        sql = self.finals["sql_done"].get(0)
        sql_sent = self.results.get("sql_sent_total", 0)
        if not sql:
            problems.append("the SQL session did not report")
        elif sql["missing_count"] or sql["duplicates"]:
            problems.append(f"SQL: {sql['missing_count']} sends never consumed (first {sql['missing']}), "
                            f"{sql['duplicates']} consumed twice")
        duplicates = sum(f["duplicates"] for f in self.finals["consumer_done"].values())
        rebalances = sum(f["rebalances"] for f in self.finals["consumer_done"].values())
        return {"ok": not problems, "problems": problems, "records_held": held, "records_acked": acked,
                "records_read": sum(hi - lo for s in spans.values() for lo, hi in merge_spans(s)),
                "group_duplicates": duplicates, "group_rebalances": rebalances,
                "sql_sent": sql_sent, "sql_missing": sql["missing_count"] if sql else None}

    def verdict(self) -> int:
        samples = self.results["samples"]
        warmup = 5 if self.args.minutes >= 25 else max(1, round(0.2 * len(samples)))
        self.results["verdicts"] = verdicts(samples, warmup)
        check = self.results["check"]
        say(f"check: {'OK' if check['ok'] else 'FAILED'}: {check['records_read']:,} of {check['records_held']:,} "
            f"records read by the group ({check['group_duplicates']} read twice, {check['group_rebalances']} "
            f"assignments), {check['sql_sent']} SQL sends")
        for problem in check["problems"]:
            say(f"  {problem}")
        for verdict in self.results["verdicts"]:
            say(verdict["text"])
        return 0 if check["ok"] else 1

    def tear_down(self) -> None:
        self.stop_all()
        for topic in list(self.topics):
            self.delete_topic(topic)
        path = self.out_dir / "results.json"
        path.write_text(json.dumps(self.results, indent=1))
        say(f"results: {path}")
        self.cluster.close()


SERIES = [  # key, label, unit, direction that counts as not flat
    ("rss_mb", "broker RSS", "MB", +1),
    ("open_files", "open files", "", +1),
    ("e2e_p99_ms", "e2e p99", "ms", +1),
    ("produced_per_s", "throughput", "records/s", -1),
]


def verdicts(samples: list[dict], warmup: int) -> list[dict[str, Any]]:
    """Per series: the mean of the last three samples against the mean of the first three after
    the warm-up (fewer in a short run: a third of them each); flat when it moved less than
    FLAT_LIMIT the wrong way."""
    out = []
    after = samples[warmup:] or samples[-1:]
    for key, label, unit, direction in SERIES:
        values = [s[key] for s in after if s.get(key) is not None]
        if not values:
            out.append({"series": key, "flat": None, "text": f"{label}: no samples"})
            continue
        span = max(1, min(3, len(values) // 3))
        reference = statistics.fmean(values[:span])
        end = statistics.fmean(values[-span:])
        change = (end - reference) / reference if reference else 0.0
        flat = change * direction <= FLAT_LIMIT
        out.append({"series": key, "reference": reference, "end": end, "change": change,
                    "max": max(values), "min": min(values), "flat": flat, "after_sample": warmup,
                    "text": f"{label}: {reference:,.1f} -> {end:,.1f} {unit} ({change:+.1%}) after sample "
                            f"{warmup}, max {max(values):,.1f}: {'flat' if flat else 'NOT flat'} "
                            f"(limit {FLAT_LIMIT:.0%})"})
    return out


def render_chart(results_path: Path, chart: Path) -> None:
    if not CHART_PYTHON.exists():
        say(f"no chart: {CHART_PYTHON} is missing (./kafgres bench makes it)")
        return
    done = subprocess.run([str(CHART_PYTHON), str(Path(__file__).with_name("endurance_chart.py")),
                           str(results_path), str(chart)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        say(f"no chart: {done.stderr.strip()[-500:]}")
    else:
        say(f"chart: {chart}")


def main() -> int:
    args = parse_args()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    try:
        endurance = Endurance(args)
    except Exception as err:  # noqa: BLE001 - no cluster: say so and stop
        say(f"cannot start: {err}")
        return 2
    status = 1
    try:
        status = endurance.run()
    except RunFailed as err:
        endurance.results["failure"] = str(err)
        say(f"FAILED: {err}")
    except Exception as err:  # noqa: BLE001 - a client or broker error: recorded, cleaned up, traced
        endurance.results["failure"] = f"{type(err).__name__}: {err}"
        say(f"FAILED: {type(err).__name__}: {err}")
        traceback.print_exc()
    finally:
        endurance.tear_down()
    if not args.no_chart and endurance.results["samples"]:
        render_chart(endurance.out_dir / "results.json", args.chart)
    return status


if __name__ == "__main__":
    sys.exit(main())
