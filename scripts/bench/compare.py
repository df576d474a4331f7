"""Kafgres next to Apache Kafka on this machine, in one run (issue 7).

Called by scripts/bench-compare.sh (`./kafgres bench`), which prepares the
Python environment, the Kafka classpath and the kafgres-bench binary. In order:

0. On a VM that reports free pages to its host, reporting is stopped and the
   free memory touched once, so neither broker pays the host's page faults
   (host_memory.py; --keep-page-reporting runs the machine as it is).
1. Kafgres: `./kafgres start` (unless --no-start), then wait for its worker.
2. Apache Kafka: a fresh single-node KRaft broker on 127.0.0.1:9192 (apache_kafka.py).
3. The machine's limits: fio and iperf3 (machine.py).
4. For each durability mode (plan.py), Kafgres's flush policy is set (a
   Postgres restart when it changes), then N rounds; in each round every
   workload runs on both brokers, one after the other, the order alternating
   by round. Each run has its own topic, deleted after it, and starts once
   the disk is quiet (disk_quiet.py: sync(2), then no write-back and no
   discards): earlier runs' dirty pages and the discards of their deleted
   topics would otherwise land on its time, and on the fsync mode's more
   than on the other (on 2026-12-06 the 256 KiB fsync runs measured
   750-950 MB/s after a sync only, and the same produce alone after a
   settle 1,620-1,910 MB/s).
5. pgbench on the Kafgres cluster alone and while it ingests 100 MB/s, in
   the fsync mode (pgbench.py).
6. Kafka is stopped and the flush policy and page reporting put back,
   whatever happened; the results go to .kafgres/bench/runs/<id>/results.json, the charts to docs/,
   the tables between the markers of docs/benchmarks.md (report.py), and
   the issue's targets with their Kafgres / Kafka ratios to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import host_memory
import machine
import pgbench
import plan
import report
from apache_kafka import KafkaBroker
from disk_quiet import settle_disk
from kafgres_cluster import KafgresCluster
from runs import Broker, Run, memory_kb, run_bench

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".kafgres/bench"
DELETE_TIMEOUT_S = 120


def say(text: str) -> None:
    print(f"[bench] {text}", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench-compare.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode; medians are reported (default 3)")
    parser.add_argument("--quick", action="store_true", help="short runs (3 s, 200 sync sends): a smoke test")
    parser.add_argument("--no-start", action="store_true",
                        help="use the Kafgres cluster already running instead of calling ./kafgres start "
                             "(a mode whose flush policy differs from the running one still restarts Postgres)")
    parser.add_argument("--modes", default="strict,relaxed",
                        help="durability modes, comma-separated: strict (fsync per write), relaxed")
    parser.add_argument("--workloads", default=",".join(w.key for w in plan.workloads(False)),
                        help="workloads to run, comma-separated (default: all)")
    parser.add_argument("--brokers", default="kafka,kafgres",
                        help="brokers to run, comma-separated (default both; one alone is for checking the script)")
    parser.add_argument("--skip-machine", action="store_true", help="do not run fio and iperf3")
    parser.add_argument("--skip-pgbench", action="store_true", help="do not run pgbench")
    parser.add_argument("--keep-page-reporting", action="store_true",
                        help="leave the VM's free page reporting on: every page the page cache takes then "
                             "costs a host fault (scripts/bench/host_memory.py)")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md or the charts")
    parser.add_argument("--kafka-port", type=int, default=9192, help="Apache Kafka's port (controller: +1)")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                               str(ROOT / "target/release/kafgres-bench")),
                        help="kafgres-bench binary (default: $KAFGRES_BENCH_BIN, else target/release/kafgres-bench)")
    args = parser.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.brokers = [b for b in args.brokers.split(",") if b]
    known = {w.key for w in plan.workloads(False)}
    if (not set(args.modes) <= set(plan.MODES) or not set(args.workloads) <= known or args.rounds < 1
            or not args.brokers or not set(args.brokers) <= {"kafka", "kafgres"}):
        parser.error(f"modes are {sorted(plan.MODES)}, workloads {sorted(known)}, brokers kafka and kafgres, "
                     "rounds at least 1")
    if "consume" in args.workloads and "produce-1k" not in args.workloads:
        parser.error("consume reads what produce-1k wrote: select both")
    return args


def git_commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "?"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def librdkafka_version(binary: str, bootstrap: str) -> str:
    """Also checks that the binary has the subcommands this script needs."""
    done = subprocess.run([binary, "delete-topics", "--bootstrap", bootstrap, "kafgres-bench-version-probe"],
                          capture_output=True, text=True, timeout=60)
    if "action=delete-topics" not in done.stdout:
        raise RuntimeError(f"{binary} has no delete-topics subcommand, or failed: {done.stderr.strip()[-300:]}")
    first = done.stderr.splitlines()[0] if done.stderr else ""
    return first.rsplit("librdkafka ", 1)[-1] if "librdkafka" in first else "?"


# How long a deleted topic's files may take to disappear before a run starts anyway.
DELETE_WAIT_S = 60


def wait_files_gone(data_dir: Path | None, topics: list[str], log: Path) -> None:
    """Waits (bounded) until no partition directory of `topics` is left in
    `data_dir`, deleted or not, then syncs. Both brokers remove a deleted
    topic's files after answering (Kafka after log.segment.delete.delay.ms,
    Kafgres at once, in the background): freeing gigabytes of extents is
    file-system journal work that would otherwise land in the next run,
    whichever broker it measures (a 250 ms fsync stall was seen that way)."""
    if data_dir is None or not topics:
        return
    deadline = time.monotonic() + DELETE_WAIT_S
    prefixes = tuple(f"{topic}-" for topic in topics)
    while time.monotonic() < deadline:
        try:
            left = [name for name in os.listdir(data_dir) if name.startswith(prefixes)]
        except OSError:
            return
        if not left:
            os.sync()
            return
        time.sleep(0.1)
    with open(log, "a") as err:
        err.write(f"[bench] {len(left)} directories of {topics} still in {data_dir} after {DELETE_WAIT_S} s\n")


def delete_topics(binary: str, bootstrap: str, topics: list[str], log: Path) -> None:
    with open(log, "a") as err:
        subprocess.run([binary, "delete-topics", "--bootstrap", bootstrap, *topics], stdout=err, stderr=err,
                       timeout=DELETE_TIMEOUT_S)


class Comparison:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.run_id = time.strftime("%Y%m%d-%H%M%S")
        self.run_dir = STATE / "runs" / self.run_id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.kafka = KafkaBroker(ROOT, STATE / "kafka", args.kafka_port, args.kafka_port + 1)
        self.cluster = KafgresCluster(ROOT)
        self.runs: list[Run] = []
        self.results: dict = {
            "run_id": self.run_id,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "quick": args.quick,
            "rounds": args.rounds,
            "modes": args.modes,
            "workloads": args.workloads,
            "kafka_port": args.kafka_port,
            "bench_bin": args.bench_bin,
            "root": str(ROOT),
            "invocation": ["scripts/bench-compare.sh " + shlex.join(sys.argv[1:])],
            "versions": {"commit": git_commit()},
            "idle_rss_kb": {},
            "runs": [],
        }
        self.brokers = {
            "kafka": Broker("kafka", self.kafka.bootstrap, lambda: self.kafka.pid, lambda: self.kafka.data_dir),
            "kafgres": Broker("kafgres", self.cluster.bootstrap, self.cluster.worker_pid, self.cluster.log_dir),
        }
        self.kafgres_used = "kafgres" in args.brokers

    # --- the phases -------------------------------------------------------------

    def set_up(self) -> None:
        if self.kafgres_used:
            if not self.args.no_start:
                say("starting Kafgres (./kafgres start)")
                self.cluster.start()
                self.brokers["kafgres"].bootstrap = self.cluster.bootstrap
            self.cluster.wait_ready()
            self.results["versions"].update(self.cluster.versions())
            say(f"Kafgres on {self.cluster.bootstrap}, worker pid {self.cluster.worker_pid()}")
        if "kafka" in self.args.brokers:
            say(f"starting Apache Kafka on {self.kafka.bootstrap} (data in {self.kafka.home})")
            self.kafka.start()
            self.results["versions"]["kafka"] = self.kafka.version
            say(f"Kafka {self.kafka.version} up, pid {self.kafka.pid}")
        first = self.brokers[self.args.brokers[0]].bootstrap
        self.results["versions"]["librdkafka"] = librdkafka_version(self.args.bench_bin, first)
        say(f"versions: {json.dumps(self.results['versions'])}")

    def measure_machine(self) -> None:
        if self.args.skip_machine:
            return
        say("measuring the machine: fio (disk), iperf3 (loopback)")
        m = machine.measure(STATE / "fio", self.args.quick)
        self.results["machine"] = m
        say(f"disk {m['seq_write_direct_mb_s']:.0f} MB/s direct, {m['seq_write_buffered_mb_s']:.0f} MB/s buffered; "
            f"fdatasync {m['fdatasync_per_s']:.0f}/s p50 {m['fdatasync_p50_ms']:.3f} ms; "
            f"loopback {m['loopback_mb_s']:.0f} MB/s")

    def run_mode(self, mode: str) -> None:
        policy = plan.MODES[mode]["kafgres_flush_policy"]
        say(f"mode {mode}: kafgres.flush_policy = {policy}; Kafka topic configs "
            f"{plan.MODES[mode]['kafka_topic_configs'] or 'default'}")
        if self.kafgres_used:
            self.cluster.set_flush_policy(policy)
        for name in self.args.brokers:
            pid = self.brokers[name].find_pid()
            self.results["idle_rss_kb"][f"{mode}/{name}"] = memory_kb(pid).get("VmRSS") if pid else None
        selected = [w for w in plan.workloads(self.args.quick) if w.key in self.args.workloads]
        for round_index in range(1, self.args.rounds + 1):
            order = self.args.brokers if round_index % 2 else self.args.brokers[::-1]
            produced: dict[str, tuple[str, int]] = {}
            for workload in selected:
                for name in order:
                    self.run_one(workload, self.brokers[name], mode, round_index, produced)

    def run_one(self, workload: plan.Workload, broker: Broker, mode: str, round_index: int,
                produced: dict[str, tuple[str, int]]) -> None:
        topic = f"kb-{self.run_id}-{mode}-r{round_index}-{workload.key}"
        expect = None
        if workload.key == "consume":
            topic, expect = produced.get(broker.name, (topic, 1))
        samples = str(self.run_dir / f"{mode}-r{round_index}-{broker.name}-{workload.key}.samples") \
            if workload.samples else None
        command = plan.command(self.args.bench_bin, workload, bootstrap=broker.bootstrap, topic=topic,
                               broker=broker.name, mode=mode, expect=expect, samples_file=samples)
        log = self.run_dir / f"{mode}-r{round_index}-{broker.name}-{workload.key}.log"
        settle_disk()
        run = run_bench(command, workload=workload.key, broker=broker, mode=mode, round_index=round_index,
                        timeout_s=workload.expected_s + 300, log_path=log, samples_file=samples)
        if not run.line and broker.name == "kafgres":
            # The cluster may be restarting (a shared development machine): wait, then try once more.
            say(f"no result from Kafgres ({run.stderr_tail.splitlines()[-1:]}); waiting for it, then once more")
            try:
                self.cluster.wait_ready()
            except RuntimeError as err:
                say(str(err))
            run = run_bench(command, workload=workload.key, broker=broker, mode=mode, round_index=round_index,
                            timeout_s=workload.expected_s + 300, log_path=log, samples_file=samples)
        self.runs.append(run)
        self.results["runs"].append(asdict(run))
        value = report.fmt(run.fields.get(workload.metric)) if run.line else "–"
        errors = report.fmt(run.fields.get("errors"), 0) if run.line else "–"
        rss = run.broker_memory_peak_kb.get("VmRSS", 0) / 1024
        cpu = f"{run.broker_cpu_s:.1f}" if run.broker_cpu_s is not None else "?"
        say(f"{mode} r{round_index} {workload.key:<12} {broker.name:<7} {workload.metric}={value} {workload.unit} "
            f"errors={errors} broker_cpu={cpu}s rss={rss:.0f}MB client_cpu={run.client_cpu_s:.1f}s"
            + ("" if run.line else f"  FAILED: {run.stderr_tail.splitlines()[-1:]}"))
        if workload.key == "produce-1k" and "consume" in self.args.workloads:
            produced[broker.name] = (topic, int(run.fields.get("records", 0) or 0))
            return
        delete_topics(self.args.bench_bin, broker.bootstrap, [topic], log)
        wait_files_gone(broker.find_data_dir(), [topic], log)

    def run_pgbench(self) -> None:
        if self.args.skip_pgbench or not self.kafgres_used:
            return
        seconds = 5 if self.args.quick else 30
        say(f"pgbench on the Kafgres cluster: {self.args.rounds} round(s) of {seconds} s alone, while Kafgres ingests "
            "100 MB/s, and while fio writes 100 MB/s")
        init = pgbench.prepare(self.cluster, self.args.quick)
        pg: dict = {"alone": [], "loaded": [], "ingest": [], "fio_loaded": [], "fio_mb_per_s": [],
                    "policy": self.cluster.flush_policy()[0],
                    "commands": [shlex.join(init), shlex.join(pgbench.pgbench_command(seconds)),
                                 shlex.join(pgbench.ingest_command(self.args.bench_bin, self.cluster.bootstrap,
                                                                   f"kb-{self.run_id}-pgbench-rN", seconds)),
                                 shlex.join(pgbench.fio_command(STATE / "fio", seconds))]}
        self.results["pgbench"] = pg
        for round_index in range(1, self.args.rounds + 1):
            topic = f"kb-{self.run_id}-pgbench-r{round_index}"
            log = self.run_dir / f"pgbench-r{round_index}-ingest.log"
            # alone, Kafgres ingesting, fio writing the same: rotated per round.
            conditions = ["alone", "kafgres", "fio"]
            shift = (round_index - 1) % len(conditions)
            for condition in conditions[shift:] + conditions[:shift]:
                os.sync()
                if condition == "fio":
                    tps, written = pgbench.fio_loaded_tps(self.cluster, STATE / "fio", seconds)
                    pg["fio_loaded"].append(tps)
                    pg["fio_mb_per_s"].append(written)
                    say(f"pgbench r{round_index} while fio writes: {tps:.0f} TPS, fio {report.fmt(written)} MB/s")
                elif condition == "kafgres":
                    tps, fields = pgbench.loaded_tps(self.cluster, self.args.bench_bin, topic, seconds, log)
                    pg["loaded"].append(tps)
                    pg["ingest"].append(fields)
                    say(f"pgbench r{round_index} loaded: {tps:.0f} TPS, ingest {report.fmt(fields.get('mb_per_s'))} "
                        f"MB/s errors={report.fmt(fields.get('errors'), 0)}")
                    delete_topics(self.args.bench_bin, self.cluster.bootstrap, [topic], log)
                    wait_files_gone(self.cluster.log_dir(), [topic], log)
                else:
                    tps = pgbench.tps(self.cluster, seconds)
                    pg["alone"].append(tps)
                    say(f"pgbench r{round_index} alone: {tps:.0f} TPS")

    def tear_down(self) -> None:
        say("stopping Kafka")
        self.kafka.stop()
        try:
            self.cluster.restore_flush_policy()
        except Exception as err:  # noqa: BLE001 - reported, the rest of the tear-down still runs
            say(f"could not restore kafgres.flush_policy: {err}")
        path = self.run_dir / "results.json"
        path.write_text(json.dumps(self.results, indent=1))
        say(f"results: {path}")

    def publish(self) -> None:
        charts: list[str] = []
        if not self.args.no_docs:
            try:
                import charts as drawing

                charts = drawing.render(self.results["runs"], self.args.modes, ROOT / "docs")
            except ImportError as err:
                say(f"no charts ({err}); run through scripts/bench-compare.sh for its matplotlib")
            block = report.markdown(self.results, charts)
            report.write_docs(ROOT / "docs/benchmarks.md", block)
            say(f"wrote docs/benchmarks.md{' and ' + ', '.join(Path(c).name for c in charts) if charts else ''}")
        print("\nTargets of issue 7 (Kafgres / Kafka, fsync relaxed unless said):")
        print(report.targets_text(report.targets(self.results)))
        print("\nTargets of issue 24 (Kafgres fsync / Kafgres page_cache):")
        print(report.targets_text(report.durable_targets(self.results)))


def main() -> int:
    args = parse_args()
    # SIGTERM (and SIGHUP) unwind like Ctrl-C, so Kafka is stopped and the flush policy restored.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    comparison = Comparison(args)
    with host_memory.settled(not args.keep_page_reporting, say) as memory:
        comparison.results["machine_memory"] = memory
        try:
            comparison.set_up()
            comparison.measure_machine()
            # pgbench runs in Kafgres's default, fsync, unless only relaxed was asked for.
            pgbench_mode = "strict" if "strict" in args.modes else args.modes[0]
            for mode in args.modes:
                comparison.run_mode(mode)
                if mode == pgbench_mode:
                    comparison.run_pgbench()
        finally:
            comparison.tear_down()
    comparison.publish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
