"""How close a throttled client stays to its quota (issue 20's figure).

    scripts/bench/quota_bench.py [--rate-mb 4] [--seconds 20]

On the cluster of `./kafgres start`: a producer_byte_rate and a consumer_byte_rate of
--rate-mb MiB/s for one client id each, inserted into kafgres.client_quotas and reloaded. A
kafgres-bench producer with that client id first runs for 12 s (a client may burst up to a
window's worth, 10 s of its quota, before it is throttled; this spends it), then a measured run
of --seconds; the same for a consumer, which reads a topic of 12 s of quota, then one of
--seconds of quota (filled by a client id without a quota). Prints each measured rate and its
ratio to the quota. The rows are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafgres_cluster import KafgresCluster, run_bench as bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def reload(cluster: KafgresCluster) -> None:
    """pg_reload_conf(), then waits for the broker's line saying it reread the quotas."""
    cluster.reload_until(b"kafgres: reloaded")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-mb", type=float, default=4.0)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    cluster = KafgresCluster(ROOT)
    rate = args.rate_mb * 1024 * 1024
    tag = uuid.uuid4().hex[:8]
    producer_id, consumer_id, topic = f"quota-bench-p-{tag}", f"quota-bench-c-{tag}", f"quota-bench-{tag}"
    cluster.psql(
        "INSERT INTO kafgres.client_quotas (client_id, quota_key, quota_value) VALUES "
        f"('{producer_id}', 'producer_byte_rate', {rate:.0f}), ('{consumer_id}', 'consumer_byte_rate', {rate:.0f})"
    )
    try:
        reload(cluster)
        common = ["--bootstrap", cluster.bootstrap, "--topic", topic]
        # A small client queue and few requests in flight: a closed-loop producer offers far more than
        # its quota, and with librdkafka's defaults its backlog would outlive message.timeout.ms.
        produce = ["produce", *common, "--size", "1024", "--producers", "1", "--set", f"client.id={producer_id}",
                   "--set", "queue.buffering.max.kbytes=4096", "--set", "max.in.flight.requests.per.connection=5",
                   "--message-timeout-ms", "120000"]
        bench(args.bench_bin, *produce, "--create-partitions", "1", "--seconds", "12", timeout_s=120)
        measured = bench(args.bench_bin, *produce, "--seconds", str(args.seconds), timeout_s=args.seconds * 4 + 60)
        produced_mb = float(measured["mb_per_s"])
        # A consume reads a whole topic: one topic to spend the burst allowance (12 s of quota), one to
        # measure (--seconds of quota), both filled by a client id without a quota.
        for name, seconds in ((f"{topic}-burst", 12), (f"{topic}-measured", args.seconds)):
            bench(args.bench_bin, "produce", "--bootstrap", cluster.bootstrap, "--topic", name, "--create-partitions",
                  "1", "--size", "1024", "--count", str(int(seconds * rate / 1024)), timeout_s=300)
        consume = ["consume", "--bootstrap", cluster.bootstrap, "--set", f"client.id={consumer_id}"]
        bench(args.bench_bin, *consume, "--topic", f"{topic}-burst", "--expect", str(int(12 * rate / 1024)),
              timeout_s=120)
        consumed = bench(args.bench_bin, *consume, "--topic", f"{topic}-measured",
                         "--expect", str(int(args.seconds * rate / 1024)), timeout_s=args.seconds * 4 + 60)
        consumed_mb = float(consumed["mb_per_s"])
    finally:
        cluster.psql(f"DELETE FROM kafgres.client_quotas WHERE client_id IN ('{producer_id}', '{consumer_id}')")
        reload(cluster)
        subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", cluster.bootstrap, topic, f"{topic}-burst",
                        f"{topic}-measured"], capture_output=True, timeout=60)
    quota_mb = rate / 1e6
    print(f"quota {quota_mb:.2f} MB/s ({args.rate_mb} MiB/s); measured over {args.seconds} s after the burst:")
    print(f"  producer {produced_mb:.2f} MB/s = {produced_mb / quota_mb:.2f} x the quota")
    print(f"  consumer {consumed_mb:.2f} MB/s = {consumed_mb / quota_mb:.2f} x the quota")
    return 0


if __name__ == "__main__":
    sys.exit(main())
