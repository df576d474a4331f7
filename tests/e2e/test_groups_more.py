"""Consumer groups beyond two members, with librdkafka's classic protocol.

- Three members (range and roundrobin) split a 6-partition topic into disjoint
  pairs; when one leaves, the other two split all six; every record is
  consumed exactly once across the group because each one is committed
  synchronously before the next poll.
- cooperative-sticky (KIP-429): when a third member joins, the first two
  revoke only the partitions that move to it and keep consuming the rest.
- Static membership (KIP-345, `group.instance.id`): librdkafka's close() of a
  static member sends no LeaveGroup, so a restart with the same instance id
  within the session timeout gets the same partitions and the other member
  sees no rebalance; a second consumer with a live member's instance id takes
  its place and the first is fenced (FENCED_INSTANCE_ID, fatal in librdkafka).
- Session expiry: a member whose process is stopped (SIGSTOP, so neither
  polls nor heartbeats) is removed once `session.timeout.ms` passes without a
  heartbeat, not before, and its partitions move to the other member. A
  member that keeps heartbeating but stops polling is librdkafka's
  `max.poll.interval.ms` case: the client itself leaves the group.
- The Java client (kafka-clients 4.1, tests/java's `cooperative` scenario):
  the same incremental rebalance with its CooperativeStickyAssignor.

Every group is new, so its first rebalance waits the broker's
`kafgres.group_initial_rebalance_delay_ms` (3 s by default); the deadlines
below allow for it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from support import produce_all
from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
# The first rebalance of a new group waits at least the initial delay (3 s), more while members arrive.
ASSIGN_TIMEOUT_S = 30.0


def group_config(bootstrap: str, group: str, **extra) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
    }
    config.update(extra)
    return config


@pytest.fixture
def make_member(bootstrap: str):
    """make_member(group, **config) -> a group Consumer; closed at teardown unless the test closed it."""
    members: list[Consumer] = []

    def make(group: str, **extra) -> Consumer:
        c = Consumer(group_config(bootstrap, group, **extra))
        members.append(c)
        return c

    yield make
    for c in members:
        try:
            c.close()
        except (RuntimeError, KafkaException):
            pass  # already closed, or fenced


class Member:
    """A group consumer plus what its rebalance callbacks saw, in order."""

    def __init__(self, name: str, consumer: Consumer) -> None:
        self.name = name
        self.consumer = consumer
        self.events: list[tuple[str, frozenset[int]]] = []
        self.errors: list[KafkaError] = []
        self.commit_errors: list[str] = []
        self.commit_failed: dict[tuple[int, int], int] = {}  # (partition, offset) -> error code
        self.received: list[tuple[int, int]] = []  # (partition, offset)
        self.closed = False

    def subscribe(self, topic: str) -> None:
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, tps: self.events.append(("assign", frozenset(tp.partition for tp in tps))),
            on_revoke=lambda _c, tps: self.events.append(("revoke", frozenset(tp.partition for tp in tps))),
            on_lost=lambda _c, tps: self.events.append(("lost", frozenset(tp.partition for tp in tps))),
        )

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def revoked(self) -> set[int]:
        return set().union(*[p for kind, p in self.events if kind in ("revoke", "lost")])

    def poll_once(self, timeout_s: float = 0.05, commit: bool = False) -> None:
        msg = self.consumer.poll(timeout_s)
        if msg is None:
            return
        if msg.error() is not None:
            self.errors.append(msg.error())
            return
        if commit:
            # Synchronous: the record counts as processed only once its commit is durable.
            try:
                self.consumer.commit(message=msg, asynchronous=False)
            except KafkaException as e:
                self.commit_errors.append(f"{msg.partition()}@{msg.offset()}: {e}")
                self.commit_failed[(msg.partition(), msg.offset())] = e.args[0].code()
        self.received.append((msg.partition(), msg.offset()))

    def close(self) -> None:
        self.consumer.close()
        self.closed = True

    def __repr__(self) -> str:
        state = "closed" if self.closed else sorted(self.partitions())
        return f"{self.name}(assigned={state}, events={[(k, sorted(p)) for k, p in self.events]}, errors={[str(e) for e in self.errors[-3:]]})"


# A member's synchronous commit can wait behind its own JoinGroup, which the coordinator parks until every
# member has rejoined (Kafka reads one request per connection at a time, and so do we); librdkafka reports it
# as "possibly held back by preceding blocking JoinGroupRequest". A member rejoins only once its application
# serves the rebalance callbacks, so members polled in turn by one thread can deadlock until the commit's
# request timeout (60 s). Each member therefore polls on its own thread, as each would in its own process.
COMMIT_BLOCK_BOUND_S = 90.0


def _poll_concurrently(members: list[Member], done, deadline: float, commit: bool) -> bool:
    """Polls every open member on its own thread until done() holds or the deadline passes."""
    stop = threading.Event()

    def run(m: Member) -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            m.poll_once(commit=commit)

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in members if not m.closed]
    for t in threads:
        t.start()
    try:
        while time.monotonic() < deadline:
            if done():
                return True
            time.sleep(0.01)
        return done()
    finally:
        stop.set()
        for t in threads:
            t.join(COMMIT_BLOCK_BOUND_S)
        assert not [t for t in threads if t.is_alive()], f"a member is still blocked in poll or commit: {members}"


def poll_until(members: list[Member], done, timeout_s: float, what: str, commit: bool = False) -> float:
    """Polls every open member until done() holds; returns the seconds it took."""
    start = time.monotonic()
    if _poll_concurrently(members, done, start + timeout_s, commit):
        return time.monotonic() - start
    raise AssertionError(f"not within {timeout_s:.0f}s: {what}; members: {members}")


def poll_for(members: list[Member], seconds: float, commit: bool = False) -> None:
    _poll_concurrently(members, lambda: False, time.monotonic() + seconds, commit)


def distinct(members: list[Member]) -> set[tuple[int, int]]:
    """Every (partition, offset) the members received; a wait on it is not fooled by duplicates."""
    return {r for m in members for r in m.received}


def split_evenly(members: list[Member], partitions: int = PARTITIONS) -> bool:
    sets = [m.partitions() for m in members]
    return (
        sum(len(s) for s in sets) == partitions
        and set().union(*sets) == set(range(partitions))
        and all(len(s) == partitions // len(members) for s in sets)
    )


def produce_per_partition(producer, topic: str, per_partition: int, tag: str) -> set[tuple[int, int]]:
    records = [
        dict(topic=topic, partition=p, value=f"{tag}-{p}-{i}".encode())
        for i in range(per_partition)
        for p in range(PARTITIONS)
    ]
    return {(m.partition(), m.offset()) for m in produce_all(producer, records)}


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    probe = Consumer(group_config(bootstrap, group))
    try:
        tps = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        probe.close()
    return {tp.partition: tp.offset for tp in tps}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_three_members_split_then_two_take_over_exactly_once(
    strategy, bootstrap, make_producer, make_member, create_topic, topic_name
):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    producer = make_producer()
    produced = produce_per_partition(producer, topic, 10, "first")

    members = [
        Member(n, make_member(group, **{"partition.assignment.strategy": strategy})) for n in ("a", "b", "c")
    ]
    for m in members:
        m.subscribe(topic)
    poll_until(members, lambda: split_evenly(members), ASSIGN_TIMEOUT_S, f"3 members x 2 partitions ({strategy})", commit=True)
    if strategy == "range":
        # Range gives each member a contiguous run of partitions.
        assert sorted(tuple(sorted(m.partitions())) for m in members) == [(0, 1), (2, 3), (4, 5)]

    a, b, c = members
    poll_until(members, lambda: distinct(members) >= produced, 30, "first 60 records", commit=True)
    for m in members:
        assert {p for p, _ in m.received} <= m.partitions(), f"{m.name} got records of partitions it does not own"

    # More records; c leaves (LeaveGroup) while the group is consuming them.
    produced |= produce_per_partition(producer, topic, 100, "second")
    c_before = len(c.received)
    poll_until(members, lambda: len(c.received) >= c_before + 20, 30, "c consuming the second batch", commit=True)
    c.close()
    survivors = [a, b]
    poll_until(survivors, lambda: split_evenly(survivors), ASSIGN_TIMEOUT_S, f"2 members x 3 partitions ({strategy})", commit=True)
    poll_until(
        survivors,
        lambda: distinct(members) >= produced,
        30,
        "every record of the second batch",
        commit=True,
    )
    poll_for(survivors, 1.0, commit=True)  # nothing more may arrive

    consumed = [r for m in members for r in m.received]
    duplicates = sorted({r for r in consumed if consumed.count(r) > 1})
    assert not [e for m in members for e in m.commit_errors], [(m.name, m.commit_errors) for m in members]
    assert not duplicates, f"records consumed twice (partition, offset): {duplicates[:20]}"
    assert set(consumed) == produced, f"missing: {sorted(produced - set(consumed))[:20]}"

    # The survivors own the topic: a record per partition goes to its owner.
    produced_third = produce_per_partition(producer, topic, 1, "third")
    before = {m.name: len(m.received) for m in survivors}
    poll_until(survivors, lambda: sum(len(m.received) - before[m.name] for m in survivors) >= PARTITIONS, 30, "third batch", commit=True)
    for m in survivors:
        assert {p for p, _ in m.received[before[m.name]:]} == m.partitions()
    ends = {p: max(o for q, o in produced | produced_third if q == p) + 1 for p in range(PARTITIONS)}
    for m in survivors:
        m.close()
    assert committed_offsets(bootstrap, group, topic) == ends


def test_cooperative_sticky_moves_only_what_the_new_member_takes(
    bootstrap, make_producer, make_member, create_topic, topic_name
):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    producer = make_producer()
    cooperative = {"partition.assignment.strategy": "cooperative-sticky"}

    a = Member("a", make_member(group, **cooperative))
    b = Member("b", make_member(group, **cooperative))
    for m in (a, b):
        m.subscribe(topic)
    poll_until([a, b], lambda: split_evenly([a, b]), ASSIGN_TIMEOUT_S, "2 members x 3 partitions", commit=True)
    before = {"a": a.partitions(), "b": b.partitions()}
    assert before["a"].isdisjoint(before["b"])
    assert all(kind == "assign" for m in (a, b) for kind, _ in m.events), [a, b]

    produced = produce_per_partition(producer, topic, 20, "first")
    poll_until([a, b], lambda: distinct([a, b]) >= produced, 30, "first batch", commit=True)

    # A third member joins while records keep arriving.
    produced |= produce_per_partition(producer, topic, 50, "second")
    c = Member("c", make_member(group, **cooperative))
    c.subscribe(topic)
    members = [a, b, c]
    poll_until(members, lambda: split_evenly(members), ASSIGN_TIMEOUT_S, "3 members x 2 partitions", commit=True)
    produced |= produce_per_partition(producer, topic, 10, "third")
    poll_until(members, lambda: distinct(members) >= produced, 30, "every record", commit=True)

    # Incremental: a and b only ever revoked partitions that c now owns, and kept the others throughout.
    for m in (a, b):
        assert m.revoked() <= c.partitions(), f"{m.name} revoked partitions c did not take: {m}"
        assert m.partitions() == before[m.name] - m.revoked(), m
        assert m.partitions() <= before[m.name], f"{m.name} was given partitions it did not own: {m}"
        assert not [e for e in m.events if e[0] == "lost"], m
    assert a.revoked() | b.revoked() == c.partitions(), [a, b, c]
    # librdkafka reports incremental assignments: c's callbacks add up to what it owns.
    assert set().union(*[p for kind, p in c.events if kind == "assign"]) == c.partitions(), c

    # librdkafka keeps consuming (and committing with the old generation) while its JoinGroup is parked;
    # a commit that the coordinator reads after the generation moved fails with ILLEGAL_GENERATION
    # (Kafka reads one request per connection at a time, so it answers the same). Such a record may be
    # read again by the partition's next owner; any other record exactly once.
    failed = {r: code for m in members for r, code in m.commit_failed.items()}
    assert set(failed.values()) <= {KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}, [
        (m.name, m.commit_errors) for m in members
    ]
    consumed = [r for m in members for r in m.received]
    counts = {r: consumed.count(r) for r in set(consumed)}
    unexplained = sorted(r for r, n in counts.items() if n > 2 or (n == 2 and r not in failed))
    assert not unexplained, f"records consumed twice (partition, offset): {unexplained[:20]}; commit errors: {[(m.name, m.commit_errors) for m in members]}"
    assert set(consumed) == produced, f"missing: {sorted(produced - set(consumed))[:20]}"


def test_static_member_restart_keeps_partitions_without_rebalance(
    bootstrap, admin, make_producer, make_member, create_topic, topic_name
):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    producer = make_producer()

    a = Member("a", make_member(group, **{"group.instance.id": "static-a"}))
    b = Member("b", make_member(group, **{"group.instance.id": "static-b"}))
    for m in (a, b):
        m.subscribe(topic)
    poll_until([a, b], lambda: split_evenly([a, b]), ASSIGN_TIMEOUT_S, "2 static members x 3 partitions")
    owned_a, owned_b = a.partitions(), b.partitions()
    b_events = list(b.events)

    # close() of a static member sends no LeaveGroup: the broker keeps it (Stable, two members).
    a.close()
    description = admin.describe_consumer_groups([group])[group].result(timeout=15)
    assert sorted(mem.group_instance_id for mem in description.members) == ["static-a", "static-b"], description
    assert description.state.name == "STABLE", description

    # Restarted within the session timeout with the same instance id: same partitions, no rebalance.
    a2 = Member("a2", make_member(group, **{"group.instance.id": "static-a"}))
    a2.subscribe(topic)
    poll_until([a2, b], lambda: a2.partitions() == owned_a, ASSIGN_TIMEOUT_S, "restarted static member gets its partitions")
    poll_for([a2, b], 2.0)  # a rebalance of b would show up in its callbacks by now
    assert b.events == b_events, f"b saw a rebalance when static member a restarted: {b}"
    assert b.partitions() == owned_b

    produced = produce_per_partition(producer, topic, 5, "after-restart")
    poll_until([a2, b], lambda: len(a2.received) + len(b.received) >= len(produced), 30, "records after the restart")
    assert {p for p, _ in a2.received} == owned_a
    assert {p for p, _ in b.received} == owned_b

    # A second consumer with a live member's instance id replaces it; the first is fenced.
    a3 = Member("a3", make_member(group, **{"group.instance.id": "static-a"}))
    a3.subscribe(topic)
    poll_until([a3], lambda: a3.partitions() == owned_a, ASSIGN_TIMEOUT_S, "the new static-a gets a's partitions")

    def a2_fenced() -> bool:
        return any(e.code() == KafkaError.FENCED_INSTANCE_ID or "fenced" in str(e).lower() for e in a2.errors)

    poll_until([a2, a3, b], a2_fenced, SESSION_TIMEOUT_MS / 1000 + 10, "a2 fenced (FENCED_INSTANCE_ID)")
    fenced = next(e for e in a2.errors if e.code() == KafkaError.FENCED_INSTANCE_ID or "fenced" in str(e).lower())
    # librdkafka raises it as a fatal error: the consumer is unusable from now on.
    assert fenced.code() == KafkaError._FATAL or fenced.fatal(), f"expected a fatal error, got {fenced}"
    assert b.events == b_events, f"b saw a rebalance when static-a was replaced: {b}"
    assert b.partitions() == owned_b


# Run in a child process so that SIGSTOP silences its heartbeats (librdkafka heartbeats from a background thread).
STOPPABLE_MEMBER = r"""
import json, sys
from confluent_kafka import Consumer
config = json.loads(sys.argv[1])
topic = sys.argv[2]
c = Consumer(config)
def report(kind, tps):
    print(json.dumps([kind, sorted(tp.partition for tp in tps)]), flush=True)
c.subscribe([topic], on_assign=lambda _c, tps: report("assign", tps), on_revoke=lambda _c, tps: report("revoke", tps))
while True:
    c.poll(0.1)
"""


def test_member_that_stops_heartbeating_is_removed_after_session_timeout(
    bootstrap, make_producer, make_member, create_topic, topic_name
):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    a = Member("a", make_member(group))
    a.subscribe(topic)

    child = subprocess.Popen(
        [sys.executable, "-c", STOPPABLE_MEMBER, json.dumps(group_config(bootstrap, group)), topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()
    child_partitions: set[int] = set()

    def child_has_half() -> bool:
        nonlocal child_partitions
        while not lines.empty():
            kind, parts = json.loads(lines.get())
            child_partitions = set(parts) if kind == "assign" else set()
        return len(child_partitions) == PARTITIONS // 2 and a.partitions() == set(range(PARTITIONS)) - child_partitions

    try:
        poll_until([a], child_has_half, ASSIGN_TIMEOUT_S, f"a and the child split the topic (child: {child_partitions})")
        owned_a = a.partitions()
        poll_for([a], 1.0)  # let the child send a heartbeat of the stable generation

        os.kill(child.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        # Before the session timeout the stopped member is still in the group.
        poll_for([a], SESSION_TIMEOUT_MS / 1000 - HEARTBEAT_INTERVAL_MS / 1000 - 1.5)
        assert a.partitions() == owned_a, f"a's assignment changed {time.monotonic() - stopped:.1f}s after the stop: {a}"
        poll_until([a], lambda: a.partitions() == set(range(PARTITIONS)), SESSION_TIMEOUT_MS / 1000 + 15, "a takes every partition")
        moved_after_s = time.monotonic() - stopped
        assert SESSION_TIMEOUT_MS / 1000 - 1.5 <= moved_after_s <= SESSION_TIMEOUT_MS / 1000 + 10, moved_after_s

        produced = produce_per_partition(make_producer(), topic, 3, "after")
        poll_until([a], lambda: {p for p, _ in a.received} == set(range(PARTITIONS)) and len(a.received) >= len(produced), 30, "a reads every partition")
    finally:
        child.kill()
        child.wait(timeout=10)


def test_member_that_stops_polling_leaves_after_max_poll_interval(
    bootstrap, make_member, create_topic, topic_name
):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    # librdkafka needs max.poll.interval.ms >= session.timeout.ms.
    a = Member("a", make_member(group, **{"max.poll.interval.ms": 7000}))
    b = Member("b", make_member(group, **{"max.poll.interval.ms": 7000}))
    for m in (a, b):
        m.subscribe(topic)
    poll_until([a, b], lambda: split_evenly([a, b]), ASSIGN_TIMEOUT_S, "2 members x 3 partitions")
    owned_b = b.partitions()
    stopped = time.monotonic()
    # Only a polls from now on; b's background thread keeps heartbeating, then leaves at 7 s.
    poll_until([a], lambda: a.partitions() == set(range(PARTITIONS)), 7 + 15, "a takes every partition after b's max.poll.interval.ms")
    assert time.monotonic() - stopped >= 5.0
    b.poll_once(timeout_s=1.0)
    assert any(e.code() == KafkaError._MAX_POLL_EXCEEDED for e in b.errors), b
    assert owned_b <= a.partitions()


def test_java_cooperative_sticky_incremental_rebalance(java_build, bootstrap, topic_name):  # noqa: F811
    assert probe("cooperative", bootstrap, topic_name("java")) == [
        "a alone: owns 6 partitions",
        "b joins: a revoked 3 (exactly what b owns), kept 3, lost 0; b revoked 0",
        "partitions assigned twice: 0",
        "consumed 30 records, each member from exactly the partitions it owns",
    ]
