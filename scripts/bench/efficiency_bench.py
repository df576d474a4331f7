"""Broker efficiency: records per second of broker CPU, Kafgres next to Apache Kafka, with
several client processes at once (issue 24, target 2).

    scripts/bench/efficiency_bench.py [--rounds 3] [--seconds 10] [--clients 3] [--partitions 4]

A throughput figure with one client measures the client as much as the broker: one
librdkafka instance saturates before either broker does. This bench runs `--clients`
kafgres-bench processes at the same time against one broker and divides the records they
moved by the CPU time (user + system, every thread) the broker process used meanwhile, read
from /proc before the clients start and after the last one exits. So the figure is what one
record costs the broker, whoever was the bottleneck.

Workloads, each on a fresh topic of `--partitions` partitions:

- produce-100 and produce-1k: every client runs `produce --producers 1 --acks all` with
  100 B or 1 KiB records for `--seconds`. The topic is created first (one record) so the
  clients do not race to create it. No retention: neither broker deletes segments while it
  is measured. Kafka checks retention every 5 minutes (`log.retention.check.interval.ms`),
  so within a 10 s run it never deleted anything, while Kafgres deletes a segment as soon as
  it is due, and freeing a deleted segment's page cache is CPU time its process pays (3-7%
  more records per broker CPU-second without it, and more records: this disk's discards
  hold up the flushes). Each run's topic is deleted after it, and the next run starts once
  the disk is quiet (scripts/bench/disk_quiet.py).
- consume: one producer writes `--consume-records` records of 1 KiB (not measured), then
  every client reads the whole topic with `consume --expect`, so the broker serves
  clients x records.

Needs what `./kafgres bench` prepares (Kafka's jars under .kafgres/bench/kafka-lib,
kafgres-bench) and the cluster of `./kafgres start`. Kafgres runs the flush policy the
cluster has (`fsync` by default) unless `--flush-policy` sets another for the run (put back
at the end); Kafka runs its defaults (page cache) unless `--strict` gives its topics
flush.messages=1. Rounds alternate which broker goes first. Prints one line per run and a
table of medians. The first rounds of every workload on both brokers warm them up (Kafka's
JIT) and are left out of the medians: 3 by default (`--warmup-rounds N`; `--no-warmup` counts
from the first). With one, Kafka's figure at 100 B still rose over the counted rounds (8.5,
11.5, 13.1, 13.4 and 13.9 million records per CPU-second on 2026-12-06).

With `flush_policy = fsync` Kafgres's fdatasync writes its pages back in the broker's own
process, so its CPU time counts the file system's write-back; Kafka's write-back happens in the
kernel's flusher threads, which its CPU time does not count. `--flush-policy page_cache` gives
both the same accounting, and the table also divides by the whole machine's busy CPU time
(/proc/stat) less the clients' own: the broker plus the kernel threads working for it, and
whatever else ran meanwhile (Postgres's other processes are idle here; a busy neighbour shows
as noise in this column only).

Appends take fresh page-cache pages, and on a VM that reports free pages to its host each
fresh page costs a host fault, which the broker's CPU time counts (the kernel's copy into the
page cache). So the run settles the memory first as `./kafgres bench` does
(scripts/bench/host_memory.py); `--keep-page-reporting` runs the machine as it is.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_memory  # noqa: E402
from apache_kafka import KafkaBroker  # noqa: E402
from disk_quiet import settle_disk  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402
from runs import CLOCK_TICKS_PER_S, cpu_seconds, parse_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFKA_PORT, KAFKA_CONTROLLER_PORT = 29092, 29094
# Free space each run starts with: a 10 s produce at this machine's rate writes about 17 GB,
# and Kafka removes a deleted topic's files only a second after answering.
FREE_BYTES_MIN = 25 * 10**9
WORKLOADS = ("produce-100", "produce-1k", "consume")


@dataclass
class GroupRun:
    """Several kafgres-bench processes run at once against one broker."""

    records: int
    errors: int
    wall_s: float
    broker_cpu_s: float
    client_cpu_s: float
    # The whole machine's busy CPU time but the clients': the broker, and the kernel threads working for
    # it (page-cache write-back, softirqs), which its own CPU time does not count.
    rest_cpu_s: float
    failures: list[str]

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def records_per_broker_cpu_s(self) -> float:
        return self.records / self.broker_cpu_s if self.broker_cpu_s > 0 else 0.0

    @property
    def records_per_rest_cpu_s(self) -> float:
        return self.records / self.rest_cpu_s if self.rest_cpu_s > 0 else 0.0


def machine_busy_cpu_s() -> float:
    """CPU time every CPU spent busy since boot (/proc/stat: user, nice, system, irq, softirq), in seconds."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / CLOCK_TICKS_PER_S


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_group(commands: list[list[str]], broker_pid: int, timeout_s: float, log_dir: Path) -> GroupRun:
    """Starts every command at once, waits for all (killing any past `timeout_s`), and sums
    the records their result lines report."""
    log_dir.mkdir(parents=True, exist_ok=True)
    cpu_before = cpu_seconds(broker_pid)
    client_before = children_cpu_s()
    machine_before = machine_busy_cpu_s()
    started = time.monotonic()
    processes = []
    for index, command in enumerate(commands):
        log = open(log_dir / f"client-{index}.log", "w")
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        processes.append((subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True), log))
    records = errors = 0
    failures: list[str] = []
    for index, (process, log) in enumerate(processes):
        remaining = max(1.0, timeout_s - (time.monotonic() - started))
        try:
            stdout, _ = process.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, _ = process.communicate()
            failures.append(f"client {index} killed after {timeout_s:.0f} s")
        log.close()
        lines = [row for row in stdout.splitlines() if "=" in row]
        if process.returncode != 0 or not lines:
            failures.append(f"client {index} exited with {process.returncode} (see {log_dir}/client-{index}.log)")
            continue
        fields = parse_line(lines[-1])
        records += int(fields.get("records", 0))
        errors += int(fields.get("errors", 0))
    wall_s = time.monotonic() - started
    cpu_after = cpu_seconds(broker_pid)
    machine_cpu = machine_busy_cpu_s() - machine_before
    if cpu_before is None or cpu_after is None:
        failures.append("the broker process went away during the run")
        broker_cpu = 0.0
    else:
        broker_cpu = cpu_after - cpu_before
    client_cpu = children_cpu_s() - client_before
    return GroupRun(records, errors, wall_s, broker_cpu, client_cpu, machine_cpu - client_cpu, failures)


class Bench:
    def __init__(self, args: argparse.Namespace, state: Path):
        self.args = args
        self.state = state

    def bench(self, *args: str, timeout_s: float = 120) -> None:
        """One kafgres-bench command that must succeed (set-up and clean-up)."""
        done = subprocess.run([self.args.bench_bin, *args], capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"kafgres-bench {shlex.join(args)} failed: {done.stderr.strip()[-500:]}")

    def topic_args(self, bootstrap: str, topic: str, name: str) -> list[str]:
        out = ["--bootstrap", bootstrap, "--topic", topic, "--create-partitions", str(self.args.partitions),
               "--topic-config", "segment.bytes=268435456"]
        if name == "kafka" and self.args.strict:
            out += ["--topic-config", "flush.messages=1"]
        return out

    def run(self, workload: str, name: str, bootstrap: str, pid: int, round_index: int) -> GroupRun:
        args = self.args
        # The topics keep every segment (no retention in the window), so a run writes what its
        # clients send: about 17 GB in 10 s here. A run that fills the disk measures the
        # brokers' refusals, and Kafka takes its log directory offline.
        free = shutil.disk_usage(ROOT / ".kafgres").free
        if free < FREE_BYTES_MIN:
            raise RuntimeError(f"{free / 1e9:.0f} GB free under {ROOT / '.kafgres'}; a run needs "
                               f"{FREE_BYTES_MIN / 1e9:.0f} GB (delete build artifacts or old data)")
        topic = f"efficiency-{workload}-{round_index}"
        where = self.topic_args(bootstrap, topic, name)
        if workload == "consume":
            self.bench("produce", *where, "--size", "1024", "--count", str(args.consume_records),
                       "--acks", "all", timeout_s=600)
            settle_disk()  # the write-back of what was just written is not the consumers'
            command = [args.bench_bin, "consume", "--bootstrap", bootstrap, "--topic", topic,
                       "--expect", str(args.consume_records)]
        else:
            size = "100" if workload == "produce-100" else "1024"
            # Created by one client first: concurrent creates would race.
            self.bench("produce", *where, "--size", size, "--count", "1")
            command = [args.bench_bin, "produce", *where, "--size", size, "--producers", "1",
                       "--seconds", str(args.seconds), "--acks", "all"]
        timeout_s = args.seconds * 6 + 120 if workload != "consume" else 600
        try:
            return run_group([command] * args.clients, pid, timeout_s,
                             self.state / f"{name}-{workload}-{round_index}")
        finally:
            subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", bootstrap, topic],
                           capture_output=True, timeout=120)
            settle_disk()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=3, help="kafgres-bench processes at once")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--consume-records", type=int, default=4_000_000,
                        help="1 KiB records each consumer reads (the topic's size)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--flush-policy", choices=["fsync", "page_cache"], help="Kafgres's, for this run")
    parser.add_argument("--strict", action="store_true", help="Kafka topics with flush.messages=1")
    parser.add_argument("--warmup-rounds", type=int, default=3, help="rounds run first and not counted")
    parser.add_argument("--no-warmup", action="store_true", help="count from the first round (--warmup-rounds 0)")
    parser.add_argument("--keep-page-reporting", action="store_true",
                        help="leave the VM's free page reporting on (host_memory.py)")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    # SIGTERM (and SIGHUP) unwind like Ctrl-C, so Kafka is stopped, the flush policy and the page reporting put back.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    state = ROOT / ".kafgres/bench/efficiency"
    state.mkdir(parents=True, exist_ok=True)

    cluster = KafgresCluster(ROOT)
    if args.flush_policy:
        cluster.set_flush_policy(args.flush_policy)
    policy = cluster.flush_policy()[0]
    kafka = KafkaBroker(ROOT, state / "kafka", KAFKA_PORT, KAFKA_CONTROLLER_PORT, die_with_parent=True)
    bench = Bench(args, state)
    with host_memory.settled(not args.keep_page_reporting, say_memory):
        results = measure(args, cluster, kafka, bench, workloads, policy)
    print_table(results, workloads)
    return 0


def say_memory(text: str) -> None:
    print(f"[host_memory] {text}", flush=True)


def measure(args: argparse.Namespace, cluster: KafgresCluster, kafka: KafkaBroker, bench: Bench,
            workloads: list[str], policy: str) -> dict[tuple[str, str], list[GroupRun]]:
    results: dict[tuple[str, str], list[GroupRun]] = {}
    try:
        kafka.start()
        print(f"[efficiency] Kafgres (flush_policy={policy}) against Kafka {kafka.version}"
              f"{' (flush.messages=1)' if args.strict else ''}: {args.clients} clients, "
              f"{args.partitions} partitions", flush=True)
        # The warm-up rounds (negative indexes) are not counted: Kafka's JIT compiles its hot paths
        # over its first rounds of load (its first moved half as many records per CPU-second as its
        # fourth).
        warmups = 0 if args.no_warmup else max(args.warmup_rounds, 0)
        for round_index in range(-warmups, args.rounds):
            order = ["kafgres", "kafka"] if round_index % 2 == 0 else ["kafka", "kafgres"]
            for workload in workloads:
                for name in order:
                    pid = cluster.worker_pid() if name == "kafgres" else kafka.pid
                    bootstrap = cluster.bootstrap if name == "kafgres" else kafka.bootstrap
                    if pid is None:
                        raise RuntimeError(f"{name}'s broker process is not running")
                    run = bench.run(workload, name, bootstrap, pid, round_index)
                    status = "ok" if not run.failures and run.errors == 0 else \
                        f"FAILED ({run.errors} errors; {'; '.join(run.failures)})"
                    label = f"warm-up {round_index + warmups + 1}" if round_index < 0 else f"round {round_index + 1}"
                    print(f"[efficiency] {label} {workload:<11} {name:<7} "
                          f"records={run.records} seconds={run.wall_s:.1f} records_per_s={run.records_per_s:,.0f} "
                          f"broker_cpu_s={run.broker_cpu_s:.2f} client_cpu_s={run.client_cpu_s:.2f} "
                          f"rest_cpu_s={run.rest_cpu_s:.2f} "
                          f"records_per_broker_cpu_s={run.records_per_broker_cpu_s:,.0f} {status}", flush=True)
                    if status == "ok" and round_index >= 0:
                        results.setdefault((workload, name), []).append(run)
    finally:
        kafka.stop()
        cluster.restore_flush_policy()
    return results


def print_table(results: dict[tuple[str, str], list[GroupRun]], workloads: list[str]) -> None:
    print("\n| workload | broker | records/s | broker CPU s | records per broker CPU-second | Kafgres / Kafka "
          "| machine CPU s but the clients' | records per such CPU-second | Kafgres / Kafka |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload in workloads:
        per_cpu: dict[str, float] = {}
        per_rest: dict[str, float] = {}
        for name in ("kafgres", "kafka"):
            runs = results.get((workload, name), [])
            if not runs:
                print(f"| {workload} | {name} | (no clean run) | | | | | | |")
                continue
            per_cpu[name] = statistics.median(r.records_per_broker_cpu_s for r in runs)
            per_rest[name] = statistics.median(r.records_per_rest_cpu_s for r in runs)
            both = name == "kafka" and "kafgres" in per_cpu
            ratio = f"{per_cpu['kafgres'] / per_cpu['kafka']:.2f}x" if both else ""
            rest_ratio = f"{per_rest['kafgres'] / per_rest['kafka']:.2f}x" if both else ""
            print(f"| {workload} | {name} | {statistics.median(r.records_per_s for r in runs):,.0f} | "
                  f"{statistics.median(r.broker_cpu_s for r in runs):.2f} | {per_cpu[name]:,.0f} | {ratio} | "
                  f"{statistics.median(r.rest_cpu_s for r in runs):.2f} | {per_rest[name]:,.0f} | {rest_ratio} |")


if __name__ == "__main__":
    sys.exit(main())
