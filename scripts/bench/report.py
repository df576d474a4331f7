"""From the runs to the figures: medians, the issue's targets, the markdown
block of docs/benchmarks.md, and the text printed at the end.

Every figure is the median over rounds of one metric of one workload on one
broker in one durability mode. A cell is marked `†` when a round of it
reported errors or did not produce a line (the value is then the median of
the rounds that did). Ratios are always Kafgres / Kafka.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

BEGIN_PREFIX = "<!-- bench-compare:begin"
BEGIN = "<!-- bench-compare:begin: written by scripts/bench-compare.sh, a rerun replaces up to the end marker -->"
END = "<!-- bench-compare:end -->"
BROKERS = ("kafka", "kafgres")
BROKER_NAMES = {"kafka": "Kafka", "kafgres": "Kafgres"}
MODE_NAMES = {"strict": "fsync per write", "relaxed": "fsync relaxed"}

# (workload, field, label, unit, higher is better)
METRICS = [
    ("sync", "p50", "sync send p50", "ms", False),
    ("sync", "p99", "sync send p99", "ms", False),
    ("produce-100", "records_per_s", "produce 100 B", "records/s", True),
    ("produce-1k", "records_per_s", "produce 1 KiB", "records/s", True),
    ("produce-1k", "mb_per_s", "produce 1 KiB", "MB/s", True),
    ("produce-256k", "mb_per_s", "produce 256 KiB", "MB/s", True),
    ("consume", "mb_per_s", "consume (1 KiB records)", "MB/s", True),
    ("e2e", "p50", "end-to-end p50 (1000/s)", "ms", False),
    ("e2e", "p99", "end-to-end p99 (1000/s)", "ms", False),
    ("e2e", "p999", "end-to-end p99.9 (1000/s)", "ms", False),
    ("partitions", "records_per_s", "1,000 partitions × 200 producers", "records/s", True),
    ("bare-sync", "p50", "sync send p50, no client library ‡", "ms", False),
    ("bare-e2e", "p50", "end-to-end p50, no client library ‡", "ms", False),
    ("bare-e2e", "p99", "end-to-end p99, no client library ‡", "ms", False),
]


@dataclass
class Cell:
    value: float | None
    values: list[float]
    flagged: bool


def median_cell(runs: list[dict], mode: str, broker: str, workload: str, field: str) -> Cell:
    chosen = [r for r in runs if r["mode"] == mode and r["broker"] == broker and r["workload"] == workload]
    values = [float(r["fields"][field]) for r in chosen
              if isinstance(r["fields"].get(field), float) and r["fields"][field] == r["fields"][field]]
    flagged = any(not r["line"] or r["fields"].get("errors", 0) != 0 for r in chosen)
    return Cell(statistics.median(values) if values else None, values, flagged)


def peak_rss_mb(runs: list[dict], mode: str, broker: str) -> Cell:
    """Per round, the broker's peak VmRSS over all its runs; the median over rounds."""
    by_round: dict[int, int] = {}
    for r in runs:
        if r["mode"] == mode and r["broker"] == broker and r["broker_memory_peak_kb"].get("VmRSS"):
            by_round[r["round"]] = max(by_round.get(r["round"], 0), r["broker_memory_peak_kb"]["VmRSS"])
    values = [kb / 1024 for kb in by_round.values()]
    return Cell(statistics.median(values) if values else None, values, False)


def cpu_cell(runs: list[dict], mode: str, broker: str, workload: str, key: str) -> Cell:
    chosen = [r[key] for r in runs if r["mode"] == mode and r["broker"] == broker and r["workload"] == workload
              and r[key] is not None]
    return Cell(statistics.median(chosen) if chosen else None, chosen, False)


def ratio(kafgres: float | None, kafka: float | None) -> float | None:
    if kafgres is None or kafka in (None, 0):
        return None
    return kafgres / kafka


def fmt(value: float | str | None, digits: int | None = None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str) or value != value:
        return str(value)
    if digits is not None:
        return f"{value:,.{digits}f}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell_text(cell: Cell) -> str:
    return fmt(cell.value) + (" †" if cell.flagged else "")


@dataclass
class Target:
    label: str
    kafgres: float | None
    reference: float | None
    reference_label: str
    achieved: float | None
    goal: str
    met: bool | None


def targets(results: dict) -> list[Target]:
    runs = results["runs"]
    machine = results.get("machine", {})
    out: list[Target] = []

    def relaxed(workload: str, field: str) -> tuple[float | None, float | None]:
        return (median_cell(runs, "relaxed", "kafgres", workload, field).value,
                median_cell(runs, "relaxed", "kafka", workload, field).value)

    def at_least(value: float | None, goal: float) -> bool | None:
        return None if value is None else value >= goal

    def at_most(value: float | None, goal: float) -> bool | None:
        return None if value is None else value <= goal

    for workload, field, label, goal in [
        ("produce-1k", "records_per_s", "produce 1 KiB records/s", 1.3),
        ("produce-100", "records_per_s", "produce 100 B records/s", 1.5),
        ("produce-256k", "mb_per_s", "produce 256 KiB MB/s", 1.0),
        ("consume", "mb_per_s", "consume MB/s", 1.2),
    ]:
        g, k = relaxed(workload, field)
        r = ratio(g, k)
        out.append(Target(label, g, k, "Kafka", r, f"≥ {goal}× Kafka", at_least(r, goal)))
    g, _ = relaxed("produce-256k", "mb_per_s")
    limits = [v for v in (machine.get("seq_write_direct_mb_s"), machine.get("loopback_mb_s")) if v]
    limit = min(limits) if limits else None
    share = ratio(g, limit)
    out.append(Target("produce 256 KiB MB/s vs the machine", g, limit, "min(disk, loopback)", share,
                      "≥ 0.8× the lower limit", at_least(share, 0.8)))
    for workload, field, label in [("sync", "p50", "sync send p50 ms"), ("e2e", "p99", "end-to-end p99 ms")]:
        g, k = relaxed(workload, field)
        r = ratio(g, k)
        out.append(Target(label, g, k, "Kafka", r, "≤ 0.5× Kafka", at_most(r, 0.5)))
    g = peak_rss_mb(runs, "relaxed", "kafgres").value
    k = peak_rss_mb(runs, "relaxed", "kafka").value
    r = ratio(g, k)
    out.append(Target("broker peak RSS MB", g, k, "Kafka", r, "≤ 0.25× Kafka", at_most(r, 0.25)))
    g = median_cell(runs, "strict", "kafgres", "sync", "p50").value
    fsync_p50 = machine.get("fdatasync_p50_ms")
    bound = fsync_p50 + 0.2 if fsync_p50 is not None else None
    out.append(Target("sync send p50 ms, fsync before ack", g, bound, "fdatasync p50 + 0.2 ms",
                      ratio(g, bound), "≤ fdatasync p50 + 0.2 ms",
                      None if g is None or bound is None else g <= bound))
    pg = results.get("pgbench") or {}
    alone, loaded = pg.get("alone") or [], pg.get("loaded") or []
    if alone and loaded:
        a, l = statistics.median(alone), statistics.median(loaded)
        loss = 1 - l / a if a else None
        out.append(Target("pgbench TPS while ingesting 100 MB/s", l, a, "pgbench alone", loss,
                          "loss ≤ 5%", at_most(loss, 0.05)))
    else:
        out.append(Target("pgbench TPS while ingesting 100 MB/s", None, None, "pgbench alone", None,
                          "loss ≤ 5%", None))
    return out


def durable_targets(results: dict) -> list[Target]:
    """Issue 24's first targets: Kafgres with an fdatasync before every ack
    (`flush_policy = fsync`, the strict mode) against its own `page_cache`
    figure of the same run, and its sync send against the disk's fdatasync."""
    runs = results["runs"]
    out: list[Target] = []
    for workload, field, label in [
        ("produce-1k", "records_per_s", "produce 1 KiB records/s"),
        ("produce-1k-4p", "records_per_s", "produce 1 KiB records/s, 4 producers"),
        ("produce-256k", "mb_per_s", "produce 256 KiB MB/s"),
        ("produce-256k-4p", "mb_per_s", "produce 256 KiB MB/s, 4 producers"),
    ]:
        durable = median_cell(runs, "strict", "kafgres", workload, field).value
        relaxed = median_cell(runs, "relaxed", "kafgres", workload, field).value
        r = ratio(durable, relaxed)
        out.append(Target(label, durable, relaxed, "Kafgres page_cache", r, "≥ 0.9× page_cache",
                          None if r is None else r >= 0.9))
    g = median_cell(runs, "strict", "kafgres", "sync", "p50").value
    fsync_p50 = results.get("machine", {}).get("fdatasync_p50_ms")
    bound = fsync_p50 + 0.1 if fsync_p50 is not None else None
    out.append(Target("sync send p50 ms, fsync before ack", g, bound, "fdatasync p50 + 0.1 ms",
                      ratio(g, bound), "≤ fdatasync p50 + 0.1 ms",
                      None if g is None or bound is None else g <= bound))
    return out


def met_text(met: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[met]


def targets_markdown(items: list[Target]) -> list[str]:
    rows = ["| target | Kafgres | reference | Kafgres / reference | goal | |", "|---|---:|---:|---:|---|---|"]
    for t in items:
        achieved = (f"{t.achieved:.1%} loss" if t.label.startswith("pgbench") and t.achieved is not None
                    else fmt(t.achieved, 2) + ("×" if t.achieved is not None else ""))
        rows.append(f"| {t.label} | {fmt(t.kafgres)} | {fmt(t.reference)} ({t.reference_label}) | {achieved} "
                    f"| {t.goal} | {met_text(t.met)} |")
    return rows


def targets_text(items: list[Target]) -> str:
    rows = [("target", "Kafgres", "reference", "Kafgres/ref", "goal", "")]
    for t in items:
        achieved = "–" if t.achieved is None else (
            f"loss {t.achieved:.1%}" if t.label.startswith("pgbench") else f"{t.achieved:.2f}x")
        rows.append((t.label, fmt(t.kafgres), f"{fmt(t.reference)} ({t.reference_label})", achieved, t.goal,
                     met_text(t.met).strip("*")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def results_markdown(runs: list[dict], modes: list[str]) -> list[str]:
    header = "| workload | unit |"
    rule = "|---|---|"
    for mode in modes:
        header += f" Kafka, {MODE_NAMES[mode]} | Kafgres, {MODE_NAMES[mode]} | Kafgres / Kafka |"
        rule += "---:|---:|---:|"
    rows = [header, rule]
    for workload, field, label, unit, _ in METRICS:
        row = f"| {label} | {unit} |"
        for mode in modes:
            k = median_cell(runs, mode, "kafka", workload, field)
            g = median_cell(runs, mode, "kafgres", workload, field)
            r = ratio(g.value, k.value)
            row += f" {cell_text(k)} | {cell_text(g)} | {fmt(r) + '×' if r is not None else '–'} |"
        rows.append(row)
    return rows


def resources_markdown(results: dict, modes: list[str], workload_keys: list[str]) -> list[str]:
    runs = results["runs"]
    header = "| | " + " | ".join(f"Kafka, {MODE_NAMES[m]} | Kafgres, {MODE_NAMES[m]}" for m in modes) + " |"
    rows = [header, "|---|" + "---:|" * (2 * len(modes))]
    idle = results.get("idle_rss_kb", {})
    row = "| RSS after start, MB |"
    for mode in modes:
        for broker in BROKERS:
            kb = idle.get(f"{mode}/{broker}")
            row += f" {fmt(kb / 1024 if kb else None)} |"
    rows.append(row)
    row = "| peak RSS over the run, MB |"
    for mode in modes:
        for broker in BROKERS:
            row += f" {fmt(peak_rss_mb(runs, mode, broker).value)} |"
    rows.append(row)
    for key, what in (("broker_cpu_s", "broker CPU s"), ("client_cpu_s", "client CPU s")):
        for workload in workload_keys:
            row = f"| {what}, {workload} |"
            for mode in modes:
                for broker in BROKERS:
                    row += f" {fmt(cpu_cell(runs, mode, broker, workload, key).value)} |"
            rows.append(row)
    return rows


def memory_markdown(memory: dict) -> list[str]:
    """How the run found and left the VM's memory (host_memory.py)."""
    if not memory or memory.get("page_reporting", "absent") == "absent":
        return ["Memory: no free page reporting on this machine; nothing settled."]
    if not memory.get("settled"):
        return [f"Memory: free page reporting left on ({memory['page_reporting']}): every page the page cache "
                "takes costs a host fault, for both brokers."]
    return [f"Memory: free page reporting ({memory['page_reporting']}) off for the run and {memory['touched_gib']} "
            f"GiB of free memory touched first: {fmt(memory['first_touch_us_per_page'], 2)} µs per 4 KiB page "
            f"with the host's faults, {fmt(memory['backed_touch_us_per_page'], 2)} µs once backed "
            "(scripts/bench/host_memory.py)."]


def machine_markdown(machine: dict) -> list[str]:
    if not machine:
        return ["Not measured (--skip-machine)."]
    return [
        "| limit | value |",
        "|---|---:|",
        f"| disk sequential write, 1 MiB O_DIRECT, iodepth 8 | {fmt(machine['seq_write_direct_mb_s'])} MB/s |",
        f"| disk sequential write, 1 MiB buffered + final fsync | {fmt(machine['seq_write_buffered_mb_s'])} MB/s |",
        f"| 4 KiB write + fdatasync | {fmt(machine['fdatasync_per_s'])} /s, p50 {fmt(machine['fdatasync_p50_ms'])} ms, "
        f"p99 {fmt(machine['fdatasync_p99_ms'])} ms |",
        f"| loopback TCP (iperf3, 1 stream) | {fmt(machine['loopback_mb_s'])} MB/s |",
        *pauses_rows(machine.get("pauses")),
    ]


def pauses_rows(pauses: dict | None) -> list[str]:
    """The vm_pauses.py row: a VM whose host stops its vCPUs while the disk flushes."""
    if not pauses:
        return []
    alone, flushing = pauses["alone"], pauses["while_fdatasync"]
    every = f", every {fmt(flushing['median_interval_ms'])} ms" if flushing.get("median_interval_ms") else ""
    return [f"| CPU paused next to a 4 KiB fdatasync loop (vm_pauses.py) | {fmt(flushing['paused_ms_per_s'], 1)} ms/s, "
            f"{flushing['pauses_3ms']} pauses of 3 ms+{every}, longest {fmt(flushing['longest_ms'])} ms "
            f"(alone: {fmt(alone['paused_ms_per_s'], 1)} ms/s) |"]


def pgbench_markdown(pg: dict) -> list[str]:
    if not pg or not pg.get("alone"):
        return ["Not measured (--skip-pgbench, or it failed: see the run's log)."]
    alone, loaded = statistics.median(pg["alone"]), statistics.median(pg["loaded"])
    ingest = [f.get("mb_per_s") for f in pg.get("ingest", []) if isinstance(f.get("mb_per_s"), float)]
    out = [
        "| | TPS (median) | rounds |",
        "|---|---:|---|",
        f"| pgbench alone | {fmt(alone)} | {', '.join(fmt(v) for v in pg['alone'])} |",
        f"| pgbench while Kafgres ingests | {fmt(loaded)} | {', '.join(fmt(v) for v in pg['loaded'])} |",
    ]
    floor = pg.get("fio_loaded") or []
    if floor:
        out.append(f"| pgbench while fio writes the same 100 MB/s | {fmt(statistics.median(floor))} | "
                   f"{', '.join(fmt(v) for v in floor)} |")
    out += [
        "",
        f"Loaded / alone: **{loaded / alone:.3f}** (loss {1 - loaded / alone:.1%}); the producer achieved "
        f"{', '.join(fmt(v) for v in ingest) or '–'} MB/s (acks=all, `kafgres.flush_policy = fsync`).",
    ]
    if floor:
        fio_tps = statistics.median(floor)
        written = [v for v in pg.get("fio_mb_per_s", []) if isinstance(v, float)]
        beyond = 1 - loaded / fio_tps
        beyond_text = (f"Kafgres's ingest beyond that: {beyond:.1%} of the TPS pgbench keeps next to fio."
                       if beyond > 0 else
                       f"Kafgres's ingest cost pgbench no more than that: it kept {-beyond:.1%} more TPS next to "
                       "Kafgres than next to fio (within the rounds' spread).")
        out += [
            "",
            f"The machine's own cost of those writes, fio alone writing 100 MB/s to the same device in 64 KiB "
            f"writes with an fdatasync every 512 KiB (fio achieved {', '.join(fmt(v) for v in written) or '–'} "
            f"MB/s): loss **{1 - fio_tps / alone:.1%}**. {beyond_text}",
        ]
    return out


def commands_markdown(results: dict) -> list[str]:
    def shown_text(command: str) -> str:
        return command.replace(results["bench_bin"], "kafgres-bench").replace(results["root"] + "/", "")

    out = ["```sh"]
    out += results["invocation"]
    out += ["", "# machine limits"] + results.get("machine", {}).get("commands", [])
    shown: set[tuple[str, str, str]] = set()
    for r in results["runs"]:
        key = (r["mode"], r["broker"], r["workload"])
        if r["round"] != 1 or key in shown:
            continue
        shown.add(key)
        out.append(f"# {r['mode']}, {r['broker']}, {r['workload']}")
        out.append(shown_text(" ".join(r["command"])))
    pg = results.get("pgbench") or {}
    if pg.get("commands"):
        out += ["", "# pgbench (Kafgres's cluster)"] + [shown_text(c) for c in pg["commands"]]
    out.append("```")
    return out


def markdown(results: dict, charts: list[str]) -> str:
    modes = results["modes"]
    workload_keys = results["workloads"]
    v = results["versions"]
    m = results.get("machine", {})
    quick = " **Quick smoke run (short durations): not reference figures.**" if results["quick"] else ""
    lines = [
        BEGIN,
        "",
        f"## Side by side with Apache Kafka ({results['started_at'][:10]})",
        "",
        f"Run `{results['run_id']}` of `scripts/bench-compare.sh` ({results['rounds']} round(s), median "
        f"reported, brokers alternating per workload).{quick} Kafka {v.get('kafka', '?')} (single-node KRaft, "
        f"Maven Central jars, 1 GiB heap, 127.0.0.1:{results['kafka_port']}); Kafgres {v.get('kafgres', '?')} "
        f"at commit `{v.get('commit', '?')}` in PostgreSQL {v.get('postgres', '?')}; kafgres-bench with "
        f"librdkafka {v.get('librdkafka', '?')}. Machine: {m.get('cores', '?')} cores ({m.get('cpu', '?')}), "
        f"{m.get('memory_gb', '?')} GB, Linux {m.get('kernel', '?')}, load average "
        f"{fmt(m.get('load_average_at_start'))} at the start; both logs and the client on one machine and "
        "one device.",
        "",
        "*fsync per write*: Kafka with topic config `flush.messages=1`, Kafgres with its default "
        "`kafgres.flush_policy = fsync` (fdatasync before the ack). *fsync relaxed*: Kafka's defaults, "
        "Kafgres with `kafgres.flush_policy = page_cache`. † = a round of that cell had errors. "
        "‡ = `kafgres-bench bare`: the same requests from one blocking connection and thread per side "
        "instead of librdkafka, so the broker and loopback without the client library's thread hand-offs "
        "(a diagnostic, not one of the issue's workloads).",
        "",
        "### Targets of issue 7 (fsync relaxed unless said)",
        "",
        *targets_markdown(targets(results)),
        "",
        "### Targets of issue 24: durable at relaxed speed (Kafgres fsync / Kafgres page_cache)",
        "",
        *targets_markdown(durable_targets(results)),
        "",
        "### Results",
        "",
        *results_markdown(results["runs"], modes),
        "",
        *[f"![{Path(c).stem}]({Path(c).name})" for c in charts],
        "",
        "### Broker resources",
        "",
        "RSS is VmRSS of the broker process (Kafka: the JVM; Kafgres: the `kafgres broker` background worker, "
        "which counts the Postgres shared memory it has touched), sampled every 100 ms. CPU is user + system "
        "time during each run (median over rounds); client CPU is kafgres-bench's.",
        "",
        *resources_markdown(results, modes, workload_keys),
        "",
        "### Machine limits (same run)",
        "",
        *machine_markdown(m),
        "",
        *memory_markdown(results.get("machine_memory") or {}),
        "",
        "### pgbench on the Kafgres cluster",
        "",
        *pgbench_markdown(results.get("pgbench") or {}),
        "",
        "### Exact commands (round 1)",
        "",
        "<details><summary>the comparison, the machine limits and every kafgres-bench invocation</summary>",
        "",
        *commands_markdown(results),
        "",
        "</details>",
        "",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_docs(path: Path, block: str) -> None:
    """Replaces the marked block of `path`, or appends it when there is none."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    begin, end = text.find(BEGIN_PREFIX), text.find(END)
    if begin >= 0 and end > begin:
        rest = text[end + len(END):]
        text = text[:begin] + block + rest.removeprefix("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)
