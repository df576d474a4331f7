"""Transaction commits with transaction version 2 (KIP-890 part 2) against version 1, Kafgres next to
Apache Kafka, in one run (issue 22's figure).

    scripts/bench/txn_bench.py [--rounds 3] [--seconds 10]

Needs what `./kafgres bench` prepares (Kafka's jars under .kafgres/bench/kafka-lib) and the cluster
of `./kafgres start`. Starts Kafka 4.x (KRaft, one node, its defaults) on 127.0.0.1:29092. Each round
runs scripts/bench/TxnBench.java (the Java client, in Java's single-file mode) on each broker at
each transaction version: transactions of 10 records of 100 B over 4 partitions, committed one after
the other by one producer; commits/s and the commit time's p50 and p99 (beginTransaction to
commitTransaction's return). The version is the broker's finalized `transaction.version`: for
Kafgres `kafgres.transaction_version` (ALTER SYSTEM, reload; reset at the end), for Kafka
UpdateFeatures (`kafka-features.sh downgrade`/`upgrade`). The Java client uses version 2 exactly when
the broker finalizes it. Kafgres runs its flush policy (fsync by default), Kafka its page cache.
Prints one line per run and the medians.
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

from apache_kafka import KafkaBroker  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFKA_PORT, KAFKA_CONTROLLER_PORT = 29092, 29094
FIELDS = ("commits_per_s", "p50_ms", "p99_ms")


def run_txn_bench(classpath: str, bootstrap: str, seconds: int, version: int | None) -> dict[str, float]:
    topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
    args = [bootstrap, topic, str(seconds), "2"] + ([str(version)] if version is not None else [])
    done = subprocess.run(["java", "-cp", classpath, str(ROOT / "scripts/bench/TxnBench.java"), *args],
                          capture_output=True, text=True, timeout=seconds * 6 + 120)
    line = next((l for l in done.stdout.splitlines() if l.startswith("transaction_version=")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"TxnBench failed ({done.returncode}): {done.stdout[-800:]} {done.stderr[-1500:]}")
    return {k: float(v) for k, v in (field.split("=", 1) for field in line.split())}


def set_kafgres_version(cluster: KafgresCluster, version: int | None) -> None:
    if version is None:
        cluster.psql("ALTER SYSTEM RESET kafgres.transaction_version")
        cluster.reload_until(b"kafgres.transaction_version is now 2")
    else:
        cluster.psql(f"ALTER SYSTEM SET kafgres.transaction_version = {version}")
        cluster.reload_until(f"kafgres.transaction_version is now {version}".encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    state = ROOT / ".kafgres/bench/txn"
    state.mkdir(parents=True, exist_ok=True)
    cluster = KafgresCluster(ROOT)
    kafka = KafkaBroker(ROOT, state / "kafka", KAFKA_PORT, KAFKA_CONTROLLER_PORT, die_with_parent=True)
    classpath = kafka.classpath()
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    kafgres_version = 2
    try:
        kafka.start()
        for round_index in range(args.rounds):
            for version in (2, 1):
                if version != kafgres_version:
                    set_kafgres_version(cluster, version)
                    kafgres_version = version
                for name, bootstrap, set_version in (("kafgres", cluster.bootstrap, None),
                                                     ("kafka", kafka.bootstrap, version)):
                    run = run_txn_bench(classpath, bootstrap, args.seconds, set_version)
                    if int(run["transaction_version"]) != version:
                        raise RuntimeError(f"{name} finalized transaction.version {run['transaction_version']}, "
                                           f"not {version}")
                    results.setdefault((name, version), []).append(run)
                    print(f"[txn-bench] round {round_index + 1} {name:<8} v{version} "
                          + " ".join(f"{k}={run[k]}" for k in FIELDS), flush=True)
    finally:
        kafka.stop()
        if kafgres_version != 2:
            set_kafgres_version(cluster, None)
    print()
    print("| broker | transaction version | commits/s | commit p50 (ms) | commit p99 (ms) |")
    print("|---|---|---|---|---|")
    for (name, version), runs in sorted(results.items()):
        medians = [statistics.median(r[k] for r in runs) for k in FIELDS]
        print(f"| {name} | {version} | {medians[0]:,.1f} | {medians[1]:.3f} | {medians[2]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
