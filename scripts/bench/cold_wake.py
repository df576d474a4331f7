#!/usr/bin/env python3
"""What an operation costs on this machine right after its thread wakes.

At 1,000 records/s (the e2e workload) every thread of the client and the
broker sleeps between records, and each record's work runs on a core that
has just woken. This times a few operations back to back and again right
after a sleep of --sleep-ms each time: a no-op call, a getppid(2) system
call, a 170-byte write(2) appending to a file (a record's size in e2e) and
a 64 KiB copy. One line per operation and pacing:

    op=append-170 paced=yes count=3000 p50_us=5.39 p99_us=34.12 max_us=75.14

The ratio of the paced to the back-to-back figures is the machine's, the
same for any broker: on a VM whose vCPUs halt when idle, the caches and
TLBs a thread finds after a sleep are cold.

    scripts/bench/cold_wake.py [--count 3000] [--sleep-ms 1] [--dir .kafgres/tmp]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Callable


def measure(op: Callable[[], object], count: int, sleep_s: float | None) -> list[int]:
    samples = []
    for _ in range(count):
        if sleep_s is not None:
            time.sleep(sleep_s)
        started = time.perf_counter_ns()
        op()
        samples.append(time.perf_counter_ns() - started)
    return sorted(samples)


def quantile_us(sorted_ns: list[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(len(sorted_ns) * q))] / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000, help="operations per line (1-1,000,000)")
    parser.add_argument("--sleep-ms", type=float, default=1.0, help="sleep before each paced operation (0.01-100)")
    parser.add_argument("--dir", type=Path, default=Path(".kafgres/tmp"), help="where the appended file goes")
    args = parser.parse_args()
    if not 1 <= args.count <= 1_000_000 or not 0.01 <= args.sleep_ms <= 100:
        parser.error("--count must be 1-1,000,000 and --sleep-ms 0.01-100")
    args.dir.mkdir(parents=True, exist_ok=True)

    record = b"r" * 170
    block = bytearray(64 << 10)
    with tempfile.TemporaryFile(dir=args.dir) as log:
        fd = log.fileno()

        def append() -> None:
            os.write(fd, record)

        ops: dict[str, Callable[[], object]] = {
            "noop": lambda: None,
            "getppid": os.getppid,
            "append-170": append,
            "copy-64k": lambda: bytes(block),
        }
        for name, op in ops.items():
            for paced in (False, True):
                samples = measure(op, args.count, args.sleep_ms / 1000 if paced else None)
                print(f"op={name} paced={'yes' if paced else 'no'} count={args.count} "
                      f"p50_us={quantile_us(samples, 0.5):.2f} p99_us={quantile_us(samples, 0.99):.2f} "
                      f"max_us={samples[-1] / 1000:.2f}", flush=True)


if __name__ == "__main__":
    main()
