"""Running one kafgres-bench command against one broker, and what it cost.

A run is one kafgres-bench invocation. While it runs, a sampler thread reads
the broker process's /proc entry every 100 ms for its resident set (peak
VmRSS, and RssAnon) and the broker's CPU time (user + system, all threads) is
read before and after; the client's own CPU time comes from the kernel's
accounting of reaped children. The result line is parsed into a dict of
numbers (the `ms` suffix dropped) and kept verbatim as well.
"""

from __future__ import annotations

import os
import resource
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLE_INTERVAL_S = 0.1


def parse_line(line: str) -> dict[str, float | str]:
    """`key=value ...` into a dict; numbers (with an optional `ms` unit) as floats."""
    fields: dict[str, float | str] = {}
    for pair in line.split():
        key, sep, value = pair.partition("=")
        if not sep:
            continue
        text = value[:-2] if value.endswith("ms") else value
        try:
            fields[key] = float(text)
        except ValueError:
            fields[key] = value
    return fields


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: split after it.
    after_name = stat.rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / CLOCK_TICKS_PER_S


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem of a process in KiB (empty if it is gone)."""
    out: dict[str, int] = {}
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = row.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


class MemorySampler:
    """Peak memory of a process, sampled on a thread until stopped."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "MemorySampler":
        if self.pid is not None:
            self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(SAMPLE_INTERVAL_S)
        self._take()

    def _take(self) -> None:
        if self.pid is None:
            return
        for key, kb in memory_kb(self.pid).items():
            self.peak[key] = max(self.peak.get(key, 0), kb)


@dataclass
class Broker:
    """One side of the comparison: a name, where clients connect, and how to
    find the broker's process (it may change when Postgres restarts)."""

    name: str
    bootstrap: str
    find_pid: Callable[[], int | None]
    # The directory holding the broker's partition directories, if known.
    find_data_dir: Callable[[], Path | None] = lambda: None


@dataclass
class Run:
    """One kafgres-bench invocation and what it cost the broker and the client."""

    workload: str
    broker: str
    mode: str
    round: int
    command: list[str]
    returncode: int
    line: str
    fields: dict[str, float | str]
    wall_s: float
    broker_cpu_s: float | None
    client_cpu_s: float
    broker_memory_peak_kb: dict[str, int]
    samples_file: str | None = None
    stderr_tail: str = ""
    # The guest's steal time over the run, all vCPUs together: time a virtual machine's host
    # did not run a vCPU that had work (a pause every latency includes; vm_pauses.py).
    steal_s: float | None = None

    @property
    def ok(self) -> bool:
        return bool(self.line) and self.fields.get("errors", 0) == 0

    def command_text(self) -> str:
        return shlex.join(self.command)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def steal_seconds() -> float | None:
    """The machine's steal time so far (/proc/stat, all CPUs), or None where there is none."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run_bench(
    command: list[str],
    *,
    workload: str,
    broker: Broker,
    mode: str,
    round_index: int,
    timeout_s: float,
    log_path: Path,
    samples_file: str | None = None,
) -> Run:
    """Runs one kafgres-bench command (bounded by `timeout_s`), its stderr going to
    `log_path`, sampling the broker meanwhile."""
    pid = broker.find_pid()
    cpu_before = cpu_seconds(pid) if pid else None
    client_before = children_cpu_s()
    steal_before = steal_seconds()
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with MemorySampler(pid) as sampler, open(log_path, "w") as err:
        err.write(f"$ {shlex.join(command)}\n")
        err.flush()
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout_s)
            returncode, stdout = done.returncode, done.stdout
        except subprocess.TimeoutExpired as expired:
            returncode = -9
            stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
            err.write(f"\nbench-compare: killed after {timeout_s:.0f} s\n")
    wall_s = time.monotonic() - started
    steal_after = steal_seconds()
    cpu_after = cpu_seconds(pid) if pid else None
    broker_cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    lines = [row for row in stdout.splitlines() if "=" in row]
    line = lines[-1] if lines else ""
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-5:])
    return Run(
        workload=workload,
        broker=broker.name,
        mode=mode,
        round=round_index,
        command=command,
        returncode=returncode,
        line=line,
        fields=parse_line(line),
        wall_s=wall_s,
        broker_cpu_s=broker_cpu,
        client_cpu_s=children_cpu_s() - client_before,
        broker_memory_peak_kb=dict(sampler.peak),
        samples_file=samples_file,
        stderr_tail=tail,
        steal_s=steal_after - steal_before if steal_before is not None and steal_after is not None else None,
    )
