"""Share-group delivery (KIP-932) with four share consumers, Kafgres next to Apache Kafka 4.4.0, in one
run (issue 22's figure).

    scripts/bench/share_bench.py [--rounds 3] [--seconds 10] [--partitions 1,4] \
        [--fetch-max-bytes default,1048576]

Needs Java 17+ and Maven, and the cluster of `./kafgres start`. Resolves Kafka 4.4.0's jars with
scripts/bench/pom.xml at that version into .kafgres/bench/kafka-4.4.0-lib (the other benchmarks keep
the pom's 4.1.1) and starts it (KRaft, one node, its defaults: share groups are on, share.version 2)
on 127.0.0.1:29192. Each round runs scripts/bench/ShareBench.java (kafka-clients 4.4.0 from the same
classpath, in Java's single-file mode) once per partition count on each broker, alternating which
broker goes first: a topic of RECORDS records of 1 KiB (`--records`, 1.5M by default: Kafka 4.4's
four consumers drained it in 5-10 s on a 2-core VM), four KafkaShareConsumers in explicit acknowledgement mode accepting
every record with commitSync for --seconds (throughput), then a second topic of --release-records
records where every 100th offset is released once (redelivery latency: from the releasing
commitSync's return to the record's next delivery). ShareBench.java documents every field. Kafgres
runs its flush policy (fsync by default: an acknowledgement is answered once its state is durable),
Kafka its defaults (page cache; the share coordinator's state topic is not fsynced per write).
`--fetch-max-bytes` adds runs whose consumers set fetch.max.bytes (`default`: the client's 50 MiB),
a diagnostic: it bounds how much of the log one ShareFetch makes Kafgres copy. Prints one line per run
and the medians; each run's output, with its records accepted per second, goes to
.kafgres/bench/share/runs.log.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apache_kafka import KafkaBroker, resolve_classpath  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = "4.4.0"
KAFKA_CLASSPATH = f".kafgres/bench/kafka-{KAFKA_VERSION}-lib/classpath.txt"
KAFKA_PORT, KAFKA_CONTROLLER_PORT = 29192, 29194
RELEASE_EVERY = 100
LINE_FIELDS = ("records_per_s", "mib_per_s", "seconds", "delivered_twice", "missing", "per_consumer",
               "records_per_poll", "r_released", "r_redelivered", "r_early", "r_p50_ms", "r_p99_ms", "r_max_ms",
               "r_sent_p50_ms", "r_sent_p99_ms", "r_anomalies", "r_deliveries", "ack_errors", "r_ack_errors")
MEDIAN_FIELDS = ("records_per_s", "r_p50_ms", "r_p99_ms", "r_sent_p50_ms", "r_sent_p99_ms")


def run_share_bench(classpath: str, bootstrap: str, partitions: int, records: int, seconds: int,
                    release_records: int, fetch_max_bytes: str, log: Path) -> dict[str, str]:
    topic = f"share-bench-{uuid.uuid4().hex[:8]}"
    args = [bootstrap, topic, str(partitions), str(records), str(seconds), str(release_records), str(RELEASE_EVERY)]
    if fetch_max_bytes != "default":
        args.append(fetch_max_bytes)
    done = subprocess.run(["java", "-Xmx1g", "-cp", classpath, str(ROOT / "scripts/bench/ShareBench.java"), *args],
                          capture_output=True, text=True, timeout=seconds * 4 + 600)
    with log.open("a") as out:
        out.write(f"$ ShareBench {' '.join(args)}\n{done.stdout}{done.stderr}\n")
    line = next((l for l in done.stdout.splitlines() if l.startswith("produce_s=")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"ShareBench failed ({done.returncode}): {done.stdout[-800:]} {done.stderr[-3000:]}")
    return dict(field.split("=", 1) for field in line.split())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--partitions", default="1,4", help="partition counts, comma separated")
    parser.add_argument("--records", type=int, default=1_500_000, help="records of the throughput topic")
    parser.add_argument("--release-records", type=int, default=20_000, help="records of the redelivery topic")
    parser.add_argument("--fetch-max-bytes", default="default",
                        help="the consumers' fetch.max.bytes, comma separated ('default': the client's)")
    args = parser.parse_args()
    partition_counts = [int(p) for p in args.partitions.split(",")]
    fetch_sizes = args.fetch_max_bytes.split(",")
    state = ROOT / ".kafgres/bench/share"
    state.mkdir(parents=True, exist_ok=True)
    cluster = KafgresCluster(ROOT)
    resolve_classpath(ROOT, KAFKA_VERSION, KAFKA_CLASSPATH)
    kafka = KafkaBroker(ROOT, state / "kafka", KAFKA_PORT, KAFKA_CONTROLLER_PORT, die_with_parent=True,
                        classpath_file=KAFKA_CLASSPATH)
    classpath = kafka.classpath()
    if kafka.version != KAFKA_VERSION:
        raise RuntimeError(f"{KAFKA_CLASSPATH} holds Kafka {kafka.version}, not {KAFKA_VERSION}")
    policy = cluster.psql("SHOW kafgres.flush_policy").strip()
    print(f"[share-bench] load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"kafgres.flush_policy={policy}; Kafka {kafka.version}; {args.rounds} rounds of {args.seconds} s; "
          f"{args.records} + {args.release_records} records of 1 KiB", flush=True)
    log = state / "runs.log"
    log.write_text("")
    results: dict[tuple[str, int, str], list[dict[str, str]]] = {}
    try:
        kafka.start()
        for round_index in range(args.rounds):
            brokers = [("kafgres", cluster.bootstrap), ("kafka", kafka.bootstrap)]
            if round_index % 2:
                brokers.reverse()
            for fetch_max_bytes in fetch_sizes:
                for partitions in partition_counts:
                    for name, bootstrap in brokers:
                        run = run_share_bench(classpath, bootstrap, partitions, args.records, args.seconds,
                                              args.release_records, fetch_max_bytes, log)
                        results.setdefault((name, partitions, fetch_max_bytes), []).append(run)
                        load = os.getloadavg()[0]
                        print(f"[share-bench] round {round_index + 1} {name:<8} partitions={partitions} "
                              f"fetch.max.bytes={fetch_max_bytes} load1={load:.2f} "
                              + " ".join(f"{k}={run.get(k)}" for k in LINE_FIELDS), flush=True)
    finally:
        kafka.stop()
    print(f"[share-bench] load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print()
    print("| fetch.max.bytes | partitions | broker | records/s accepted | MiB/s | redelivery p50 / p99 (ms) "
          "| from the release sent p50 / p99 (ms) | delivered twice / missing (all runs) "
          "| redelivery anomalies (all runs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, partitions, fetch_max_bytes), runs in sorted(
            results.items(), key=lambda item: (fetch_sizes.index(item[0][2]), item[0][1], item[0][0])):
        rate, p50, p99, sent_p50, sent_p99 = (statistics.median(float(r[k]) for r in runs) for k in MEDIAN_FIELDS)
        twice = sum(int(r["delivered_twice"]) for r in runs)
        missing = sum(int(r["missing"]) for r in runs if r["missing"] != "n/a")
        anomalies = sum(int(r["r_anomalies"]) for r in runs)
        print(f"| {fetch_max_bytes} | {partitions} | {name} | {rate:,.0f} | {rate * 1024 / 2**20:.1f} "
              f"| {p50:.1f} / {p99:.1f} | {sent_p50:.1f} / {sent_p99:.1f} | {twice} / {missing} | {anomalies} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
