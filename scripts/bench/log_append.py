#!/usr/bin/env python3
"""Append throughput of the log engine next to the disk's own limits, in one run.

Runs fio (sequential 1 MiB writes direct and buffered, 4 KiB write+fdatasync;
scripts/bench/machine.py) and then `kafgres-log-bench` (the broker's append path
and group-commit flusher, in process) for 1 KiB and 256 KiB batches, with
fsync before the ack and without, `--writers` concurrent writers, `--rounds`
rounds each (median reported), all in .kafgres/bench on the same device.
Prints the fio figures, every run's line, and a summary table in Markdown.

Usage: scripts/bench/log_append.py [--seconds 5] [--rounds 3] [--writers 8] [--quick]
Builds the release binary first (cargo build --release -p kafgres-broker --bin kafgres-log-bench).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import host_memory  # noqa: E402
import machine  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "target" / "release" / "kafgres-log-bench"
CASES = [  # (label, batch bytes, records per batch)
    ("1 KiB", 1024, 1),
    ("256 KiB", 256 * 1024, 256),
]


def run(args: argparse.Namespace, policy: str, batch_bytes: int, records: int) -> dict[str, float]:
    out = subprocess.run(
        [str(BENCH), "--dir", str(REPO_ROOT / ".kafgres" / "bench"), "--policy", policy,
         "--batch-bytes", str(batch_bytes), "--records", str(records), "--writers", str(args.writers),
         "--seconds", str(args.seconds), "--max-bytes", str(6 << 30)],
        capture_output=True, text=True, timeout=args.seconds * 10 + 60, check=True,
    ).stdout.strip()
    print(out, flush=True)
    return {k: float(v) for k, v in (kv.split("=", 1) for kv in out.split()[1:]) if k != "policy"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="smaller fio runs")
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "kafgres-broker", "--bin", "kafgres-log-bench"],
                   cwd=REPO_ROOT, check=True)
    disk = machine.disk(REPO_ROOT / ".kafgres" / "bench" / "fio", args.quick)
    for command in disk["commands"]:
        print("$", command)
    print(f"disk: sequential write {disk['seq_write_direct_mb_s']:.0f} MB/s direct, "
          f"{disk['seq_write_buffered_mb_s']:.0f} MB/s buffered + fsync; "
          f"4 KiB write+fdatasync {disk['fdatasync_per_s']:.0f}/s, p50 {disk['fdatasync_p50_ms']:.3f} ms")
    medians: dict[tuple[str, str], dict[str, float]] = {}
    for _ in range(args.rounds):
        for label, size, records in CASES:
            for policy in ("fsync", "page_cache"):
                medians.setdefault((label, policy), {})
                result = run(args, policy, size, records)
                for key, value in result.items():
                    medians[(label, policy)].setdefault(key, []).append(value)  # type: ignore[arg-type]
    print()
    print(f"| batch | fsync before ack: MB/s | batches/s | batches per fdatasync | page cache: MB/s | batches/s | "
          f"fsync / page cache |")
    print("|---|---|---|---|---|---|---|")
    for label, _, _ in CASES:
        f = {k: statistics.median(v) for k, v in medians[(label, "fsync")].items()}  # type: ignore[arg-type]
        p = {k: statistics.median(v) for k, v in medians[(label, "page_cache")].items()}  # type: ignore[arg-type]
        print(f"| {label} | {f['mb_s']:.0f} | {f['batches_s']:,.0f} | {f['batches_per_flush']:.2f} | {p['mb_s']:.0f} | "
              f"{p['batches_s']:,.0f} | {f['batches_s'] / p['batches_s']:.2f}× |")
    print(f"\nwriters={args.writers} seconds={args.seconds} rounds={args.rounds} (medians); "
          f"disk direct {disk['seq_write_direct_mb_s']:.0f} MB/s, buffered {disk['seq_write_buffered_mb_s']:.0f} MB/s, "
          f"fdatasync p50 {disk['fdatasync_p50_ms']:.3f} ms")


if __name__ == "__main__":
    # Appends take fresh page-cache pages: settle the VM's memory first (host_memory.py).
    with host_memory.settled(True, lambda text: print(f"[host_memory] {text}", flush=True)):
        main()
