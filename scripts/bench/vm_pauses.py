"""How long this machine's CPUs stop while the disk flushes: a virtual machine's host may pause its
vCPUs, and every latency figure measured on it then includes those pauses.

    python3 scripts/bench/vm_pauses.py [--seconds 3] [--directory DIR]

A spinner process reads the monotonic clock in a tight loop; any jump of over 1 ms between two
reads is a time it did not run. With two CPUs and nothing else busy, a jump means the vCPU itself
stopped. It runs twice: alone, then while fio writes 4 KiB blocks with an fdatasync after each (the
flush pattern of fsync-before-ack) in DIR (default .kafgres/bench/pauses, the device the brokers'
logs are on). Prints and returns, for each: the time paused per second, the pauses of 3 ms and
more, the longest, the median interval between those, and the guest's steal time (/proc/stat) over
the same seconds.

Found on the machine this was written on (2 vCPUs, Firecracker kernel 6.18): no pause with the
spinner alone, or with two spinners; with the fdatasync loop next to it, a pause of 10-15 ms every
100 ms, about an eighth of the time. A 100 ms period is what a host's CPU bandwidth limit
(cgroup cpu.max) uses, and the flushes cost the host CPU that the guest does not see. A broker that
fsyncs before each acknowledgement under load stalls the same way, whichever broker it is: these
pauses, not the broker, set the p99 of the fsync end-to-end runs on such a machine (see
docs/benchmarks.md, "The VM pauses under fsync load").
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from runs import steal_seconds

ROOT = Path(__file__).resolve().parents[2]
GAP_S = 0.001  # a clock jump longer than this is a time the spinner did not run
PAUSE_MS = 3.0  # pauses counted one by one (shorter ones are scheduler noise)

# Runs in its own interpreter so that nothing else in this process can hold it up.
SPINNER = """
import json, sys, time
seconds = float(sys.argv[1]); gap = float(sys.argv[2])
t0 = last = time.monotonic(); gaps = []
while last - t0 < seconds:
    now = time.monotonic()
    if now - last > gap:
        gaps.append([last - t0, now - last])
    last = now
print(json.dumps({"seconds": last - t0, "gaps": gaps}))
"""


def spin(seconds: float) -> dict:
    """Spins for `seconds`; the pauses it saw and the steal time over the same span."""
    steal_before = steal_seconds()
    done = subprocess.run([sys.executable, "-c", SPINNER, str(seconds), str(GAP_S)], capture_output=True,
                          text=True, timeout=seconds + 30, check=True)
    steal_after = steal_seconds()
    steal_ms = (steal_after - steal_before) * 1000.0 if steal_before is not None and steal_after is not None else 0.0
    result = json.loads(done.stdout)
    span = result["seconds"]
    gaps = [(at, length * 1000.0) for at, length in result["gaps"]]
    long = [(at, ms) for at, ms in gaps if ms >= PAUSE_MS]
    intervals = [(b[0] - a[0]) * 1000.0 for a, b in zip(long, long[1:])]
    return {
        "seconds": round(span, 3),
        "paused_ms_per_s": round(sum(ms for _, ms in gaps) / span, 2),
        "pauses_3ms": len(long),
        "longest_ms": round(max((ms for _, ms in gaps), default=0.0), 2),
        "median_interval_ms": round(statistics.median(intervals), 1) if intervals else None,
        "steal_ms_per_s": round(steal_ms / span, 2),
    }


def measure(directory: Path, seconds: float) -> dict:
    """The spinner alone, then next to fio's 4 KiB write + fdatasync loop."""
    alone = spin(seconds)
    directory.mkdir(parents=True, exist_ok=True)
    command = ["fio", "--name=pauses-fdatasync-4k", f"--directory={directory}", "--rw=write", "--bs=4k",
               "--size=64M", "--ioengine=sync", "--fdatasync=1", f"--runtime={seconds + 2:.0f}", "--time_based",
               "--output-format=json"]
    fio = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        time.sleep(1.0)  # fio's file laid out and its loop running
        flushing = spin(seconds)
        out, _ = fio.communicate(timeout=seconds + 60)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)
    job = json.loads(out)["jobs"][0]
    flushing["fdatasync_per_s"] = round(job["write"]["iops"], 1)
    return {"alone": alone, "while_fdatasync": flushing, "fio_command": " ".join(command[:-1])}


def describe(result: dict) -> str:
    lines = []
    for name, row in (("spinner alone", result["alone"]), ("next to fdatasync", result["while_fdatasync"])):
        interval = f", every {row['median_interval_ms']:.0f} ms (median)" if row["median_interval_ms"] else ""
        lines.append(f"{name:<18} paused {row['paused_ms_per_s']:.1f} ms/s; {row['pauses_3ms']} pauses of "
                     f"{PAUSE_MS:.0f} ms or more{interval}; longest {row['longest_ms']:.1f} ms; "
                     f"steal {row['steal_ms_per_s']:.1f} ms/s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each spin (default 3)")
    parser.add_argument("--directory", type=Path, default=ROOT / ".kafgres" / "bench" / "pauses",
                        help="where fio writes (removed afterwards)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if not 0.5 <= args.seconds <= 60:
        parser.error("--seconds must be between 0.5 and 60")
    if shutil.which("fio") is None:
        parser.error("needs fio (apt-get install fio)")
    result = measure(args.directory, args.seconds)
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
