"""Waiting for a quiet disk between benchmark runs.

A run that starts inside the previous one's write-back, or inside the discards
of the topic it deleted, measures them too. `settle_disk` waits (bounded) until
neither is going on. Used by scripts/bench/latency_load.py,
scripts/bench/efficiency_bench.py and scripts/bench/compare.py (`./kafgres bench`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# A run starts once the kernel holds less than this much dirty or in-flight data and the disk
# wrote less than DISK_QUIET_BYTES in a second, DISK_QUIET_S in a row (at most SETTLE_LIMIT_S),
# so that no run starts inside the previous one's write-back.
DIRTY_QUIET_BYTES = 64 << 20
DISK_QUIET_BYTES = 8 << 20
DISK_QUIET_S = 2.0
SETTLE_LIMIT_S = 60.0


def _dirty_bytes() -> int:
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return sum(int(fields[k].split()[0]) * 1024 for k in ("Dirty", "Writeback") if k in fields)


def _disk_activity() -> tuple[int, int]:
    """Bytes written and bytes discarded so far on the whole disks (not partitions), from
    /proc/diskstats (sectors written is its 7th counter, sectors discarded its 14th)."""
    written = discarded = 0
    for line in Path("/proc/diskstats").read_text().splitlines():
        parts = line.split()
        if len(parts) > 9 and Path(f"/sys/block/{parts[2]}/device").exists():
            written += int(parts[9]) * 512
            discarded += int(parts[16]) * 512 if len(parts) > 16 else 0
    return written, discarded


def settle_disk() -> None:
    """Waits (bounded by SETTLE_LIMIT_S) until the previous run's write-back is over, and the
    discards of its deleted topic: on a filesystem mounted with `discard` (this machine's ext4),
    freeing a maximum run's ~17 GB issued 4.5-8 s of discards at ~3.8 GB/s, starting at the journal commit after
    the unlink, and fdatasyncs wait behind them (a run started inside them had its sender 0.7 s
    behind at 25% load)."""
    os.sync()  # commits the journal now, so a deletion's discards start now, not at the next commit
    deadline = time.monotonic() + SETTLE_LIMIT_S
    quiet_since = None
    written, discarded = _disk_activity()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now_written, now_discarded = _disk_activity()
        quiet = (_dirty_bytes() < DIRTY_QUIET_BYTES and (now_written - written) * 4 < DISK_QUIET_BYTES
                 and now_discarded == discarded)
        written, discarded = now_written, now_discarded
        quiet_since = (quiet_since or time.monotonic()) if quiet else None
        if quiet_since is not None and time.monotonic() - quiet_since >= DISK_QUIET_S:
            return
    print(f"[disk] not quiet within {SETTLE_LIMIT_S:.0f} s; running anyway", flush=True)
