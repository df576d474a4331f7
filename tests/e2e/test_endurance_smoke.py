"""The endurance benchmark's smoke run (issue 24, target 5).

scripts/bench/endurance.py runs for two minutes at a modest, fixed rate against the running
cluster: two paced producer processes, a consumer group of two members and the SQL API
(`kafgres.send` in transactions, `kafgres.consume_text`) together, sampling the broker once a
minute. This test checks what the script checks, correctness only: every record the topic holds
was read by the group without a gap in any partition, as many as were acknowledged, every SQL send
consumed once, no error; one sample per minute with a positive RSS and open-file count; the
script's topics gone afterwards. How flat the series are is the benchmark's figure, printed by the
script, never asserted here (a timed assertion on a shared machine tests the machine). About
2.5 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support import ENV_FILE, REPO_ROOT, Psql

SCRIPT = REPO_ROOT / "scripts/bench/endurance.py"
MINUTES = 2
# Two minutes of run, the group's join and the drain at the end; the script bounds each of its
# own waits, this only stops a script that did not.
TIMEOUT_S = 300


def test_endurance_two_minutes_reads_everything(psql: Psql, tmp_path: Path) -> None:
    out = tmp_path / "endurance"
    command = [sys.executable, str(SCRIPT), "--minutes", str(MINUTES), "--rate", "2000", "--producers", "2",
               "--consumers", "2", "--partitions", "4", "--size", "256", "--sql-txn-per-s", "10",
               "--sql-batch", "5", "--no-chart", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "KAFGRES_ENV_FILE": str(ENV_FILE)})
    output = f"{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    results_path = out / "results.json"
    assert results_path.is_file(), f"no results.json; exit {done.returncode}:\n{output}"
    results = json.loads(results_path.read_text())
    assert "failure" not in results, f"{results['failure']}\n{output}"
    assert done.returncode == 0, output

    check = results["check"]
    assert check["ok"], check["problems"]
    assert check["records_held"] > 0
    assert check["records_read"] == check["records_held"] == check["records_acked"]
    assert check["sql_sent"] > 0 and check["sql_missing"] == 0

    samples = results["samples"]
    assert [s["minute"] for s in samples] == list(range(1, MINUTES + 1))
    for sample in samples:
        assert sample["rss_mb"] > 0 and sample["open_files"] > 0, sample
        assert sample["produced_per_s"] > 0 and sample["read_per_s"] > 0, sample
        assert sample["e2e_p99_ms"] is not None and sample["failed"] == 0, sample
        assert sample["sql_sent"] > 0, sample
    assert {v["series"] for v in results["verdicts"]} == {"rss_mb", "open_files", "e2e_p99_ms", "produced_per_s"}

    topic = results["settings"]["topic"]
    left = psql.value("select count(*) from kafgres.topics where name like :'prefix'", prefix=f"{topic}%")
    assert left == "0", f"the run's topics are still there ({left})"
