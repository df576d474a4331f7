"""The cost to the database's own users: pgbench TPS on the Kafgres cluster,
alone and while Kafgres ingests about 100 MB/s.

pgbench runs its default TPC-B-like script (`pgbench -n -c 4 -j 2 -T S`) in a
database of its own (`kafgres_bench_pgbench`, created and initialised once per
run at scale 10, or 1 with --quick), with the cluster's default
synchronous_commit, so every commit waits for a WAL flush on the same device
as Kafgres's log. The load is one kafgres-bench producer paced at
1,526 records/s of 64 KiB (100 MB/s; large records, so the client's own CPU
cost is small), acks=all, started two seconds before pgbench and running two
seconds past it. Each round measures alone and loaded, in alternating order;
the reported loss is 1 - median(loaded) / median(alone).

A third condition separates Kafgres's cost from the machine's: pgbench while
fio alone writes the same 100 MB/s to the same device, in 64 KiB writes with
an fdatasync every 8 of them (every 512 KiB, about what the broker's group
commit does with this producer: librdkafka's 5 ms linger gathers ~8 records
per request). No network, no broker: what remains is the cost of writing
100 MB/s durably on this machine.

Run alone (`python scripts/bench/pgbench.py --rounds 10 --seconds 15`), it measures only this
part, with more and shorter rounds and each round's losses paired against that round's pgbench
alone: see `_standalone`.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from kafgres_cluster import PG_BIN, KafgresCluster
from runs import parse_line

DATABASE = "kafgres_bench_pgbench"
INGEST_RECORD_BYTES = 65536
INGEST_RATE = 1526  # records/s: 1526 * 65536 B = 100.0 MB/s
LEAD_S = 2
FIO_FSYNC_EVERY = 8  # writes of 64 KiB per fdatasync


def prepare(cluster: KafgresCluster, quick: bool) -> list[str]:
    exists = cluster.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'")
    if not exists:
        cluster.psql(f"CREATE DATABASE {DATABASE}")
    command = [str(PG_BIN / "pgbench"), "-i", "-q", "-s", "1" if quick else "10", DATABASE]
    subprocess.run(command, env=cluster.pg_env(), check=True, capture_output=True, timeout=600)
    return command


def pgbench_command(seconds: int) -> list[str]:
    return [str(PG_BIN / "pgbench"), "-n", "-c", "4", "-j", "2", "-T", str(seconds), DATABASE]


def tps(cluster: KafgresCluster, seconds: int) -> float:
    done = subprocess.run(pgbench_command(seconds), env=cluster.pg_env(), capture_output=True, text=True,
                          timeout=seconds + 120)
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"pgbench failed: {done.stderr.strip()[-300:]}")
    return float(match.group(1))


def ingest_command(binary: str, bootstrap: str, topic: str, seconds: int) -> list[str]:
    return [binary, "produce", "--bootstrap", bootstrap, "--topic", topic, "--create-partitions", "1",
            "--producers", "1", "--size", str(INGEST_RECORD_BYTES), "--rate", str(INGEST_RATE),
            "--seconds", str(seconds + 2 * LEAD_S)]


def tps_beside(cluster: KafgresCluster, writer_command: list[str], seconds: int, stderr) -> tuple[float, str]:
    """pgbench TPS while `writer_command` runs (started LEAD_S before pgbench,
    asked to run LEAD_S past it); also the writer's stdout."""
    writer = subprocess.Popen(writer_command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        time.sleep(LEAD_S)
        result = tps(cluster, seconds)
        stdout, _ = writer.communicate(timeout=seconds + 120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
    return result, stdout


def loaded_tps(cluster: KafgresCluster, binary: str, topic: str, seconds: int, log: Path) -> tuple[float, dict]:
    """pgbench TPS while a paced producer writes to Kafgres; also the producer's result line."""
    with open(log, "w") as err:
        result, stdout = tps_beside(cluster, ingest_command(binary, cluster.bootstrap, topic, seconds), seconds, err)
    lines = [row for row in stdout.splitlines() if "=" in row]
    return result, parse_line(lines[-1]) if lines else {}


def fio_command(directory: Path, seconds: int) -> list[str]:
    """fio writing what the ingest writes: 100 MB/s in 64 KiB writes, fdatasync every 512 KiB."""
    return ["fio", "--name=pgbench-floor", f"--directory={directory}", "--rw=write", f"--bs={INGEST_RECORD_BYTES}",
            "--size=4G", f"--rate={INGEST_RECORD_BYTES * INGEST_RATE}", "--ioengine=psync",
            f"--fdatasync={FIO_FSYNC_EVERY}", f"--runtime={seconds + 2 * LEAD_S}", "--time_based",
            "--output-format=json"]


def fio_loaded_tps(cluster: KafgresCluster, directory: Path, seconds: int) -> tuple[float, float | None]:
    """pgbench TPS while fio writes 100 MB/s to `directory`; also fio's achieved MB/s."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        result, stdout = tps_beside(cluster, fio_command(directory, seconds), seconds, subprocess.DEVNULL)
    finally:
        for leftover in directory.glob("pgbench-floor*"):
            leftover.unlink(missing_ok=True)
    try:
        written = json.loads(stdout)["jobs"][0]["write"]["bw_bytes"] / 1e6
    except (ValueError, KeyError, IndexError):
        written = None
    return result, written


def _standalone() -> int:
    """`pgbench.py [--rounds N] [--seconds S]`: only the pgbench part of `./kafgres bench`, against
    the running `./kafgres start` cluster, with the VM's memory settled, for measuring a change to
    the ingest's cost more tightly than the comparison's few rounds can. Each round runs the three
    conditions in a rotated order and gives two paired losses (Kafgres's ingest and fio's, each
    against that round's pgbench alone); Kafgres's part is their difference, reported per round
    and as the median with its interquartile range."""
    import argparse
    import os
    import statistics
    import sys

    parser = argparse.ArgumentParser(description=_standalone.__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=15, help="pgbench's -T per condition (default 15)")
    parser.add_argument("--bench-bin",
                        default=os.environ.get("KAFGRES_BENCH_BIN", str(_ROOT / "target/release/kafgres-bench")))
    parser.add_argument("--keep-page-reporting", action="store_true", help="leave the VM's free page reporting on")
    parser.add_argument("--keep-awake", action="store_true",
                        help="run a process that wakes every 0.2 ms through all conditions (see KEEP_AWAKE)")
    args = parser.parse_args()
    cluster = KafgresCluster(_ROOT)
    policy = cluster.flush_policy()[0]
    state = _ROOT / ".kafgres/bench/pgbench"
    state.mkdir(parents=True, exist_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    say = lambda text: print(f"[pgbench] {text}", file=sys.stderr, flush=True)  # noqa: E731
    say(f"run {run_id}: {args.rounds} rounds of {args.seconds} s per condition, kafgres.flush_policy = {policy}")
    rows: list[dict[str, float]] = []
    waker = subprocess.Popen(KEEP_AWAKE) if args.keep_awake else None
    if waker is not None:
        say(f"keeping the vCPUs awake through every condition: {' '.join(KEEP_AWAKE)}")
    try:
        measure_rounds(args, cluster, state, run_id, rows, say)
    finally:
        if waker is not None:
            waker.kill()
            waker.wait(10)
    (state / f"{run_id}.json").write_text(json.dumps({"policy": policy, "seconds": args.seconds,
                                                      "keep_awake": args.keep_awake, "rounds": rows}, indent=1))

    def spread(key: str) -> str:
        values = sorted(r[key] * 100 for r in rows)
        if len(values) < 4:
            return f"{statistics.median(values):+.1f}"
        q1, _, q3 = statistics.quantiles(values, n=4)
        return f"{statistics.median(values):+.1f} (interquartile {q1:+.1f} to {q3:+.1f})"

    alone = statistics.median(r["alone"] for r in rows)
    print(f"pgbench alone: median {alone:.0f} TPS over {len(rows)} rounds of {args.seconds} s"
          f"{' (vCPUs kept awake)' if args.keep_awake else ''}")
    print(f"loss while Kafgres ingests 100 MB/s, points: {spread('kafgres_loss')}")
    print(f"loss while fio writes the same, points:      {spread('fio_loss')}")
    print(f"Kafgres's part (the difference), points:     {spread('part')}")
    print(f"results: {state / (run_id + '.json')}")
    return 0


def measure_rounds(args, cluster: KafgresCluster, state: Path, run_id: str, rows: list[dict[str, float]],
                   say) -> None:
    """The rounds of `_standalone`, each appended to `rows` as it ends."""
    import os

    import host_memory

    with host_memory.settled(not args.keep_page_reporting, say):
        prepare(cluster, quick=False)
        for round_index in range(1, args.rounds + 1):
            conditions = ["alone", "kafgres", "fio"]
            shift = (round_index - 1) % len(conditions)
            row: dict[str, float] = {}
            for condition in conditions[shift:] + conditions[:shift]:
                os.sync()
                if condition == "alone":
                    row["alone"] = tps(cluster, args.seconds)
                elif condition == "fio":
                    row["fio"], _ = fio_loaded_tps(cluster, state / "fio", args.seconds)
                else:
                    topic = f"pgbench-{run_id}-r{round_index}"
                    try:
                        row["kafgres"], fields = loaded_tps(cluster, args.bench_bin, topic, args.seconds,
                                                            state / f"{run_id}-r{round_index}-ingest.log")
                    finally:
                        subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", cluster.bootstrap, topic],
                                       capture_output=True, timeout=120)
                    if fields.get("errors") not in (0, 0.0):
                        say(f"round {round_index}: the ingest reported errors: {fields}")
            row["kafgres_loss"] = 1 - row["kafgres"] / row["alone"]
            row["fio_loss"] = 1 - row["fio"] / row["alone"]
            row["part"] = row["kafgres_loss"] - row["fio_loss"]
            rows.append(row)
            say(f"round {round_index}: alone {row['alone']:.0f}, Kafgres ingesting {row['kafgres']:.0f} "
                f"({row['kafgres_loss']:.1%}), fio writing {row['fio']:.0f} ({row['fio_loss']:.1%}): "
                f"Kafgres's part {row['part'] * 100:+.1f} points")


_ROOT = Path(__file__).resolve().parents[2]
# A process that wakes every 0.2 ms and does nothing else (a few % of one core). Measured on
# this VM, it alone raised pgbench's TPS by 8-15% (8,380 -> 9,411, 9,117 -> 10,524, 9,043 ->
# 9,742): an idle vCPU is slow to wake, and pgbench's backends sleep on every WAL flush, so any
# load that keeps the vCPUs busy -- fio's writes or Kafgres's ingest too -- speeds pgbench up
# and hides its own cost. With this process running through every condition, the losses
# compare like with like.
KEEP_AWAKE = ["perl", "-e", "select(undef, undef, undef, 0.0002) while 1"]

if __name__ == "__main__":
    raise SystemExit(_standalone())
