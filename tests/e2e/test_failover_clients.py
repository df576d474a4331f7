"""The Java client and franz-go carry on across failovers to a synchronous standby (issue 19).

Two throwaway clusters on 127.0.0.1 (Postgres 5483/5484, Kafka 9483/9484, so
that this never collides with test_failover.py's) take turns as primary and
synchronous hot standby, as in test_failover.py. Two client programs run as
subprocesses for the whole test, never restarted, with both brokers in
bootstrap.servers:

- the Java client 4.1 (`KafgresProbe failover`, tests/java FailoverScenario):
  an idempotent acks=all producer, a transactional producer, a classic group
  consumer and a KIP-848 (`group.protocol=consumer`) group consumer;
- franz-go (`franz-probe failover`, tests/franz/failover.go): an idempotent
  acks=all producer and a classic group consumer.

Each prints a line per acknowledged record (`acked P OFFSET SEQ`), per
consumed record (`consumed P OFFSET SEQ`) and per committed transaction
(`committed-txn ID FIRST LAST`, printed once commitTransaction returned).
While they run, the primary is killed (SIGKILL of the postmaster and its
children), the standby promoted, the old primary rewound and started as the
new standby, and named in synchronous_standby_names; four times,
alternating. After each failover every producer gets more records
acknowledged, the transactional one commits more, and the classic group
consumers read records written after it, with no restart. Then the clients are stopped (a stop file), and from their output
and a final read of the last primary:

- every acknowledged record is in the log exactly once, in per-partition
  order, at the offset it was acknowledged at, and no record failed delivery;
- every group consumer read each record at the offset the log has it, read
  every acknowledged record (at least once: the new primary does not know the
  group's members, so they rejoin and resume from the last commit), read
  records written after the last failover, and its group's committed offsets
  on the last primary are past every acknowledged record; so does the
  KIP-848 consumer (a new primary knows no members: its heartbeat at its
  epoch is answered UNKNOWN_MEMBER_ID, and it rejoins at epoch 0);
- every committed transaction is whole in a read_committed read, none is
  there in part, no aborted one is visible, and transactions committed after
  the last failover.

The clients' stderr and both server logs are kept in pytest's temporary
directory (the path is printed with -s). KAFGRES_FRANZ_LOG=debug turns on
franz-go's log (stderr).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from failover_support import Node, node_pair, wait_until_caught_up
from test_failover import READY_TIMEOUT_S, create_topics, failover, make_standby, read_all, rejoin
from test_franz_go import franz_build  # noqa: F401 (a fixture)
from test_java_client import BUILD_DIR as JAVA_BUILD_DIR
from test_java_client import JAVA_BIN, java_build  # noqa: F401 (a fixture)

NODES = (("node_c", 5483, 9483, 1), ("node_d", 5484, 9484, 2))
BOOTSTRAP = ",".join(f"127.0.0.1:{kafka}" for _, _, kafka, _ in NODES)
FAILOVERS = 4
PARTITIONS = 2
JAVA_TOPIC, FRANZ_TOPIC = "foc-java", "foc-franz"
JAVA_TXN_TOPIC = f"{JAVA_TOPIC}-txn"
JAVA_TXN_RECORDS = 4  # FailoverScenario.TXN_RECORDS
# The tag each client's consumers print their lines with, and their groups.
JAVA_GROUPS = {"consumed": f"{JAVA_TOPIC}-group", "consumed-kip848": f"{JAVA_TOPIC}-group848"}
FRANZ_GROUPS = {"consumed": f"{FRANZ_TOPIC}-group"}
# A client stops by itself after this long, if the test never made the stop file.
CLIENT_RUN_S = 400
# After the stop file: a flush is bounded by the clients' delivery timeout (120 s), a drain by 30 s.
CLIENT_EXIT_TIMEOUT_S = 200.0
# Starting a JVM and joining two groups on a loaded 2-core machine.
FIRST_PROGRESS_TIMEOUT_S = 120.0
PROGRESS_TIMEOUT_S = 90.0
PROGRESS_RECORDS = 50

# `acked|consumed|consumed-kip848 P OFFSET SEQ`, or `committed-txn|aborted-txn|unknown-txn ID FIRST LAST`.
LINE = re.compile(
    r"(acked|consumed|consumed-kip848) (\d+) (\d+) (\d+)|(committed-txn|aborted-txn|unknown-txn) (\d+) (\d+) (\d+)"
)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """Where the clients' stderr and, at the end, the nodes' server logs are kept (pytest keeps the last runs')."""
    return tmp_path_factory.mktemp("failover-clients")


@pytest.fixture(scope="module")
def pair(logs):
    with node_pair(NODES, READY_TIMEOUT_S, keep_logs_in=logs) as nodes:
        yield nodes


class Client:
    """A client program run for the whole test; its stdout parsed as it comes, its stderr in a file."""

    def __init__(self, name: str, topic: str, groups: dict[str, str], cmd: list[str], env: dict[str, str],
                 stderr: Path) -> None:
        self.name = name
        self.topic = topic
        self.groups = groups
        self.cmd = cmd
        self.stderr_path = stderr
        self.lock = threading.Lock()
        self.acked: list[tuple[int, int, int]] = []  # partition, offset, seq
        self.consumed: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        self.txns: dict[str, list[tuple[int, int, int]]] = defaultdict(list)  # outcome -> (id, first, last)
        self.errors: list[str] = []
        self.other: list[str] = []
        self.stderr_file = stderr.open("w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr_file, text=True, env=env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            text = text.rstrip("\n")
            match = LINE.fullmatch(text)
            with self.lock:
                if match and match.group(1):
                    entry = (int(match.group(2)), int(match.group(3)), int(match.group(4)))
                    (self.acked if match.group(1) == "acked" else self.consumed[match.group(1)]).append(entry)
                elif match:
                    self.txns[match.group(5)].append(tuple(int(match.group(i)) for i in (6, 7, 8)))
                elif text.startswith("error"):
                    self.errors.append(text)
                else:
                    self.other.append(text)

    def snapshot(self) -> dict[str, int]:
        """How many of each kind of line so far."""
        with self.lock:
            return self.counts()

    def consumed_from(self, tag: str, offsets: dict[int, int]) -> set[int]:
        """The partitions of which consumer `tag` read a record at or past offsets[partition]."""
        with self.lock:
            return {p for p, o, _ in self.consumed[tag] if o >= offsets[p]}

    def stderr_tail(self, chars: int = 4000) -> str:
        return self.stderr_path.read_text(errors="replace")[-chars:]

    def describe(self) -> str:
        with self.lock:
            return (f"{self.name}: exit {self.proc.poll()}, {self.counts()}, "
                    f"last errors {self.errors[-8:]}, other lines {self.other[-5:]}\n"
                    f"stderr (tail):\n{self.stderr_tail()}")

    def counts(self) -> dict[str, int]:
        counts = {"acked": len(self.acked), **{tag: len(v) for tag, v in self.consumed.items()}}
        counts.update({outcome: len(v) for outcome, v in self.txns.items()})
        return counts

    def wait_for_exit(self, timeout_s: float) -> int:
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not stop within {timeout_s:.0f}s of the stop file\n{self.describe()}")
        self.reader.join(30)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.stderr_file.close()


def start_clients(java_build: Path, franz_build: Path, stop_file: Path, logs: Path) -> tuple[Client, Client]:
    env = {**os.environ, "KAFGRES_JAVA_BUILD": str(JAVA_BUILD_DIR), "KAFGRES_STOP_FILE": str(stop_file),
           "KAFGRES_RUN_SECONDS": str(CLIENT_RUN_S)}
    java = Client(
        "java", JAVA_TOPIC, JAVA_GROUPS,
        [str(JAVA_BIN / "kafka-run-class"), "kafgres.probe.KafgresProbe", "failover", BOOTSTRAP, JAVA_TOPIC],
        env, logs / "java.stderr",
    )
    franz = Client(
        "franz-go", FRANZ_TOPIC, FRANZ_GROUPS,
        [str(franz_build), "failover", "-log", os.environ.get("KAFGRES_FRANZ_LOG", "warn"),
         "-run-seconds", str(CLIENT_RUN_S), BOOTSTRAP, FRANZ_TOPIC, str(stop_file)],
        env, logs / "franz.stderr",
    )
    return java, franz


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "foc-watermarks", "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def wait_for_progress(clients: list[Client], before: dict[str, dict[str, int]], written_after: dict[str, dict[int, int]],
                      timeout_s: float, what: str, node: Node) -> None:
    """Until every producer has PROGRESS_RECORDS more acknowledgements than in `before`, the transactional one
    more commits, and every consumer that must carry on has read a record at or past `written_after` in every
    partition."""
    deadline = time.monotonic() + timeout_s
    while True:
        lagging = []
        for client in clients:
            now = client.snapshot()
            was = before.get(client.name, {})
            if client.proc.poll() is not None:
                raise AssertionError(f"{what}: {client.name} exited\n{client.describe()}")
            if now.get("acked", 0) < was.get("acked", 0) + PROGRESS_RECORDS:
                lagging.append(f"{client.name} producer")
            if client.name == "java" and now.get("committed-txn", 0) <= was.get("committed-txn", 0):
                lagging.append("java transactional producer")
            if client.consumed_from("consumed", written_after[client.topic]) != set(range(PARTITIONS)):
                lagging.append(f"{client.name} consumer")
        if not lagging:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: no progress within {timeout_s:.0f}s of {', '.join(lagging)}\n"
                + "\n".join(c.describe() for c in clients) + f"\n{node.name} log:\n{node.log_tail(60)}"
            )
        time.sleep(0.2)


@dataclass
class Run:
    """What the clients printed, and the last primary's logs of their topics."""

    primary: Node
    clients: dict[str, Client]
    # Per topic, each partition's high watermark on the new primary just after the last failover.
    written_after_last: dict[str, dict[int, int]]
    committed_txns_before_last: int
    logs: dict[str, dict[int, list[tuple[int, int]]]] = field(default_factory=dict)  # topic -> partition -> (offset, seq)
    ran_s: float = 0.0


def read_log(bootstrap: str, topic: str, prefix: str) -> dict[int, list[tuple[int, int]]]:
    """Each partition's records as (offset, seq), in log order."""
    return {
        partition: [(offset, seq_of(value, prefix)) for offset, value in read_all(bootstrap, topic, partition)]
        for partition in range(PARTITIONS)
    }


def at_offsets(run: "Run", topic: str) -> dict[tuple[int, int], int]:
    """(partition, offset) -> seq on the last primary."""
    return {(p, offset): seq for p, log in run.logs[topic].items() for offset, seq in log}


def seq_of(value: str, prefix: str) -> int:
    assert value.startswith(prefix), f"a record {value!r} among {prefix}* records"
    return int(value[len(prefix):])


@pytest.fixture(scope="module")
def run(pair, java_build, franz_build, logs) -> Iterator[Run]:
    """Starts the clients, fails over FAILOVERS times while they run, stops them, reads the last primary."""
    c, d = pair
    create_topics(c, {JAVA_TOPIC: PARTITIONS, JAVA_TXN_TOPIC: PARTITIONS, FRANZ_TOPIC: PARTITIONS, "fo-probe": 1})
    make_standby(c, d)
    c.set_sync_names(d.name)
    wait_until_caught_up(c, d)

    stop_file = logs / "stop"
    started = time.monotonic()
    java, franz = start_clients(java_build, franz_build, stop_file, logs)
    clients = [java, franz]
    primary, standby = c, d
    try:
        zero = {t: {p: 0 for p in range(PARTITIONS)} for t in (JAVA_TOPIC, FRANZ_TOPIC)}
        wait_for_progress(clients, {}, zero, FIRST_PROGRESS_TIMEOUT_S, "before the first failover", primary)
        for round_no in range(FAILOVERS):
            time.sleep(3.0)  # mid-stream
            before = {client.name: client.snapshot() for client in clients}
            failover(primary, standby, None)
            primary, standby = standby, primary
            # What the clients write from here on was written after this failover.
            written_after = {t: high_watermarks(primary.bootstrap, t) for t in (JAVA_TOPIC, FRANZ_TOPIC)}
            rejoin(standby, primary)
            wait_for_progress(clients, before, written_after, PROGRESS_TIMEOUT_S, f"after failover {round_no + 1}",
                              primary)
        for client in clients:
            assert client.proc.poll() is None, f"{client.name} exited before the stop file\n{client.describe()}"
        stop_file.touch()
        for client in clients:
            code = client.wait_for_exit(CLIENT_EXIT_TIMEOUT_S)
            assert code == 0 and "done" in client.other, f"{client.name} exited {code}\n{client.describe()}"
    finally:
        for client in clients:
            client.kill()
    result = Run(primary, {client.name: client for client in clients}, written_after,
                 before["java"].get("committed-txn", 0), ran_s=time.monotonic() - started)
    result.logs = {JAVA_TOPIC: read_log(primary.bootstrap, JAVA_TOPIC, "java-"),
                   FRANZ_TOPIC: read_log(primary.bootstrap, FRANZ_TOPIC, "go-")}
    yield result
    print(f"\n{FAILOVERS} synchronous failovers, {result.ran_s:.0f}s of client time; logs in {logs}")
    for client in clients:
        print(f"{client.name}: {client.counts()}, {len(client.errors)} error lines: {client.errors[:20]}")


@pytest.mark.parametrize("name", ["java", "franz-go"])
def test_every_acknowledged_record_is_on_the_last_primary_once_in_order_at_its_offset(run, name):
    client = run.clients[name]
    for partition, log in run.logs[client.topic].items():
        seqs = [seq for _, seq in log]
        assert len(seqs) == len(set(seqs)), f"{name}: partition {partition} has a record twice"
        assert seqs == sorted(seqs), f"{name}: partition {partition} is out of order"
        assert all(seq % PARTITIONS == partition for seq in seqs), f"{name}: a record in partition {partition}'s log"
    at = at_offsets(run, client.topic)
    acked = client.acked
    assert acked, f"{name} had nothing acknowledged\n{client.describe()}"
    assert len({seq for _, _, seq in acked}) == len(acked), f"{name}: a record acknowledged twice"
    misplaced = [(p, o, seq, at.get((p, o))) for p, o, seq in acked if at.get((p, o)) != seq]
    assert not misplaced, (
        f"{name}: {len(misplaced)} acknowledged records not at their offset on the last primary "
        f"(partition, offset, acknowledged seq, found): {misplaced[:10]}"
    )
    failed = [e for e in client.errors if e.startswith(("error produce", "error send", "error producer"))]
    assert not failed, f"{name}: {len(failed)} records failed delivery: {failed[:5]}"
    written_after = run.written_after_last[client.topic]
    assert {p for p, o, _ in acked if o >= written_after[p]} == set(range(PARTITIONS)), (
        f"{name}: nothing acknowledged after the last failover"
    )


def check_group_consumer(run: Run, name: str, tag: str) -> None:
    """The consumer printing `tag` read what the log has at each offset, read every acknowledged record, read
    records written after the last failover, and its group's commits are past every acknowledged record."""
    client = run.clients[name]
    at = at_offsets(run, client.topic)
    consumed = client.consumed[tag]
    fatal = [e for e in client.errors if e.startswith(f"error {tag} fatal")]
    assert not fatal, f"{name} {tag} stopped: {fatal}\n{client.describe()}"
    wrong = [(p, o, seq, at.get((p, o))) for p, o, seq in consumed if at.get((p, o)) != seq]
    assert not wrong, f"{name} {tag}: records read at offsets that hold others: {wrong[:10]}"
    missing = {seq for _, _, seq in client.acked} - {seq for _, _, seq in consumed}
    assert not missing, f"{name} {tag}: {len(missing)} acknowledged records never read: {sorted(missing)[:10]}"
    written_after = run.written_after_last[client.topic]
    assert client.consumed_from(tag, written_after) == set(range(PARTITIONS)), (
        f"{name} {tag}: read nothing written after the last failover (high watermarks then: {written_after})"
    )
    died = [e for e in client.errors if e.startswith(f"error {tag} consumer")]
    assert not died, f"{name} {tag} stopped early: {died}\n{client.describe()}"
    done = [line for line in client.other if line.startswith(f"{tag}-done ")]
    assert done and done[-1].endswith(" missing 0"), f"{name} {tag} did not finish its drain: {done}\n{client.describe()}"
    group = client.groups[tag]
    stored = dict(run.primary.sql(
        f"SELECT partition, committed_offset FROM kafgres.consumer_offsets WHERE group_id = '{group}' "
        f"AND topic = '{client.topic}'"
    ))
    last_acked = {p: max((o for pp, o, _ in client.acked if pp == p), default=-1) for p in range(PARTITIONS)}
    behind = {p: (stored.get(p), last_acked[p]) for p in range(PARTITIONS) if stored.get(p, -1) <= last_acked[p]}
    assert not behind, (
        f"{name} {tag}: group {group}'s committed offsets (stored, last acknowledged): {behind}\n{client.describe()}"
    )


@pytest.mark.parametrize("name", ["java", "franz-go"])
def test_a_classic_group_consumer_reads_every_acknowledged_record_across_the_failovers(run, name):
    check_group_consumer(run, name, "consumed")


def test_a_kip848_group_consumer_reads_every_acknowledged_record_across_the_failovers(run):
    check_group_consumer(run, "java", "consumed-kip848")


def test_every_committed_transaction_is_whole_on_the_last_primary(run):
    java = run.clients["java"]
    visible: dict[int, set[int]] = defaultdict(set)
    for partition in range(PARTITIONS):
        for _, value in read_all(run.primary.bootstrap, JAVA_TXN_TOPIC, partition, "read_committed"):
            match = re.fullmatch(r"jtx-(\d+)-(\d+)", value)
            assert match, f"a record {value!r} in {JAVA_TXN_TOPIC}"
            txn, seq = int(match.group(1)), int(match.group(2))
            assert seq not in visible[txn], f"transaction {txn}'s record {seq} twice"
            visible[txn].add(seq)
    committed = java.txns["committed-txn"]
    assert len(committed) > run.committed_txns_before_last, (
        f"no transaction committed after the last failover\n{java.describe()}"
    )
    lost = [txn for txn, first, last in committed if visible.get(txn) != set(range(first, last + 1))]
    assert not lost, f"committed transactions not whole: {[(t, sorted(visible.get(t, ()))) for t in lost[:10]]}"
    partial = [txn for txn, seqs in visible.items() if len(seqs) != JAVA_TXN_RECORDS]
    assert not partial, f"transactions in part: {[(t, sorted(visible[t])) for t in partial[:10]]}"
    aborted = [txn for txn, _, _ in java.txns["aborted-txn"] if txn in visible]
    assert not aborted, f"aborted transactions visible: {aborted[:10]}"
