"""Latency under load (issue 24, target 4): end-to-end p50/p99/p99.9 at 25%, 50% and 80% of each
broker's measured maximum, with an fsync before every ack, Kafgres next to Apache Kafka; and a
mixed load: the e2e latency of a 1,000 records/s topic while another topic ingests at 80%.

    .kafgres/bench/venv/bin/python scripts/bench/latency_load.py [--rounds 3] [--seconds 10] [--size 1024]

Needs what `./kafgres bench` prepares (Kafka's jars under .kafgres/bench/kafka-lib, the bench venv)
and kafgres-bench built with `--latency-from` (`cargo build --release -p kafgres-bench`), and the
cluster of `./kafgres start` with its default `kafgres.flush_policy = fsync` (checked, never
changed: the script restarts nothing). Apache Kafka 4.x runs as compare.py runs it
(apache_kafka.py), on 127.0.0.1:9292 (controller 9293) with its data under /tmp, and every topic
with `flush.messages=1`: an fsync before the ack, as Kafgres.

Each round, for each broker (the order alternating by round):
1. the maximum: `kafgres-bench produce` with one producer (acks=all, linger.ms=0 and the record
   size of the e2e runs) for --max-seconds: records acknowledged per second, counted to the
   last acknowledgement. (A first version took the `achieved_rate` of an e2e run asked for an
   unreachable rate; that counts records handed to librdkafka's queue, not acknowledged, and
   overstated Kafka's maximum so much that 25% of it already queued for hundreds of ms.) It
   also warms the JVM up before the first latency run;
2. `e2e --latency-from scheduled` at 25%, 50% and 80% of it for --seconds: every latency counts
   from the record's place on the schedule (open loop, no coordinated omission);
3. mixed: `kafgres-bench produce --rate` at 80% of the maximum into one topic while
   `e2e --rate 1000 --latency-from scheduled` runs on another;
4. once both maxima of the round are known, both brokers at the same rate: 50% of the slower
   one's maximum (each broker at its own 50% compares loads of different sizes).
Every run has a topic of its own (one partition), deleted after it, even when the script is
stopped (a run at Kafgres's maximum writes 15 GB). Each run starts once the disk is quiet (the
previous run's write-back over, `settle_disk`), and the VM's memory is settled for the whole
run (host_memory.py, unless --keep-page-reporting), so that no run starts inside the previous
one's write-back or writes into pages the host must fault in again. (The 25% run, which
follows the maximum, stayed noisy with both: a p99 of 17 ms to 1.3 s by round.) Prints one
line per run,
then the medians of the rounds with Kafgres / Kafka ratios; writes
.kafgres/bench/latency-load/<id>/results.json and the chart docs/bench-latency-load.svg.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_memory  # noqa: E402
from apache_kafka import KafkaBroker  # noqa: E402
from disk_quiet import settle_disk  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402
from runs import Broker, Run, parse_line, run_bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".kafgres/bench/latency-load"
LEVELS = (0.25, 0.50, 0.80)
MIXED_LOAD = 0.80
MIXED_RATE = 1000
QUANTILES = ("p50", "p99", "p999")
SAME_LOAD = 0.50
SAME_KEY = "same-50"
RUN_SLACK_S = 180
# A run whose sender achieved less than this share of its rate did not put the asked load on.
BEHIND_SHARE = 0.95


def say(text: str) -> None:
    print(f"[latency-load] {text}", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="measured seconds of each e2e run (default 10)")
    parser.add_argument("--size", type=int, default=1024, help="record value bytes (default 1024)")
    parser.add_argument("--max-seconds", type=int, default=10, help="length of the maximum's run (default 10)")
    parser.add_argument("--brokers", default="kafgres,kafka")
    parser.add_argument("--kafka-port", type=int, default=9292, help="Apache Kafka's port (controller: +1)")
    parser.add_argument("--kafka-home", type=Path, default=Path("/tmp/kafgres-latency-load-kafka"))
    parser.add_argument("--chart", type=Path, default=ROOT / "docs/bench-latency-load.svg")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--keep-page-reporting", action="store_true",
                        help="leave the VM's free page reporting on (see host_memory.py)")
    parser.add_argument("--report", type=Path, metavar="RESULTS_JSON",
                        help="run nothing: print the table and draw the chart of an earlier run's results.json")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    args.brokers = [b for b in args.brokers.split(",") if b]
    if not set(args.brokers) <= {"kafgres", "kafka"} or not args.brokers or args.rounds < 1:
        parser.error("--brokers is kafgres and/or kafka; --rounds at least 1")
    if args.max_seconds < 1 or args.size < 16 or args.seconds < 1:
        parser.error("--max-seconds and --seconds at least 1, --size at least 16 (the e2e stamp)")
    return args


class LatencyLoad:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.run_id = time.strftime("%Y%m%d-%H%M%S")
        self.run_dir = STATE / self.run_id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.cluster = KafgresCluster(ROOT)
        self.kafka = KafkaBroker(ROOT, args.kafka_home, args.kafka_port, args.kafka_port + 1,
                                 die_with_parent=True)
        self.brokers: dict[str, Broker] = {}
        self.results: dict = {"run_id": self.run_id, "command": sys.argv, "size": args.size,
                              "seconds": args.seconds, "runs": []}

    # -- set-up

    def set_up(self) -> None:
        self.check_binary()
        if "kafgres" in self.args.brokers:
            policy = self.cluster.flush_policy()[0]
            if policy != "fsync":
                raise RuntimeError(f"kafgres.flush_policy is {policy}, not fsync: this script changes nothing; "
                                   "set it back (it is the default) and rerun")
            self.cluster.wait_ready()
            self.brokers["kafgres"] = Broker("kafgres", self.cluster.bootstrap, self.cluster.worker_pid)
            self.results["kafgres"] = {"flush_policy": policy, **self.cluster.versions()}
        if "kafka" in self.args.brokers:
            say(f"starting Apache Kafka on {self.args.kafka_port} (data in {self.kafka.data_dir})")
            self.kafka.start()
            self.brokers["kafka"] = Broker("kafka", self.kafka.bootstrap, lambda: self.kafka.pid)
            self.results["kafka"] = {"version": self.kafka.version, "topic_config": "flush.messages=1"}

    def check_binary(self) -> None:
        done = subprocess.run([self.args.bench_bin, "e2e", "--help"], capture_output=True, text=True, timeout=30)
        if "--latency-from" not in done.stdout:
            raise RuntimeError(f"{self.args.bench_bin} has no `e2e --latency-from`: "
                               "cargo build --release -p kafgres-bench")

    def tear_down(self) -> None:
        self.kafka.stop()
        path = self.run_dir / "results.json"
        path.write_text(json.dumps(self.results, indent=1))
        say(f"results: {path}")

    # -- runs

    def topic_args(self, broker: Broker, topic: str) -> list[str]:
        out = ["--bootstrap", broker.bootstrap, "--topic", topic, "--create-partitions", "1"]
        if broker.name == "kafka":
            out += ["--topic-config", "flush.messages=1"]
        return out

    def bench(self, broker: Broker, key: str, round_index: int, command: list[str], timeout_s: float) -> Run:
        log = self.run_dir / f"r{round_index}-{broker.name}-{key}.log"
        run = run_bench([self.args.bench_bin, *command], workload=key, broker=broker, mode="fsync",
                        round_index=round_index, timeout_s=timeout_s, log_path=log)
        self.results["runs"].append(asdict(run))
        return run

    def delete(self, broker: Broker, *topics: str) -> None:
        subprocess.run([self.args.bench_bin, "delete-topics", "--bootstrap", broker.bootstrap, *topics],
                       capture_output=True, timeout=120)
        os.sync()

    def maximum(self, broker: Broker, round_index: int) -> float:
        topic = f"ll-{self.run_id}-r{round_index}-max"
        settle_disk()
        try:  # a run at a broker's maximum writes gigabytes: never leave them behind, even when stopped
            run = self.bench(broker, "max", round_index,
                             ["produce", *self.topic_args(broker, topic), "--producers", "1", "--acks", "all",
                              "--linger-ms", "0", "--size", str(self.args.size),
                              "--seconds", str(self.args.max_seconds)],
                             timeout_s=self.args.max_seconds + RUN_SLACK_S)
        finally:
            self.delete(broker, topic)
        achieved = run.fields.get("records_per_s")
        if not run.line or not isinstance(achieved, float) or achieved <= 0:
            raise RuntimeError(f"{broker.name}: no maximum ({run.stderr_tail})")
        say(f"r{round_index} {broker.name:<7} maximum {achieved:,.0f} records/s "
            f"(errors={run.fields.get('errors')}, broker CPU {run.broker_cpu_s or 0:.1f} s)")
        return achieved

    def load(self, broker: Broker, round_index: int, key: str, rate: int) -> None:
        topic = f"ll-{self.run_id}-r{round_index}-{key}"
        settle_disk()
        try:
            run = self.bench(broker, key, round_index,
                             ["e2e", *self.topic_args(broker, topic), "--rate", str(rate),
                              "--seconds", str(self.args.seconds), "--size", str(self.args.size),
                              "--latency-from", "scheduled"], timeout_s=self.args.seconds + RUN_SLACK_S)
        finally:
            self.delete(broker, topic)
        self.print_run(run, f"{rate:,} rec/s")

    def mixed(self, broker: Broker, round_index: int, maximum: float) -> None:
        ingest_topic = f"ll-{self.run_id}-r{round_index}-ingest"
        probe_topic = f"ll-{self.run_id}-r{round_index}-probe"
        rate = max(1, round(MIXED_LOAD * maximum))
        settle_disk()
        # The ingest outlasts the probe's warm-up and measured phase by a few seconds each side.
        ingest_s = self.args.seconds + 8
        ingest = [self.args.bench_bin, "produce", *self.topic_args(broker, ingest_topic), "--producers", "1",
                  "--size", str(self.args.size), "--rate", str(rate), "--seconds", str(ingest_s),
                  "--linger-ms", "0"]
        log = self.run_dir / f"r{round_index}-{broker.name}-ingest.log"
        with open(log, "w") as err:
            err.write(f"$ {shlex.join(ingest)}\n")
            err.flush()
            process = subprocess.Popen(ingest, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                time.sleep(3)
                run = self.bench(broker, "mixed", round_index,
                                 ["e2e", *self.topic_args(broker, probe_topic), "--rate", str(MIXED_RATE),
                                  "--seconds", str(self.args.seconds), "--size", str(self.args.size),
                                  "--latency-from", "scheduled"], timeout_s=self.args.seconds + RUN_SLACK_S)
                stdout, _ = process.communicate(timeout=ingest_s + RUN_SLACK_S)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
                self.delete(broker, ingest_topic, probe_topic)
        lines = [row for row in (stdout or "").splitlines() if "=" in row]
        ingest_fields = parse_line(lines[-1]) if lines else {}
        self.results["runs"][-1].update(ingest_line=lines[-1] if lines else "", ingest_command=ingest,
                                        ingest_rate=rate)
        achieved = ingest_fields.get("records_per_s")
        self.print_run(run, f"1,000 rec/s next to {rate:,} rec/s (ingest achieved {achieved}, "
                            f"errors {ingest_fields.get('errors')})")

    def print_run(self, run: Run, what: str) -> None:
        f = run.fields
        if not run.line:
            say(f"r{run.round} {run.broker:<7} {run.workload:<8} FAILED: {run.stderr_tail.splitlines()[-1:]}")
            return
        say(f"r{run.round} {run.broker:<7} {run.workload:<8} {what}: achieved {f.get('achieved_rate')} "
            f"p50 {f.get('p50')} p99 {f.get('p99')} p99.9 {f.get('p999')} ms, send lag max "
            f"{f.get('send_lag_max')} ms, errors {f.get('errors')}, VM steal {steal_text(run)}")

    def run(self) -> None:
        for round_index in range(1, self.args.rounds + 1):
            order = list(self.brokers) if round_index % 2 else list(self.brokers)[::-1]
            maxima: dict[str, float] = {}
            for name in order:
                broker = self.brokers[name]
                maximum = maxima[name] = self.maximum(broker, round_index)
                self.results.setdefault("maximum", {}).setdefault(name, []).append(maximum)
                for level in LEVELS:
                    self.load(broker, round_index, f"load-{int(level * 100)}", max(1, round(level * maximum)))
                self.mixed(broker, round_index, maximum)
            # Each broker at its own 50% compares loads of different sizes; this
            # puts both under the same one: 50% of the round's slower maximum.
            if len(maxima) > 1:
                same = max(1, round(SAME_LOAD * min(maxima.values())))
                for name in order:
                    self.load(self.brokers[name], round_index, SAME_KEY, same)

    # -- report

    def medians(self) -> dict[str, dict[str, dict[str, float]]]:
        """broker -> workload -> field -> median over the rounds (clean runs only)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for run in self.results["runs"]:
            if not run["line"] or run["fields"].get("errors", 1) != 0:
                continue
            cell = out.setdefault(run["broker"], {}).setdefault(run["workload"], {})
            for key in (*QUANTILES, "achieved_rate", "rate", "send_lag_max"):
                value = run["fields"].get(key)
                if isinstance(value, float):
                    cell.setdefault(key, []).append(value)  # type: ignore[arg-type]
        return {b: {w: {k: statistics.median(v) for k, v in f.items()} for w, f in ws.items()}
                for b, ws in out.items()}

    def report(self) -> str:
        medians = self.medians()
        self.results["medians"] = medians
        rows = ["| load | Kafgres rec/s | p50 | p99 | p99.9 | Kafka rec/s | p50 | p99 | p99.9 | p99 Kafgres / Kafka |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for workload, label in [("load-25", "25%"), ("load-50", "50%"), ("load-80", "80%"),
                                ("mixed", "1,000 rec/s next to 80%"),
                                (SAME_KEY, f"both at {SAME_LOAD:.0%} of the slower maximum")]:
            cells = []
            for broker in ("kafgres", "kafka"):
                m = medians.get(broker, {}).get(workload, {})
                behind = "achieved_rate" in m and m["achieved_rate"] < BEHIND_SHARE * m.get("rate", 0)
                cells += [f"{m['achieved_rate']:,.0f}{' †' if behind else ''}" if "achieved_rate" in m else "–"]
                cells += [f"{m[q]:.3f}" if q in m else "–" for q in QUANTILES]
            a = medians.get("kafgres", {}).get(workload, {}).get("p99")
            b = medians.get("kafka", {}).get(workload, {}).get("p99")
            ratio = f"{a / b:.2f}×" if a and b else "–"
            rows.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")
        maxima = {b: statistics.median(v) for b, v in self.results.get("maximum", {}).items()}
        rows.append("")
        rows.append(f"† sent below {BEHIND_SHARE:.0%} of the asked rate: the sender fell behind its schedule "
                    "(send_lag_max in results.json), so the row measures the client as much as the broker.")
        rows.append("maximum (median of the rounds, records/s): " +
                    ", ".join(f"{b} {v:,.0f}" for b, v in maxima.items()))
        a = medians.get("kafgres", {}).get("load-50", {}).get("p99")
        b = medians.get("kafka", {}).get("load-50", {}).get("p99")
        if a and b:
            rows.append(f"target: p99 at 50% at most 0.5x Kafka's: {a / b:.2f}x "
                        f"({'met' if a / b <= 0.5 else 'not met'})")
        return "\n".join(rows)


def steal_text(run: Run) -> str:
    """The run's steal time per second of wall time: how long the host kept the vCPUs stopped
    (scripts/bench/vm_pauses.py shows the pattern: ~10-15 ms every 100 ms while fsyncs run)."""
    if run.steal_s is None or run.wall_s <= 0:
        return "unknown"
    return f"{1000 * run.steal_s / run.wall_s:.0f} ms/s"


def render_chart(medians: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kafgres-bench"
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    colours = {"kafka": "#5b6770", "kafgres": "#1f77b4"}
    styles = {"p50": ":", "p99": "-", "p999": "--"}
    fig, (ax, mixed_ax) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    behind_label = "sender behind its schedule"
    for broker, workloads in medians.items():
        name = "Kafka" if broker == "kafka" else "Kafgres"
        for q in QUANTILES:
            points = [(int(level * 100), workloads.get(f"load-{int(level * 100)}", {}).get(q)) for level in LEVELS]
            points = [(x, y) for x, y in points if y is not None]
            if points:
                ax.plot(*zip(*points), styles[q], marker="o", color=colours[broker], label=f"{name} {q}")
            for level in LEVELS:
                m = workloads.get(f"load-{int(level * 100)}", {})
                if q in m and m.get("achieved_rate", 0) < BEHIND_SHARE * m.get("rate", 0):
                    ax.plot([int(level * 100)], [m[q]], "x", color="red", markersize=10, label=behind_label)
                    behind_label = None  # one legend entry for all
        mixed = workloads.get("mixed", {})
        for i, q in enumerate(QUANTILES):
            if q in mixed:
                offset = 0 if broker == "kafgres" else 0.3
                mixed_ax.bar(i + offset, mixed[q], width=0.3, color=colours[broker],
                             label=name if i == 0 else None)
    ax.set_yscale("log")
    ax.set_xticks([int(level * 100) for level in LEVELS])
    ax.set_xlabel("load, % of the broker's own maximum")
    ax.set_ylabel("end-to-end latency, ms (log), from the scheduled send")
    ax.set_title("open-loop e2e latency, fsync before ack (median of rounds)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    mixed_ax.set_yscale("log")
    mixed_ax.set_xticks([0.15, 1.15, 2.15], ["p50", "p99", "p99.9"])
    mixed_ax.set_title("1,000 rec/s next to 80% ingest", fontsize=10)
    mixed_ax.grid(True, axis="y", which="both", alpha=0.3)
    mixed_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def report_only(args: argparse.Namespace) -> int:
    bench = LatencyLoad.__new__(LatencyLoad)
    bench.results = json.loads(args.report.read_text())
    print(bench.report())
    if not args.no_chart:
        render_chart(bench.results["medians"], args.chart)
        say(f"chart: {args.chart}")
    return 0


def main() -> int:
    args = parse_args()
    if args.report:
        return report_only(args)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    bench = LatencyLoad(args)
    try:
        with host_memory.settled(not args.keep_page_reporting, lambda text: say(f"host memory: {text}")):
            bench.set_up()
            bench.run()
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        say(f"FAILED: {err}")
        bench.results["failure"] = str(err)
        return 1
    finally:
        bench.tear_down()
    table = bench.report()
    (bench.run_dir / "results.json").write_text(json.dumps(bench.results, indent=1))
    print("\n" + table)
    if not args.no_chart:
        render_chart(bench.results["medians"], args.chart)
        say(f"chart: {args.chart}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
