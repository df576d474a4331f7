"""What the Prometheus endpoint costs produce throughput (issue 21's figure).

    scripts/bench/metrics_bench.py [--rounds 3] [--seconds 15] [--interval 1] [--partitions 1000]

On the cluster of `./kafgres start` (its endpoint at KAFGRES_METRICS_URL): a topic of
--partitions partitions makes each scrape walk that many logs, then rounds of a 1 KiB
kafgres-bench producer (one producer process, acks=all) alternate between no scraper and a
scraper that GETs /metrics every --interval seconds (Prometheus scrapes every 15 s by default;
1 s is fifteen times that load). Prints each round, the medians, their ratio, and a scrape's
size and time. The per-request counters behind the endpoint are always on, so what this
measures is the scrapes' cost. The measured topic keeps 1 GiB (retention.bytes), so the
rounds do not fill the disk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafgres_cluster import KafgresCluster, run_bench as bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Scraper(threading.Thread):
    """GETs the endpoint every `interval` seconds until stopped; keeps each scrape's time and size."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stopped = threading.Event()
        self.scrapes: list[tuple[float, int]] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            started = time.monotonic()
            with urllib.request.urlopen(self.url, timeout=10) as response:
                size = len(response.read())
            self.scrapes.append((time.monotonic() - started, size))
            self.stopped.wait(max(0.0, self.interval - (time.monotonic() - started)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    cluster = KafgresCluster(ROOT)
    url = cluster.env.get("KAFGRES_METRICS_URL")
    if not url:
        print("KAFGRES_METRICS_URL is not in the env file: run ./kafgres start", file=sys.stderr)
        return 2
    tag = uuid.uuid4().hex[:8]
    topic, weight = f"metrics-bench-{tag}", f"metrics-bench-weight-{tag}"
    bench(args.bench_bin, "produce", "--bootstrap", cluster.bootstrap, "--topic", weight, "--create-partitions",
          str(args.partitions), "--size", "100", "--count", str(args.partitions), timeout_s=300)
    produce = ["produce", "--bootstrap", cluster.bootstrap, "--topic", topic, "--size", "1024", "--producers", "1",
               "--seconds", str(args.seconds)]
    results: dict[str, list[float]] = {"off": [], "on": []}
    scrapes: list[tuple[float, int]] = []
    try:
        # Retention bounds the disk the rounds take (hundreds of MB/s for minutes otherwise).
        bench(args.bench_bin, *produce[:5], "--create-partitions", "1", "--topic-config", "segment.bytes=67108864",
              "--topic-config", "retention.bytes=1073741824", "--size", "1024", "--count", "1000", timeout_s=120)
        for round_no in range(args.rounds):
            for mode in ("off", "on"):
                scraper = Scraper(url, args.interval) if mode == "on" else None
                if scraper:
                    scraper.start()
                try:
                    measured = bench(args.bench_bin, *produce, timeout_s=args.seconds * 4 + 60)
                finally:
                    if scraper:
                        scraper.stopped.set()
                        scraper.join(15)
                        scrapes += scraper.scrapes
                rate = float(measured["records_per_s"])
                results[mode].append(rate)
                print(f"round {round_no + 1} scrapes {mode:>3}: {rate:,.0f} records/s", flush=True)
    finally:
        subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", cluster.bootstrap, topic, weight],
                       capture_output=True, timeout=60)
    off, on = statistics.median(results["off"]), statistics.median(results["on"])
    print(f"median without scrapes {off:,.0f} records/s, with a scrape every {args.interval:g} s {on:,.0f} "
          f"records/s: {on / off:.3f} x ({(1 - on / off) * 100:+.1f}% cost)")
    paired = statistics.median(on_rate / off_rate for off_rate, on_rate in zip(results["off"], results["on"]))
    print(f"median of the rounds' own ratios (each 'on' against the 'off' just before it): {paired:.3f} x")
    if scrapes:
        times = sorted(t for t, _ in scrapes)
        print(f"{len(scrapes)} scrapes of {statistics.median(s for _, s in scrapes) / 1024:.0f} KiB "
              f"({args.partitions + 1} partitions): median {statistics.median(times) * 1000:.1f} ms, "
              f"max {times[-1] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
