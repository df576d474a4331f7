"""The chart of an endurance run (scripts/bench/endurance.py), as an SVG file.

    .kafgres/bench/venv/bin/python scripts/bench/endurance_chart.py results.json docs/bench-endurance.svg

One panel per series sampled each minute: the broker's RSS, its open files, end-to-end p50 and
p99, records produced and read per second, and the group's lag. The grey span is the warm-up the
verdict leaves out; the band is the reference (the mean of the first samples after it) plus or
minus 5%, the flatness the issue asks for. Run by endurance.py in the bench venv, which has
matplotlib (the e2e venv that runs the benchmark itself has not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PANELS = [  # keys drawn, title, unit
    (["rss_mb"], "broker RSS", "MB"),
    (["open_files"], "broker open files", "files"),
    (["e2e_p50_ms", "e2e_p99_ms"], "end-to-end latency (from the scheduled send)", "ms"),
    (["produced_per_s", "read_per_s"], "throughput", "records/s"),
    (["lag"], "consumer group lag", "records"),
]
FLAT_LIMIT = 0.05


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kafgres-bench"
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    return plt


def render(results: dict, path: Path) -> None:
    plt = _pyplot()
    samples = results["samples"]
    verdicts = {v["series"]: v for v in results.get("verdicts", [])}
    minutes = [s["minute"] for s in samples]
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(9, 2.2 * len(PANELS)), sharex=True)
    for ax, (keys, title, unit) in zip(axes, PANELS):
        for key in keys:
            ax.plot(minutes, [s.get(key) for s in samples], marker=".", label=key)
            verdict = verdicts.get(key)
            if verdict and verdict.get("reference") is not None:
                reference = verdict["reference"]
                ax.axhspan(reference * (1 - FLAT_LIMIT), reference * (1 + FLAT_LIMIT), alpha=0.15)
                warmup = verdict["after_sample"]
                if warmup:
                    ax.axvspan(0.5, warmup + 0.5, color="grey", alpha=0.15)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    axes[-1].set_xlabel("minute")
    rate = results.get("rate")
    fig.suptitle(f"endurance: {len(samples)} min at {rate:,.0f} records/s; band: first samples after the "
                 f"warm-up (grey) ±5%", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    render(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
