"""Scale: 10,000 partitions over 100 topics with 200 producers, Kafgres next to Apache Kafka
(issue 24, target 3).

    .kafgres/venv/bin/python scripts/bench/scale_bench.py [--topics 100] [--partitions 100]
        [--producers 200] [--processes 4] [--seconds 30] [--brokers kafgres,kafka]

For each broker, one after the other (the disk is shared):

1. **Create**: one CreateTopics for `--topics` topics of `--partitions` partitions, timed until
   Metadata shows a leader for every partition. The broker's anonymous memory (RssAnon: the heap,
   not Postgres's shared memory nor the page cache) before and after, divided by the partitions,
   is the memory one partition costs while idle.
2. **Produce**: `--processes` kafgres-bench processes at once, `--producers` producer clients in
   all, each cycling over every partition of every topic (`kafgres-bench partitions --topics`),
   acks=all, 1 KiB records, for `--seconds`. Aggregate records/s (the sum of the processes' records
   over the longest one's time), the broker's peak RSS and the CPU cores the broker and the clients
   used meanwhile (on a small machine the 200 clients, each tracking 10,000 partitions, are what
   saturates). Next to them an end-to-end probe (`kafgres-bench e2e`, `--probe-rate` records/s of
   1 KiB on a topic of its own, one producer and one consumer, latency from the scheduled send time)
   gives p50/p99/p99.9 under that load, and `--consumers` group consumers in one process
   (`kafgres-bench group`, one group subscribed to every topic, started `CONSUMERS_AHEAD_S`
   before the producers) report when every partition was assigned,
   the records they read and their end-to-end latency (read time less the record's CreateTime). Then `--fill-gb` more GB (0: none) go in topic by topic (`kafgres-bench produce`,
   batches of many records), so the restarts below start on a log of that size.
3. **Clean restart**: the latest offset of every partition is read (ListOffsets), the broker is
   stopped as its operators would (Kafgres: `pg_ctl stop -m fast`; Kafka: SIGTERM) and started
   again. Timed from the start command until every partition answers ListOffsets with the offset it
   had before: the time until the broker serves all of its log again.
4. **Crash restart**: the same after SIGKILL of the broker (Kafgres: its worker process, so
   Postgres restarts all of its processes and runs crash recovery, as a real crash would; Kafka:
   the JVM, relaunched at once on the same data).

Kafgres runs its default `flush_policy` (fsync before every acknowledgement) unless the cluster
says otherwise, Kafka its defaults (the page cache); the bench prints which. One round: each step
is minutes long on 2 cores and its figure is not a rate that noise moves much, but the produce
figure is one measurement, not a median. Topics are deleted at the end (Kafgres) or with Kafka's
data directory.

Needs what `./kafgres bench` prepares (Kafka's jars under .kafgres/bench/kafka-lib, a release
kafgres-bench) and the cluster of `./kafgres start`; confluent-kafka from the venv of
`./kafgres test`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apache_kafka import KafkaBroker  # noqa: E402
from kafgres_cluster import PG_BIN, KafgresCluster  # noqa: E402
from runs import MemorySampler, cpu_seconds, memory_kb, parse_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFKA_PORT, KAFKA_CONTROLLER_PORT = 29192, 29194
TOPIC_PREFIX = "scale"
# One partition read by one consumer while the 200 producers run: end-to-end latency from the
# scheduled send time to the read (kafgres-bench e2e --latency-from scheduled).
PROBE_TOPIC = "scale-probe"
# Seconds the group consumers get to form their group before the producers start.
CONSUMERS_AHEAD_S = 20
READY_TIMEOUT_S = 1800


@dataclass
class Figures:
    broker: str
    partitions: int = 0
    create_s: float = 0.0
    idle_anon_kib_before: int = 0
    idle_anon_kib_after: int = 0
    produce_records_per_s: float = 0.0
    produce_errors: int = 0
    produce_peak_rss_mib: float = 0.0
    produce_broker_cores: float = 0.0
    probe: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    log_bytes: int = 0
    stop_s: float = 0.0
    clean_start_s: float = 0.0
    crash_start_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def anon_kib_per_partition(self) -> float:
        return (self.idle_anon_kib_after - self.idle_anon_kib_before) / max(self.partitions, 1)


def topic_names(count: int) -> list[str]:
    return [f"{TOPIC_PREFIX}-{i}" for i in range(count)]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 60000})


# Topics per CreateTopics request: Kafka's controller refuses a request of more than 10,000
# partitions ("excessively large batch operation"), so both brokers get them 1,000 at a time.
TOPICS_PER_REQUEST = 10


def create_topics(bootstrap: str, names: list[str], partitions: int) -> float:
    """CreateTopics of TOPICS_PER_REQUEST topics at a time; seconds until Metadata shows a leader for every
    partition."""
    client = admin(bootstrap)
    started = time.monotonic()
    for first in range(0, len(names), TOPICS_PER_REQUEST):
        batch = names[first:first + TOPICS_PER_REQUEST]
        futures = client.create_topics([NewTopic(n, partitions, 1) for n in batch], request_timeout=600,
                                       operation_timeout=600)
        for future in futures.values():
            future.result(timeout=900)
    wanted = set(names)
    deadline = started + READY_TIMEOUT_S
    while True:
        metadata = client.list_topics(timeout=60)
        led = {
            name for name, topic in metadata.topics.items()
            if name in wanted and topic.error is None and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        }
        if led == wanted:
            return time.monotonic() - started
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(wanted - led)} topics without leaders {READY_TIMEOUT_S} s after CreateTopics")
        time.sleep(0.2)


def latest_offsets(bootstrap: str, names: list[str], partitions: int, timeout_s: float = 120) -> dict[tuple[str, int], int]:
    """The latest offset of every partition, in one ListOffsets per broker round trip."""
    client = admin(bootstrap)
    request = {TopicPartition(n, p): OffsetSpec.latest() for n in names for p in range(partitions)}
    futures = client.list_offsets(request, request_timeout=timeout_s)
    return {(tp.topic, tp.partition): f.result(timeout=timeout_s).offset for tp, f in futures.items()}


def wait_until_served(bootstrap: str, names: list[str], partitions: int, expected: dict[tuple[str, int], int],
                      started: float) -> float:
    """Seconds from `started` until every partition answers ListOffsets with its offset in `expected`."""
    deadline = started + READY_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            now = latest_offsets(bootstrap, names, partitions, timeout_s=30)
            differing = [(tp, expected[tp], now.get(tp)) for tp in expected if now.get(tp) != expected[tp]]
            if not differing:
                return time.monotonic() - started
            last = f"{len(differing)} partitions differ, e.g. {differing[:3]}"
        except Exception as e:  # not serving yet: connection refused, leader not available, timeouts
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.2)
    raise RuntimeError(f"not every partition served its offset within {READY_TIMEOUT_S} s: {last}")


@dataclass
class ProduceRun:
    records_per_s: float
    errors: int
    broker_peak_rss_mib: float
    broker_cores: float
    # The end-to-end probe's line (workload=e2e), parsed; empty without a probe.
    probe: dict
    # The group consumers' lines (workload=group), parsed.
    groups: list


def produce(args: argparse.Namespace, bootstrap: str, broker_pid: int, log_dir: Path) -> ProduceRun:
    """`--processes` kafgres-bench processes at once, and the end-to-end probe next to them."""
    log_dir.mkdir(parents=True, exist_ok=True)
    per_process = [args.producers // args.processes + (i < args.producers % args.processes)
                   for i in range(args.processes)]
    commands = [
        [args.bench_bin, "partitions", "--bootstrap", bootstrap, "--topic", TOPIC_PREFIX,
         "--topics", str(args.topics), "--partitions", str(args.partitions), "--producers", str(n),
         "--size", str(args.size), "--seconds", str(args.seconds), "--acks", "all"]
        for n in per_process if n > 0
    ]
    probe_index = None
    if args.probe_rate > 0:
        probe_index = len(commands)
        commands.append([args.bench_bin, "e2e", "--bootstrap", bootstrap, "--topic", PROBE_TOPIC,
                         "--create-partitions", "1", "--rate", str(args.probe_rate), "--seconds", str(args.seconds),
                         "--warmup-s", "3", "--size", "1024", "--acks", "all", "--latency-from", "scheduled"])
    consumers = []
    if args.consumers > 0:
        # One process for the whole group: it alone can tell when every partition is assigned.
        command = [args.bench_bin, "group", "--bootstrap", bootstrap, "--topic", TOPIC_PREFIX, "--topics",
                   str(args.topics), "--consumers", str(args.consumers), "--group-protocol", args.group_protocol,
                   "--seconds", str(args.seconds + CONSUMERS_AHEAD_S + 15)]
        print(f"[scale] $ {shlex.join(command)}", flush=True)
        stderr = open(log_dir / "group.log", "w")
        consumers.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True))
        # The group forms before the producers start (its line says when every partition was assigned).
        time.sleep(CONSUMERS_AHEAD_S)
    processes = []
    cpu_before, wall_before = cpu_seconds(broker_pid) or 0.0, time.monotonic()
    clients_before = children_cpu_s()
    with MemorySampler(broker_pid) as memory:
        for i, command in enumerate(commands):
            print(f"[scale] $ {shlex.join(command)}", flush=True)
            stderr = open(log_dir / f"client-{i}.log", "w")
            processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True))
        lines = []
        for process in processes:
            out, _ = process.communicate(timeout=args.seconds * 10 + 600)
            lines.append(out.strip().splitlines()[-1] if out.strip() else "")
    wall = time.monotonic() - wall_before
    broker_cores = ((cpu_seconds(broker_pid) or 0.0) - cpu_before) / wall
    print(f"[scale]   broker {broker_cores:.2f} cores, the client processes {(children_cpu_s() - clients_before) / wall:.2f} "
          "cores", flush=True)
    groups = []
    for process in consumers:
        out, _ = process.communicate(timeout=args.seconds * 10 + 600)
        line = out.strip().splitlines()[-1] if out.strip() else ""
        print(f"[scale]   {line}", flush=True)
        groups.append(parse_line(line))
    probe = {}
    if probe_index is not None:
        probe = parse_line(lines.pop(probe_index))
        print(f"[scale]   probe: p50={probe.get('p50')} p99={probe.get('p99')} p999={probe.get('p999')} ms, "
              f"errors={probe.get('errors')}", flush=True)
    records = errors = 0
    elapsed = 0.0
    for line in lines:
        fields = parse_line(line)
        records += int(fields.get("records", 0))
        errors += int(fields.get("errors", 0))
        elapsed = max(elapsed, float(fields.get("seconds", 0) or 0))
        print(f"[scale]   {line}", flush=True)
    if elapsed <= 0:
        raise RuntimeError(f"no elapsed time in the clients' lines (see {log_dir}): {lines}")
    return ProduceRun(records / elapsed, errors, memory.peak.get("VmRSS", 0) / 1024, broker_cores, probe, groups)


def record_produce(figures: Figures, run: ProduceRun) -> None:
    figures.produce_records_per_s, figures.produce_errors = run.records_per_s, run.errors
    figures.produce_peak_rss_mib, figures.produce_broker_cores, figures.probe, figures.groups = (
        run.broker_peak_rss_mib, run.broker_cores, run.probe, run.groups)


def children_cpu_s() -> float:
    """CPU time of this process's finished children (the kafgres-bench processes once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


SCALE_PARTITION_DIR = re.compile(rf"^{TOPIC_PREFIX}-\d+-\d+$")


def partition_dirs(log_dir: Path) -> tuple[list[Path], int]:
    """The bench's partition directories (`scale-<topic>-<partition>`) and how many others the log has."""
    ours, others = [], 0
    for entry in log_dir.iterdir():
        if entry.is_dir():
            if SCALE_PARTITION_DIR.match(entry.name):
                ours.append(entry)
            elif re.match(r"^.+-\d+$", entry.name):
                others += 1
    return ours, others


def log_bytes(log_dir: Path) -> int:
    """Disk blocks of the bench's partitions (segments and their indexes)."""
    total = 0
    for directory in partition_dirs(log_dir)[0]:
        for entry in directory.iterdir():
            try:
                total += entry.stat().st_blocks * 512
            except OSError:
                pass
    return total


def anon_kib(pid: int) -> int:
    return memory_kb(pid).get("RssAnon", 0)


def measure_kafgres(args: argparse.Namespace, names: list[str]) -> Figures:
    cluster = KafgresCluster(ROOT)
    cluster.wait_ready()
    figures = Figures("kafgres", partitions=len(names) * args.partitions)
    figures.notes.append(f"flush_policy {cluster.flush_policy()[0]}")
    bootstrap = cluster.bootstrap
    delete_topics(args, bootstrap, names)  # what an interrupted run left
    # A fresh worker, so that the memory before the topics is not memory freed by earlier ones.
    cluster.restart()
    pid = worker_pid(cluster)
    figures.idle_anon_kib_before = anon_kib(pid)
    figures.create_s = create_topics(bootstrap, names, args.partitions)
    time.sleep(2)
    figures.idle_anon_kib_after = anon_kib(pid)
    print(f"[scale] kafgres: created {figures.partitions} partitions in {figures.create_s:.1f} s", flush=True)
    try:
        produced = produce(args, bootstrap, pid, ROOT / ".kafgres/bench/scale/kafgres")
        record_produce(figures, produced)
        fill(args, bootstrap, names, figures)
        log_dir = cluster.log_dir()
        if log_dir:
            figures.log_bytes = log_bytes(log_dir)
            figures.notes.append(f"{partition_dirs(log_dir)[1]:,} other partitions in its log (earlier topics)")
        expected = latest_offsets(bootstrap, names, args.partitions)
        pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", cluster.env["KAFGRES_PGDATA"]]
        as_postgres = ["runuser", "-u", "postgres", "--"]

        started = time.monotonic()
        subprocess.run([*as_postgres, *pg_ctl, "-m", "fast", "-w", "-t", "600", "stop"], check=True, timeout=700,
                       capture_output=True)
        figures.stop_s = time.monotonic() - started
        started = time.monotonic()
        subprocess.run([*as_postgres, *pg_ctl, "-l", cluster.env["KAFGRES_PG_LOG"], "-w", "-t", "600", "start"],
                       check=True, timeout=700, capture_output=True)
        figures.clean_start_s = wait_until_served(bootstrap, names, args.partitions, expected, started)
        print(f"[scale] kafgres: stopped in {figures.stop_s:.1f} s, served again {figures.clean_start_s:.1f} s "
              "after the start", flush=True)

        pid = worker_pid(cluster)
        started = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        figures.crash_start_s = wait_until_served(bootstrap, names, args.partitions, expected, started)
        print(f"[scale] kafgres: served again {figures.crash_start_s:.1f} s after kill -9 of the worker", flush=True)
    finally:
        cluster.wait_ready()
        delete_topics(args, bootstrap, names)
    return figures


def fill(args: argparse.Namespace, bootstrap: str, names: list[str], figures: Figures) -> None:
    """Adds `--fill-gb` of 1 KiB records, spread over every topic (kafgres-bench produce, one topic at a time,
    its records spread over the topic's partitions), so the restarts start on that much log."""
    if args.fill_gb <= 0:
        return
    per_topic = int(args.fill_gb * 1e9 / 1024 / len(names))
    started = time.monotonic()
    for name in names:
        done = subprocess.run([args.bench_bin, "produce", "--bootstrap", bootstrap, "--topic", name, "--size", "1024",
                               "--count", str(per_topic), "--producers", "2", "--acks", "all"],
                              capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"filling {name} failed: {done.stderr.strip()[-500:]}")
    took = time.monotonic() - started
    figures.notes.append(f"filled with {args.fill_gb:g} GB ({per_topic * len(names):,} records of 1 KiB) in {took:.0f} s")
    print(f"[scale] {figures.broker}: {figures.notes[-1]}", flush=True)


def worker_pid(cluster: KafgresCluster) -> int:
    deadline = time.monotonic() + 120
    while (pid := cluster.worker_pid()) is None:
        if time.monotonic() > deadline:
            raise RuntimeError("no 'kafgres broker' worker")
        time.sleep(0.2)
    return pid


def delete_topics(args: argparse.Namespace, bootstrap: str, names: list[str]) -> None:
    subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", bootstrap, *names, PROBE_TOPIC],
                   capture_output=True, timeout=900)


def measure_kafka(args: argparse.Namespace, names: list[str]) -> Figures:
    kafka = KafkaBroker(ROOT, ROOT / ".kafgres/bench/scale/kafka-home", KAFKA_PORT, KAFKA_CONTROLLER_PORT,
                        die_with_parent=True)
    figures = Figures("kafka", partitions=len(names) * args.partitions)
    kafka.start()
    try:
        figures.notes.append(f"Kafka {kafka.version}, page cache (its default)")
        bootstrap = kafka.bootstrap
        latest_offsets(bootstrap, [], 0)  # the broker answers before the clock starts
        time.sleep(5)
        figures.idle_anon_kib_before = anon_kib(kafka.pid)
        figures.create_s = create_topics(bootstrap, names, args.partitions)
        time.sleep(2)
        figures.idle_anon_kib_after = anon_kib(kafka.pid)
        print(f"[scale] kafka: created {figures.partitions} partitions in {figures.create_s:.1f} s", flush=True)
        produced = produce(args, bootstrap, kafka.pid, ROOT / ".kafgres/bench/scale/kafka")
        record_produce(figures, produced)
        fill(args, bootstrap, names, figures)
        figures.log_bytes = log_bytes(kafka.data_dir)
        expected = latest_offsets(bootstrap, names, args.partitions)

        started = time.monotonic()
        if kafka.stop_keeping_data():
            figures.notes.append("the clean stop needed SIGKILL")
        figures.stop_s = time.monotonic() - started
        started = time.monotonic()
        kafka.launch(timeout_s=READY_TIMEOUT_S)
        figures.clean_start_s = wait_until_served(bootstrap, names, args.partitions, expected, started)
        print(f"[scale] kafka: stopped in {figures.stop_s:.1f} s, served again {figures.clean_start_s:.1f} s "
              "after the start", flush=True)

        started = time.monotonic()
        kafka.kill()
        kafka.launch(timeout_s=READY_TIMEOUT_S)
        figures.crash_start_s = wait_until_served(bootstrap, names, args.partitions, expected, started)
        print(f"[scale] kafka: served again {figures.crash_start_s:.1f} s after kill -9", flush=True)
    finally:
        kafka.stop()
    return figures


def print_table(results: list[Figures]) -> None:
    print()
    print("| broker | partitions | create (s) | idle KiB per partition | produce records/s | errors | "
          "broker CPU while producing (cores) | peak RSS while producing (MiB) | probe e2e p50 / p99 / p99.9 (ms) | "
          "log (GB) | clean stop (s) | start after clean stop (s) | start after kill -9 (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in results:
        print(f"| {f.broker} | {f.partitions:,} | {f.create_s:.1f} | {f.anon_kib_per_partition:.1f} | "
              f"{f.produce_records_per_s:,.0f} | {f.produce_errors} | {f.produce_broker_cores:.2f} | "
              f"{f.produce_peak_rss_mib:,.0f} | {probe_text(f.probe)} | "
              f"{f.log_bytes / 1e9:.1f} | {f.stop_s:.1f} | {f.clean_start_s:.1f} | {f.crash_start_s:.1f} |")
    for f in results:
        for g in f.groups:
            print(f"{f.broker}: {int(g.get('consumers', 0))} group consumers ({g.get('protocol')}): every partition "
                  f"assigned after {g.get('assigned_after_s')} s, {int(g.get('records', 0)):,} records read, "
                  f"end-to-end p50 / p99 / p99.9 {g.get('p50')} / {g.get('p99')} / {g.get('p999')} ms over "
                  f"{int(g.get('measured_records', 0)):,}, {int(g.get('errors', 0))} errors")
    for f in results:
        if f.notes:
            print(f"{f.broker}: {'; '.join(f.notes)}")


def probe_text(probe: dict) -> str:
    if not probe:
        return "-"
    return f"{probe.get('p50', '?')} / {probe.get('p99', '?')} / {probe.get('p999', '?')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    parser.add_argument("--producers", type=int, default=200, help="producer clients in all")
    parser.add_argument("--processes", type=int, default=4, help="kafgres-bench processes they are spread over")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--consumers", type=int, default=100, help="group consumers reading every topic (0: none)")
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--probe-rate", type=int, default=1000,
                        help="records/s of the end-to-end probe next to the producers (0: none)")
    parser.add_argument("--fill-gb", type=float, default=0.0,
                        help="GB of 1 KiB records added after the produce step, before the restarts")
    parser.add_argument("--brokers", default="kafgres,kafka")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    if args.processes < 1 or args.producers < args.processes:
        parser.error("--processes must be at least 1 and at most --producers")
    names = topic_names(args.topics)
    results = []
    for broker in [b for b in args.brokers.split(",") if b]:
        if broker == "kafgres":
            results.append(measure_kafgres(args, names))
        elif broker == "kafka":
            results.append(measure_kafka(args, names))
        else:
            parser.error(f"unknown broker {broker!r}")
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
