"""Rows and events stay one to one across kill -9 (the crash test of the SQL API, docs/sql.md).

A throwaway cluster of its own (initdb under /tmp, Postgres on 127.0.0.1:5499,
Kafka on 127.0.0.1:9499) so the kills never touch the main cluster. One
driver session runs short transactions, each

    INSERT INTO business(id) VALUES (n);
    SELECT kafgres.send('crash-events', n::text, key => n::text);
    COMMIT;

with n increasing. Meanwhile, at random moments, the test kill -9s either the
postmaster and every process under it (then restarts it with pg_ctl) or only
the broker worker or the SQL bridge worker (the postmaster then resets the
cluster by itself), at
least MIN_KILLS times. Afterwards the whole topic is read with confluent-kafka
and must match the committed rows one to one: every committed row has exactly
one event, no event lacks its row, nothing is duplicated, and in each
partition the ids increase (the commit order of a single driver). Every
COMMIT that returned successfully must have its row and its event; a COMMIT
cut off by a kill may have gone either way, and the table says which.

A second driver writes a captured table (kafgres.capture, docs/cdc.md) in
the same run, each transaction inserting row n and updating row n - 1. Its
topic (one partition) must hold exactly the committed transactions' changes,
in commit order: for each committed n, the create of n, then the update of
n - 1 if that row exists.

The cluster is stopped and removed at the end, also on failure.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire
from support import BROKER_BACKEND_TYPE, ThrowawayCluster, port_is_free, wait_for_topic_metadata

BRIDGE_BACKEND_TYPE = "kafgres sql bridge"
PG_PORT = 5499
KAFKA_PORT = 9499
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
TOPIC = "crash-events"
PARTITIONS = 3
CAPTURED_TOPIC = "crash-cdc"

MIN_KILLS = 16
KILL_LOOP_BUDGET_S = 120.0  # the kills must all happen within this
RECOVERY_TIMEOUT_S = 60.0  # one restart, recovery included
CATCH_UP_TIMEOUT_S = 60.0  # for the events of the last commits to appear after the loop
SEED = int(os.environ.get("KAFGRES_CRASH_SEED", time.time_ns() % 1_000_000))


def proc_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (an exited child nobody reaped holds no resources)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children_of(pids: set[int]) -> set[int]:
    """Every live descendant of `pids`, found through /proc/*/stat parent ids."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = set(pids)
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier and pid not in found}
        found |= frontier
    return found


class Cluster(ThrowawayCluster):
    """The throwaway cluster of this test: kill, restart, wait for the new worker."""

    def __init__(self) -> None:
        super().__init__("crash", PG_PORT, KAFKA_PORT)

    def init(self) -> None:
        super().init({"restart_after_crash": "on"})

    def kill_tree(self) -> list[int]:
        """SIGKILLs the postmaster and every process under it; waits until they are all gone."""
        pm = self.postmaster_pid()
        if pm is None or not proc_alive(pm):
            return []
        os.kill(pm, signal.SIGSTOP)  # no new children while the tree is listed
        victims = [pm, *sorted(children_of({pm}))]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        while any(proc_alive(p) for p in victims):
            assert time.monotonic() < deadline, f"processes {[p for p in victims if proc_alive(p)]} survived SIGKILL"
            time.sleep(0.02)
        # A new postmaster refuses to start while kill(old pid, 0) succeeds, which it does for a
        # zombie: wait until whoever inherited the orphaned postmaster has reaped it.
        while Path(f"/proc/{pm}").exists():
            assert time.monotonic() < deadline, f"the killed postmaster {pm} was not reaped within 20s"
            time.sleep(0.02)
        return victims

    def broker_pid(self) -> int | None:
        return self.pid_of(BROKER_BACKEND_TYPE)

    def pid_of(self, backend_type: str) -> int | None:
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                row = conn.execute("select pid from pg_stat_activity where backend_type = %s", (backend_type,)).fetchone()
        except psycopg.Error:
            return None
        return row[0] if row else None

    def wait_ready(self, old_broker_pid: int | None = None) -> int:
        """Waits until SQL is accepted and a (new) broker worker answers on the Kafka port; returns its pid."""
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        state = "not checked"
        while time.monotonic() < deadline:
            pid = self.broker_pid()
            if pid is not None and pid != old_broker_pid and kafka_wire.broker_answers(BOOTSTRAP, timeout_s=1):
                return pid
            state = f"broker pid {pid} (old {old_broker_pid})"
            time.sleep(0.1)
        raise AssertionError(f"cluster not ready {RECOVERY_TIMEOUT_S:.0f}s after a kill: {state}\n{self.log_tail()}")

    def destroy(self) -> None:
        self.stop("immediate")
        self.kill_tree()  # if the stop did not finish the job
        super().destroy()


def create_crash_topic() -> None:
    # The AdminClient lives only in here: a lingering one would log every kill.
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    wait_for_topic_metadata(admin, TOPIC, PARTITIONS)


@pytest.fixture
def crash_cluster():
    if os.geteuid() != 0:
        pytest.fail("the crash test must run as root (it runs initdb as postgres and kill -9s the cluster)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a crash-test cluster from an earlier run still up?"
    cluster = Cluster()
    try:
        cluster.init()
        cluster.start()
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute("create extension kafgres")
            conn.execute("create table business(id bigint primary key)")
            conn.execute("create table captured(id bigint primary key, n bigint not null)")
        cluster.wait_ready()
        create_crash_topic()
        with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
            conn.execute("select kafgres.capture('captured', %s)", (CAPTURED_TOPIC,))
        yield cluster
    finally:
        cluster.destroy()


@dataclass
class DriverStats:
    next_id: int = 1
    acknowledged: list[int] = field(default_factory=list)  # COMMIT returned
    in_doubt: list[int] = field(default_factory=list)  # the connection died before or during COMMIT
    connection_errors: int = 0
    unexpected: list[str] = field(default_factory=list)


class Driver(threading.Thread):
    """One session: INSERT a row and send its event, COMMIT; reconnects while the server is down."""

    EXPECTED_SQLSTATES = {None, "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"}

    def __init__(self, conninfo: str) -> None:
        super().__init__(daemon=True)
        self.conninfo = conninfo
        self.stats = DriverStats()
        self.stop = threading.Event()

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.conninfo)
                    conn.execute("set statement_timeout = '20s'")
                    conn.commit()
            except psycopg.Error:
                self.stats.connection_errors += 1
                time.sleep(0.05)  # back off while the server restarts
                continue
            n = self.stats.next_id
            self.stats.next_id += 1
            try:
                self.transaction(conn, n)
                conn.commit()
            except psycopg.Error as e:
                self.stats.in_doubt.append(n)
                if e.sqlstate not in self.EXPECTED_SQLSTATES and not isinstance(e, psycopg.OperationalError):
                    self.stats.unexpected.append(f"id {n}: {e.sqlstate} {str(e).splitlines()[0]}")
                try:
                    conn.close()
                except psycopg.Error:
                    pass
                conn = None
                continue
            self.stats.acknowledged.append(n)
        if conn is not None:
            conn.close()

    def transaction(self, conn: psycopg.Connection, n: int) -> None:
        conn.execute("insert into business(id) values (%s)", (n,))
        conn.execute("select kafgres.send(%s, %s::text, key => %s::text)", (TOPIC, str(n), str(n)))


class CaptureDriver(Driver):
    """One session writing the captured table: row n inserted, row n - 1 updated, in one transaction."""

    def transaction(self, conn: psycopg.Connection, n: int) -> None:
        conn.execute("insert into captured(id, n) values (%s, 0)", (n,))
        conn.execute("update captured set n = %s where id = %s", (n, n - 1))


def read_topic(topic: str = TOPIC, partitions: int = PARTITIONS) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """Every record of every partition of `topic`, from the log start to the high watermark."""
    consumer = Consumer({
        "bootstrap.servers": BOOTSTRAP, "group.id": "crash-test-reader", "enable.auto.commit": False,
        "enable.partition.eof": False, "auto.offset.reset": "error",
    })
    try:
        out: dict[int, list] = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out[p] = []
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + 30
            while len(out[p]) < high - low and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                assert msg.error() is None, f"reading {topic}[{p}]: {msg.error()}"
                out[p].append((msg.key(), msg.value()))
            assert len(out[p]) == high - low, f"read {len(out[p])} of {high - low} records of {topic}[{p}]"
        return out
    finally:
        consumer.close()


def test_rows_and_events_match_after_kill_9(crash_cluster: Cluster):
    rng = random.Random(SEED)
    kinds = (
        ["postmaster tree"] * (MIN_KILLS - 2 * (MIN_KILLS // 4))
        + ["broker worker"] * (MIN_KILLS // 4)
        + ["sql bridge"] * (MIN_KILLS // 4)
    )
    rng.shuffle(kinds)
    driver = Driver(crash_cluster.conninfo)
    driver.start()
    capture_driver = CaptureDriver(crash_cluster.conninfo)
    capture_driver.start()
    kills: list[str] = []
    loop_deadline = time.monotonic() + KILL_LOOP_BUDGET_S
    try:
        for kind in kinds:
            assert time.monotonic() < loop_deadline, f"only {len(kills)} kills within {KILL_LOOP_BUDGET_S:.0f}s"
            # Let the driver commit at least once since the last restart, then kill at a random moment.
            acked = len(driver.stats.acknowledged)
            deadline = time.monotonic() + 30
            while len(driver.stats.acknowledged) == acked:
                assert driver.is_alive(), "the driver thread died"
                assert time.monotonic() < deadline, (
                    f"no transaction committed within 30s of a restart\n{crash_cluster.log_tail()}"
                )
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 1.0))

            if kind == "postmaster tree":
                victims = crash_cluster.kill_tree()
                assert victims, "no postmaster to kill"
                crash_cluster.start()
                crash_cluster.wait_ready()
            elif kind == "broker worker":
                broker = crash_cluster.broker_pid()
                assert broker is not None, f"no broker worker to kill\n{crash_cluster.log_tail()}"
                os.kill(broker, signal.SIGKILL)
                crash_cluster.wait_ready(old_broker_pid=broker)
            else:
                # A kill -9 of any backend resets the cluster, as for the broker.
                bridge = crash_cluster.pid_of(BRIDGE_BACKEND_TYPE)
                assert bridge is not None, f"no SQL bridge to kill\n{crash_cluster.log_tail()}"
                broker = crash_cluster.broker_pid()
                os.kill(bridge, signal.SIGKILL)
                crash_cluster.wait_ready(old_broker_pid=broker)
            kills.append(kind)
        # Some traffic after the last restart too.
        acked = len(driver.stats.acknowledged)
        deadline = time.monotonic() + 30
        while len(driver.stats.acknowledged) < acked + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        driver.stop.set()
        capture_driver.stop.set()
        driver.join(30)
        capture_driver.join(30)
    assert not driver.is_alive() and not capture_driver.is_alive(), "a driver did not stop"
    stats = driver.stats
    assert not stats.unexpected, f"unexpected errors from the driver: {stats.unexpected[:10]}"
    assert not capture_driver.stats.unexpected, (
        f"unexpected errors from the capture driver: {capture_driver.stats.unexpected[:10]}")

    with psycopg.connect(crash_cluster.conninfo, autocommit=True) as conn:
        rows = [r[0] for r in conn.execute("select id from business order by id")]
    row_set = set(rows)
    acked = set(stats.acknowledged)
    assert acked <= row_set, f"acknowledged commits without their row: {sorted(acked - row_set)[:20]}"
    assert row_set <= acked | set(stats.in_doubt), "rows the driver never sent"

    # Wait (bounded) for the broker to apply the last commits, then read everything.
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while True:
        events = read_topic()
        ids = [int(v) for records in events.values() for _, v in records]
        if set(ids) >= row_set or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    problems = []
    for p, records in events.items():
        for key, value in records:
            if key != value:
                problems.append(f"partition {p}: key {key!r} != value {value!r}")
        p_ids = [int(v) for _, v in records]
        out_of_order = [(a, b) for a, b in zip(p_ids, p_ids[1:]) if a >= b]
        if out_of_order:
            problems.append(f"partition {p}: ids not increasing at {out_of_order[:10]}")
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    missing = sorted(row_set - set(ids))
    orphans = sorted(set(ids) - row_set)

    in_doubt_committed = len(set(stats.in_doubt) & row_set)
    summary = (
        f"seed {SEED}: {len(kills)} kills ({kills.count('postmaster tree')} postmaster tree, "
        f"{kills.count('broker worker')} broker worker, {kills.count('sql bridge')} SQL bridge); {stats.next_id - 1} transactions attempted, "
        f"{len(acked)} acknowledged, {len(stats.in_doubt)} cut off by a kill ({in_doubt_committed} of them committed "
        f"anyway), {len(rows)} rows, {len(ids)} events "
        f"(per partition {[len(events[p]) for p in range(PARTITIONS)]})"
    )
    print(summary)
    assert not missing, f"{summary}\nrows without an event: {missing[:20]}"
    assert not orphans, f"{summary}\nevents without a row: {orphans[:20]}"
    assert not duplicates, f"{summary}\nduplicated events: {duplicates[:20]}"
    assert not problems, f"{summary}\n" + "\n".join(problems[:20])
    assert len(kills) == len(kinds) >= 10
    assert len(acked) >= 100, f"{summary}: too little traffic to mean anything"

    check_captured_changes(crash_cluster, capture_driver.stats, summary)

    panics = [line for line in crash_cluster.log.read_text(errors="replace").splitlines() if "PANIC" in line]
    assert not panics, "PANIC in the server log:\n" + "\n".join(panics[:20])


def check_captured_changes(cluster: Cluster, stats: DriverStats, summary: str) -> None:
    """The captured table's topic holds each committed transaction's two changes once, in commit order."""
    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        table = dict(conn.execute("select id, n from captured").fetchall())
    committed = sorted(table)
    assert set(stats.acknowledged) <= set(committed), "acknowledged commits without their captured row"
    assert len(stats.acknowledged) >= 50, f"{summary}: too few captured transactions to mean anything"
    expected: list[tuple[str, int, int]] = []
    for n in committed:
        expected.append(("c", n, 0))
        if n - 1 in table:
            expected.append(("u", n - 1, n))
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while True:
        records = read_topic(CAPTURED_TOPIC, 1)[0]
        if len(records) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    got = []
    for key, value in records:
        change = json.loads(value)
        after = change["after"]
        assert json.loads(key) == {"id": after["id"]}, f"key {key!r} of {change}"
        got.append((change["op"], after["id"], after["n"]))
    first_difference = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    assert got == expected, (
        f"{summary}\ncaptured changes differ from the committed transactions ({len(got)} records, "
        f"{len(expected)} expected) from record {first_difference}: got {got[first_difference:first_difference + 5]}, "
        f"expected {expected[first_difference:first_difference + 5]}")
    print(f"captured: {len(committed)} committed transactions, {len(got)} changes, "
          f"{len(stats.in_doubt)} cut off by a kill")
