"""Settles a virtual machine's memory before the brokers are measured.

A VM whose balloon device reports free pages (virtio-balloon free page
reporting, this machine's case) hands free memory back to its host, in
blocks of 2 MiB and up; the next time the guest uses such a page, the host
must fault it in and zero it. Measured here: populating anonymous memory
took 2.4-2.7 µs per 4 KiB page the first time and 0.9-1.1 µs once the host
backed it; buffered file writes into reported memory ran at 1.1-1.4 GB/s,
2.5-4.1 GB/s otherwise. A broker appending through the page cache takes
fresh pages for every byte it writes, so on such a VM the host's faults, not
the broker, bound produce throughput (the profile shows them as the kernel's
copy into the page cache, 68% of the broker's busy core) -- a cost bare
metal does not have.

For the run, `settled()` stops free page reporting (its order is set above
the buddy allocator's largest, so no free block qualifies), touches the free
memory once so the host backs it, and restores the reporting order at the
end. It measures the per-page cost of that first touch and of a second one
on the now-backed memory, so the report shows what was removed. Machines
without reporting, or runs without root, are left as they are.
"""

from __future__ import annotations

import contextlib
import mmap
import time
from pathlib import Path
from typing import Iterator

REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
# Memory left untouched for the brokers, Postgres and the page cache the run starts with.
HEADROOM_BYTES = 3 << 30
CHUNK_BYTES = 1 << 30
PAGE_BYTES = mmap.PAGESIZE
# The second touch is a sample: enough to time, small enough to be quick.
SAMPLE_BYTES = 1 << 30


def meminfo_bytes(field: str) -> int:
    for row in Path("/proc/meminfo").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1]) * 1024
    raise RuntimeError(f"/proc/meminfo has no {field}")


def buddy_orders() -> int:
    """How many block orders the buddy allocator has (MAX_PAGE_ORDER + 1)."""
    row = Path("/proc/buddyinfo").read_text().splitlines()[0]
    return len(row.split("zone", 1)[1].split()[1:])


def touch(total_bytes: int) -> tuple[int, float]:
    """Maps and populates `total_bytes` of anonymous memory, all held at once so
    every chunk takes distinct pages; returns the bytes touched and seconds taken.
    Stops early, with what it has, if the kernel refuses a chunk."""
    chunks: list[mmap.mmap] = []
    started = time.monotonic()
    try:
        for _ in range(total_bytes // CHUNK_BYTES):
            try:
                chunks.append(mmap.mmap(-1, CHUNK_BYTES,
                                        flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE))
            except OSError:
                break
        return len(chunks) * CHUNK_BYTES, time.monotonic() - started
    finally:
        for chunk in chunks:
            chunk.close()


def us_per_page(touched: int, seconds: float) -> float:
    return seconds * 1e6 / (touched / PAGE_BYTES) if touched else 0.0


@contextlib.contextmanager
def settled(enabled: bool, say) -> Iterator[dict]:
    """Yields what was done, for the results; restores the reporting order on exit."""
    facts: dict = {"page_reporting": "absent"}
    if not REPORTING_ORDER.exists():
        yield facts
        return
    original = REPORTING_ORDER.read_text().strip()
    facts.update(page_reporting=f"order {original}", page_reporting_order=int(original))
    if not enabled:
        facts["settled"] = False
        say(f"free page reporting left on (order {original}, --keep-page-reporting)")
        yield facts
        return
    disabled = str(buddy_orders())
    try:
        REPORTING_ORDER.write_text(disabled)
    except OSError as err:
        facts["settled"] = False
        say(f"free page reporting left on (order {original}): cannot change it ({err})")
        yield facts
        return
    try:
        wanted = max(0, meminfo_bytes("MemAvailable") - HEADROOM_BYTES) // CHUNK_BYTES * CHUNK_BYTES
        say(f"free page reporting off for the run (order {original} -> {disabled}); "
            f"touching {wanted >> 30} GiB of free memory so the host backs it")
        first_bytes, first_s = touch(wanted)
        again_bytes, again_s = touch(min(SAMPLE_BYTES, first_bytes))
        facts.update(
            settled=True,
            touched_gib=first_bytes >> 30,
            first_touch_us_per_page=us_per_page(first_bytes, first_s),
            backed_touch_us_per_page=us_per_page(again_bytes, again_s),
        )
        say(f"first touch {facts['first_touch_us_per_page']:.2f} µs per page (host faults included), "
            f"again {facts['backed_touch_us_per_page']:.2f} µs")
        yield facts
    finally:
        REPORTING_ORDER.write_text(original)
        say(f"free page reporting restored (order {original})")


def main() -> int:
    """`host_memory.py -- COMMAND...`: runs COMMAND with the memory settled
    (for the scripts that are not Python, e.g. ab-builds.sh); its exit code."""
    import os
    import subprocess
    import sys

    command = sys.argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(__doc__ + "\nusage: scripts/bench/host_memory.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with settled(True, lambda text: print(f"[host_memory] {text}", file=sys.stderr, flush=True)):
        return subprocess.call(command, env={**os.environ, "KAFGRES_MEMORY_SETTLED": "1"})


if __name__ == "__main__":
    raise SystemExit(main())
