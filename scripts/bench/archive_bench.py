"""How fast kafgres.archive_command keeps up with producers (issue 21's figure).

    scripts/bench/archive_bench.py [--seconds 20] [--segment-mb 64]

On the cluster of `./kafgres start`: `kafgres.archive_command` is set (ALTER SYSTEM and a
reload) to `cp` each file into a temporary directory on the same disk, a topic with
--segment-mb segments takes a 1 KiB acks=all kafgres-bench producer for --seconds (after the
same run on a topic of its own with archiving off, for comparison), and
`kafgres.archive_status` is read until nothing closed is left unarchived. Prints the produce
rate, the archive rate while producing and until caught up, and how long the archive trailed
the last record. Archiving covers every topic's closed segments: run it on a cluster whose
other topics are archived already or small. The setting, the topics and the copies are
removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafgres_cluster import KafgresCluster, run_bench as bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def archive_status(cluster: KafgresCluster) -> tuple[int, int, int, int]:
    """(segments, bytes archived, backlog segments, failures)."""
    row = cluster.psql("SELECT segments_archived, bytes_archived, backlog_segments, failures "
                       "FROM kafgres.archive_status")
    segments, archived, backlog, failures = (int(v) for v in row.split("|"))
    return segments, archived, backlog, failures


def set_archive_command(cluster: KafgresCluster, command: str | None) -> None:
    """Sets (or resets) the command and waits for the broker worker's line saying it took it."""
    if command is None:
        cluster.psql("ALTER SYSTEM RESET kafgres.archive_command")
    else:
        cluster.psql(f"ALTER SYSTEM SET kafgres.archive_command = '{command}'")
    cluster.reload_until(b"kafgres: kafgres.archive_command is now")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    cluster = KafgresCluster(ROOT)
    archive = Path(tempfile.mkdtemp(prefix="kafgres-archive-bench-", dir=str(ROOT / ".kafgres")))
    shutil.chown(archive, "postgres", "postgres")
    topic = f"archive-bench-{uuid.uuid4().hex[:8]}"
    produce = ["produce", "--bootstrap", cluster.bootstrap, "--create-partitions", "1",
               "--topic-config", f"segment.bytes={args.segment_mb << 20}", "--size", "1024",
               "--seconds", str(args.seconds)]
    try:
        # The same run without archiving first: what the command costs the producer.
        baseline = bench(args.bench_bin, *produce, "--topic", f"{topic}-baseline", timeout_s=args.seconds * 4 + 120)
        # Gone before archiving starts: its closed segments would be archived too.
        subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", cluster.bootstrap, f"{topic}-baseline"],
                       capture_output=True, timeout=60, check=True)
        set_archive_command(cluster, f'd={archive}/%f; mkdir -p "${{d%/*}}" && cp %p "$d"')
        segments0, bytes0, _, failures0 = archive_status(cluster)
        started = time.monotonic()
        produced = bench(args.bench_bin, *produce, "--topic", topic, timeout_s=args.seconds * 4 + 120)
        produce_end = time.monotonic()
        _, bytes_at_end, backlog_at_end, _ = archive_status(cluster)
        deadline = produce_end + 600
        while True:
            segments, archived, backlog, failures = archive_status(cluster)
            if backlog == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        caught_up = time.monotonic()
    finally:
        set_archive_command(cluster, None)
        subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", cluster.bootstrap, topic, f"{topic}-baseline"],
                       capture_output=True, timeout=60)
        shutil.rmtree(archive, ignore_errors=True)
    mb = 1e6
    print(f"produce without archiving: {float(baseline['mb_per_s']):.0f} MB/s; with it: "
          f"{float(produced['mb_per_s']):.0f} MB/s (1 KiB records, {args.seconds} s, {args.segment_mb} MiB segments)")
    print(f"archived while producing: {(bytes_at_end - bytes0) / mb / (produce_end - started):.0f} MB/s; "
          f"{backlog_at_end} closed segments behind when the producer stopped")
    print(f"archived in all: {segments - segments0} segments, {(archived - bytes0) / mb:.0f} MB in "
          f"{caught_up - started:.1f} s = {(archived - bytes0) / mb / (caught_up - started):.0f} MB/s; caught up "
          f"{caught_up - produce_end:.1f} s after the last record; {failures - failures0} failures; "
          f"backlog now {backlog}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
