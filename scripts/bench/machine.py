"""The machine's own limits, measured in the same run as the brokers.

- disk: fio sequential 1 MiB writes with O_DIRECT (the device's bandwidth)
  and through the page cache with a final fsync (what a broker writing
  buffered sees), and 4 KiB writes each followed by fdatasync (the rate and
  latency of the flush that fsync-before-ack pays per batch), all in a
  directory under .kafgres/bench, on the device both brokers' logs are on;
- loopback: iperf3 over 127.0.0.1, one TCP stream;
- CPU pauses: how long a spinning process stops while a 4 KiB fdatasync loop runs
  (vm_pauses.py: a virtual machine's host may stop its vCPUs, which every
  fsync-before-ack latency then includes);
- the facts a reader needs to compare with their own machine.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

import vm_pauses

IPERF_PORT = 5299


def fio(directory: Path, name: str, *args: str, timeout_s: float = 300) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    command = ["fio", f"--name={name}", f"--directory={directory}", "--output-format=json", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=True)
    return {"command": " ".join(["fio", f"--name={name}", *args]), "job": json.loads(done.stdout)["jobs"][0]}


def disk(directory: Path, quick: bool) -> dict:
    size = "256M" if quick else "2G"
    fsync_seconds = 3 if quick else 10
    try:
        direct = fio(directory, "seqwrite-direct", "--rw=write", "--bs=1M", f"--size={size}", "--ioengine=libaio",
                     "--iodepth=8", "--direct=1")
        buffered = fio(directory, "seqwrite-buffered", "--rw=write", "--bs=1M", f"--size={size}", "--ioengine=psync",
                       "--end_fsync=1")
        synced = fio(directory, "fdatasync-4k", "--rw=write", "--bs=4k", "--size=64M", "--ioengine=sync",
                     "--fdatasync=1", f"--runtime={fsync_seconds}", "--time_based")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    sync_lat = synced["job"]["sync"]["lat_ns"]
    percentiles = sync_lat.get("percentile", {})
    return {
        "seq_write_direct_mb_s": direct["job"]["write"]["bw_bytes"] / 1e6,
        "seq_write_buffered_mb_s": buffered["job"]["write"]["bw_bytes"] / 1e6,
        "fdatasync_per_s": synced["job"]["write"]["iops"],
        "fdatasync_p50_ms": percentiles.get("50.000000", 0) / 1e6,
        "fdatasync_p99_ms": percentiles.get("99.000000", 0) / 1e6,
        "fdatasync_avg_ms": sync_lat["mean"] / 1e6,
        "commands": [direct["command"], buffered["command"], synced["command"]],
    }


def loopback(quick: bool) -> dict:
    seconds = 3 if quick else 10
    server = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(IPERF_PORT), "-1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        command = ["iperf3", "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-t", str(seconds), "-J"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True)
        result = json.loads(done.stdout)
    finally:
        server.kill()
        server.wait(timeout=10)
    return {
        "loopback_mb_s": result["end"]["sum_received"]["bits_per_second"] / 8e6,
        "commands": [" ".join(command)],
    }


def facts() -> dict:
    cpu = ""
    for row in Path("/proc/cpuinfo").read_text().splitlines():
        if row.startswith("model name"):
            cpu = row.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for row in Path("/proc/meminfo").read_text().splitlines():
        if row.startswith("MemTotal:"):
            mem_kb = int(row.split()[1])
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "load_average_at_start": os.getloadavg()[0],
    }


def measure(directory: Path, quick: bool) -> dict:
    out = {**facts(), **disk(directory, quick)}
    net = loopback(quick)
    out["loopback_mb_s"] = net["loopback_mb_s"]
    out["pauses"] = vm_pauses.measure(directory.parent / "pauses", 2.0 if quick else 3.0)
    out["commands"] = out["commands"] + net["commands"] + [out["pauses"]["fio_command"] + " (next to a spinner)"]
    return out
