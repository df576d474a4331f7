"""The pictures of docs/benchmarks.md, as SVG files in docs/.

- bench-latency.svg: the latency distribution of sync sends and of
  end-to-end delivery, both brokers and both durability modes on one chart
  each, as a percentile spectrum: latency (log scale) against the percentile
  on a "nines" axis (50, 90, 99, 99.9...), all rounds' samples pooled. Each
  line is drawn from 200 quantiles, not every sample, so the file stays small.
- bench-throughput.svg: one bar chart per throughput workload, the median
  of the rounds with the spread of the rounds as a line.

matplotlib is imported here only, so the rest of the comparison runs without it.
"""

from __future__ import annotations

import math
from pathlib import Path

from report import MODE_NAMES, median_cell

COLOURS = {"kafka": "#5b6770", "kafgres": "#1f77b4"}
STYLES = {"strict": "-", "relaxed": "--"}
HATCHES = {"strict": "", "relaxed": "//"}
THROUGHPUT = [
    ("produce-100", "records_per_s", "produce 100 B", "records/s"),
    ("produce-1k", "records_per_s", "produce 1 KiB", "records/s"),
    ("produce-256k", "mb_per_s", "produce 256 KiB", "MB/s"),
    ("consume", "mb_per_s", "consume", "MB/s"),
    ("partitions", "records_per_s", "1,000 partitions", "records/s"),
]
NINES_MAX = 4  # up to p99.99


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kafgres-bench"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller files, diffable
    import matplotlib.pyplot as plt

    return plt


def read_samples(path: str) -> list[float]:
    out = []
    try:
        for row in Path(path).read_text().splitlines()[1:]:
            parts = row.split()
            if len(parts) == 2:
                out.append(float(parts[1]))
    except OSError:
        pass
    return out


def spectrum(samples: list[float]) -> tuple[list[float], list[float]]:
    """(nines, latency) at 200 quantiles from p0 to the largest one the samples support."""
    ordered = sorted(samples)
    n = len(ordered)
    top = min(NINES_MAX, math.log10(n)) if n > 1 else 0
    xs, ys = [], []
    for i in range(200):
        nines = top * i / 199
        q = 1 - 10 ** (-nines)
        rank = min(n, max(1, math.ceil(q * n)))
        xs.append(nines)
        ys.append(ordered[rank - 1])
    return xs, ys


def latency_chart(runs: list[dict], modes: list[str], path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, workload, title in [(axes[0], "sync", "sync send (100 B, acks=all)"),
                                (axes[1], "e2e", "end-to-end (1000 records/s)")]:
        for mode in modes:
            for broker in ("kafka", "kafgres"):
                samples: list[float] = []
                for r in runs:
                    if (r["workload"], r["mode"], r["broker"]) == (workload, mode, broker) and r["samples_file"]:
                        samples += read_samples(r["samples_file"])
                if not samples:
                    continue
                xs, ys = spectrum(samples)
                name = "Kafka" if broker == "kafka" else "Kafgres"
                ax.plot(xs, ys, STYLES[mode], color=COLOURS[broker], label=f"{name}, {MODE_NAMES[mode]}")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("percentile")
        ax.set_ylabel("latency, ms (log)")
        ticks = list(range(NINES_MAX + 1))
        ax.set_xticks(ticks, ["0", "90", "99", "99.9", "99.99"][: len(ticks)])
        ax.set_xticks([math.log10(2)], ["50"], minor=True)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def throughput_chart(runs: list[dict], modes: list[str], path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(THROUGHPUT), figsize=(3 * len(THROUGHPUT), 3.8))
    for ax, (workload, field, title, unit) in zip(axes, THROUGHPUT):
        position = 0
        ticks, labels = [], []
        for mode in modes:
            for broker in ("kafka", "kafgres"):
                cell = median_cell(runs, mode, broker, workload, field)
                if cell.value is not None:
                    low, high = min(cell.values), max(cell.values)
                    ax.bar(position, cell.value, color=COLOURS[broker], hatch=HATCHES[mode], edgecolor="white")
                    ax.plot([position, position], [low, high], color="black", linewidth=1)
                ticks.append(position)
                labels.append(("Kafka" if broker == "kafka" else "Kafgres") + ("\nfsync" if mode == "strict" else ""))
                position += 1
            position += 0.5
        ax.set_xticks(ticks, labels, fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("median of the rounds; the line spans the rounds. 'fsync' = fsync per write, else relaxed",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def render(runs: list[dict], modes: list[str], docs: Path) -> list[str]:
    """Draws both charts into `docs`; returns their paths."""
    latency, throughput = docs / "bench-latency.svg", docs / "bench-throughput.svg"
    latency_chart(runs, modes, latency)
    throughput_chart(runs, modes, throughput)
    return [str(latency), str(throughput)]

