"""Failover to a Postgres standby (issue 19, docs/replication.md).

Two throwaway clusters on 127.0.0.1 (Postgres 5481/5482, Kafka 9481/9482)
take turns: one is the primary, the other its hot standby made by
pg_basebackup -R, whose broker copies the topic data from the primary's.
Clients know both (`bootstrap.servers` lists the two) and are never
restarted.

Synchronous (the primary names the standby in synchronous_standby_names):
while an idempotent producer, a transactional producer and a group consumer
run, the primary is killed with SIGKILL (postmaster and children), the
standby promoted, the old primary rewound (pg_rewind) and started as the new
standby; ten times, alternating. Then every acknowledged record is on the
last primary exactly once, in order and at the offset it was acknowledged
at; every committed transaction whole, none in part; every committed
`kafgres.send` exactly once; the consumers' committed offsets (Kafka's and
`kafgres.consume`'s) not behind what was acknowledged.

Asynchronous (no synchronous_standby_names): the standby's broker is held
back (SIGSTOP) while acks=all records are acknowledged, the primary killed
and the standby promoted: the records lost are counted and reported, and a
consumer that had read them sees the truncation (librdkafka's leader-epoch
validation), never two different records at one offset without it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from failover_support import Node, node_pair, wait_until_caught_up

NODES = (("node_a", 5481, 9481, 1), ("node_b", 5482, 9482, 2))
BOOTSTRAP = ",".join(f"127.0.0.1:{kafka}" for _, _, kafka, _ in NODES)
FAILOVERS = 10
READY_TIMEOUT_S = 90.0
IDEM_TOPIC, TXN_TOPIC, SQL_TOPIC = "fo-idem", "fo-txn", "fo-sql"


@pytest.fixture
def pair():
    with node_pair(NODES, READY_TIMEOUT_S) as nodes:
        yield nodes


def make_standby(primary: Node, standby: Node) -> None:
    standby.copy_of(primary)
    standby.start()
    standby.wait_for_role("standby", READY_TIMEOUT_S)


def create_topics(node: Node, topics: dict[str, int], config: dict[str, str] | None = None) -> None:
    """Creates the topics on `node`; a failure says what the node's server log says (the pair's
    directories are gone once the test ends)."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1, config=config or {})
                                   for t, n in topics.items()])
    for topic, f in futures.items():
        try:
            f.result(30)
        except Exception as err:  # noqa: BLE001 - any failure, reported with the log that explains it
            pytest.fail(f"creating {topic} on {node.name} failed: {err!r}\n{node.log_tail(80)}")


# --- the workload --------------------------------------------------------------


@dataclass
class Acked:
    lock: threading.Lock = field(default_factory=threading.Lock)
    records: list[tuple[int, int, str]] = field(default_factory=list)  # partition, offset, value
    failed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class IdempotentProducer(threading.Thread):
    def __init__(self, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stop = stop
        self.acked = Acked()
        self.sent = 0
        self.producer = Producer({
            "bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 180_000, "error_cb": self.on_error,
        })

    def on_error(self, err: KafkaError) -> None:
        with self.acked.lock:
            self.acked.errors.append(f"{err.code()}: {err.str()} fatal={err.fatal()}")

    def on_delivery(self, err, msg) -> None:
        with self.acked.lock:
            if err is None:
                self.acked.records.append((msg.partition(), msg.offset(), msg.value().decode()))
            else:
                self.acked.failed.append((msg.value().decode(), str(err)))

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            value = f"{n:08d}"
            try:
                self.producer.produce(IDEM_TOPIC, value.encode(), partition=n % 2, on_delivery=self.on_delivery)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.003)
        self.sent = n
        self.producer.flush(120)


class TransactionalProducer(threading.Thread):
    RECORDS = 4

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stop = stop
        self.committed: list[int] = []
        self.unknown: list[int] = []
        self.aborted: list[int] = []
        self.errors: list[str] = []
        self.producer = self.new_producer()

    def new_producer(self) -> Producer:
        p = Producer({
            "bootstrap.servers": BOOTSTRAP, "transactional.id": "fo-txn", "linger.ms": 1,
            "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000,
        })
        p.init_transactions(120)
        return p

    def run(self) -> None:
        txn = 0
        while not self.stop.is_set():
            try:
                self.producer.begin_transaction()
                for i in range(self.RECORDS):
                    self.producer.produce(TXN_TOPIC, f"t{txn}-{i}".encode(), partition=0)
                self.producer.commit_transaction(60)
                self.committed.append(txn)
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(f"txn {txn}: {err.str()} retriable={err.retriable()} abort={err.txn_requires_abort()}")
                if err.txn_requires_abort():
                    self.try_abort(txn)
                elif err.fatal():
                    self.unknown.append(txn)
                    self.producer = self.new_producer()
                else:
                    # A commit whose answer was lost: it may have committed.
                    self.unknown.append(txn)
                    self.try_abort(txn, unknown=True)
            txn += 1
            time.sleep(0.02)

    def try_abort(self, txn: int, unknown: bool = False) -> None:
        try:
            self.producer.abort_transaction(60)
            if not unknown:
                self.aborted.append(txn)
        except KafkaException as e:
            self.errors.append(f"abort {txn}: {e.args[0].str()}")
            if not unknown:
                self.unknown.append(txn)
            self.producer = self.new_producer()


class GroupConsumer(threading.Thread):
    def __init__(self, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stop = stop
        self.values: list[str] = []
        self.commits: list[dict[int, int]] = []  # acknowledged commits, in order
        self.errors: list[str] = []
        self.consumer = Consumer({
            "bootstrap.servers": BOOTSTRAP, "group.id": "fo-group", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 45_000, "error_cb": self.on_error,
        })
        self.consumer.subscribe([IDEM_TOPIC])

    def on_error(self, err: KafkaError) -> None:
        self.errors.append(f"{err.code()}: {err.str()}")

    def run(self) -> None:
        last_commit = time.monotonic()
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if m is not None and not m.error():
                self.values.append(m.value().decode())
            if time.monotonic() - last_commit > 0.5:
                last_commit = time.monotonic()
                try:
                    done = self.consumer.commit(asynchronous=False)
                    self.commits.append({tp.partition: tp.offset for tp in done if tp.error is None})
                except KafkaException as e:
                    self.errors.append(f"commit: {e.args[0].str()}")
        self.consumer.close()


class SqlWork:
    """Sends from SQL in committed transactions, and a SQL consumer whose offsets commit with its writes."""

    def __init__(self) -> None:
        self.committed: list[str] = []
        self.consumed = 0
        self.batch = 0

    @staticmethod
    def setup(node: Node) -> None:
        node.sql("CREATE TABLE fo_consumed (value text PRIMARY KEY, consumed_at timestamptz DEFAULT now())")

    def send(self, node: Node, count: int = 5) -> None:
        values = [f"s{self.batch}-{i}" for i in range(count)]
        with psycopg.connect(node.conninfo) as conn:
            for v in values:
                conn.execute("SELECT kafgres.send(%s, %s::text)", (SQL_TOPIC, v))
            conn.commit()
        self.batch += 1
        self.committed.extend(values)

    def consume(self, node: Node) -> int:
        """One transaction: the group's next records into fo_consumed (a record consumed twice breaks its key)."""
        with psycopg.connect(node.conninfo) as conn:
            rows = conn.execute(
                "INSERT INTO fo_consumed (value) SELECT value FROM kafgres.consume_text('fo-sqlc', %s, 100) "
                "RETURNING value",
                (SQL_TOPIC,),
            ).fetchall()
            conn.commit()
        self.consumed += len(rows)
        return len(rows)


# --- reading the final state ----------------------------------------------------


def read_all(bootstrap: str, topic: str, partition: int, isolation: str = "read_uncommitted") -> list[tuple[int, str]]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"fo-check-{topic}", "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, low)])
        seen: list[tuple[int, str]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append((m.offset(), m.value().decode()))
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= high:
                break
        return seen
    finally:
        consumer.close()


def failover(primary: Node, standby: Node, sql: SqlWork | None) -> float:
    """Kills `primary`, promotes `standby`; returns seconds from the promote command to the first acks=all produce
    the new primary took."""
    # The new primary runs without a synchronous standby until the old one is back (as a Postgres operator does).
    standby.set_sync_names("")
    if sql is not None:
        sql.send(primary)  # committed on both (synchronous) just before the crash
    primary.kill_everything()
    started = time.monotonic()
    standby.promote()
    probe = Producer({"bootstrap.servers": standby.bootstrap, "acks": "all", "message.timeout.ms": 30_000})
    acked: list[bool] = []
    probe.produce("fo-probe", b"first", on_delivery=lambda err, msg: acked.append(err is None))
    probe.flush(30)
    first_produce = time.monotonic() - started
    assert acked == [True], f"the promoted node took no produce\n{standby.log_tail()}"
    standby.wait_for_role("leader", READY_TIMEOUT_S)
    return first_produce


def rejoin(old: Node, new_primary: Node) -> None:
    old.rewind_from(new_primary)
    old.start()
    old.wait_for_role("standby", READY_TIMEOUT_S)
    new_primary.set_sync_names(old.name)
    wait_until_caught_up(new_primary, old)


def test_ten_synchronous_failovers_lose_no_acknowledged_record(pair):
    a, b = pair
    create_topics(a, {IDEM_TOPIC: 2, TXN_TOPIC: 1, SQL_TOPIC: 1, "fo-probe": 1})
    SqlWork.setup(a)
    make_standby(a, b)
    a.set_sync_names(b.name)
    wait_until_caught_up(a, b)

    stop = threading.Event()
    idem, txn, group = IdempotentProducer(stop), TransactionalProducer(stop), GroupConsumer(stop)
    sql = SqlWork()
    for t in (idem, txn, group):
        t.start()
    primary, standby = a, b
    promote_to_produce: list[float] = []
    commits_before_last_kill: list[dict[int, int]] = []
    try:
        for round_no in range(FAILOVERS):
            time.sleep(1.5)  # mid-stream
            sql.send(primary)
            sql.consume(primary)
            acked_before = len(idem.acked.records)
            commits_before_last_kill = list(group.commits)
            promote_to_produce.append(failover(primary, standby, sql))
            primary, standby = standby, primary
            time.sleep(1.0)
            sql.consume(primary)
            rejoin(standby, primary)
            deadline = time.monotonic() + 60
            while len(idem.acked.records) <= acked_before + 50:
                assert time.monotonic() < deadline, (
                    f"round {round_no}: the idempotent producer stalled: {idem.acked.errors[-5:]} "
                    f"{idem.acked.failed[-5:]}\n{primary.log_tail()}"
                )
                time.sleep(0.1)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in (idem, txn, group):
            t.join(180)

    # Every acknowledged record, exactly once, in order, at its offset.
    for partition in (0, 1):
        log = read_all(primary.bootstrap, IDEM_TOPIC, partition)
        values = [v for _, v in log]
        assert len(values) == len(set(values)), f"partition {partition}: duplicates"
        assert values == sorted(values), f"partition {partition}: out of order"
        at = dict(log)
        for p, offset, value in idem.acked.records:
            if p == partition:
                assert at.get(offset) == value, f"acknowledged {value} at {partition}/{offset}, found {at.get(offset)}"
    assert not [e for e in idem.acked.errors if "fatal=True" in e], idem.acked.errors

    # Transactions: every committed one whole, none in part, no aborted one.
    txn_values = [v for _, v in read_all(primary.bootstrap, TXN_TOPIC, 0, "read_committed")]
    assert len(txn_values) == len(set(txn_values)), "a transaction's record twice"
    by_txn: dict[int, int] = {}
    for v in txn_values:
        n = int(v[1:].split("-")[0])
        by_txn[n] = by_txn.get(n, 0) + 1
    assert all(count == TransactionalProducer.RECORDS for count in by_txn.values()), "a transaction in part"
    missing = [n for n in txn.committed if n not in by_txn]
    assert not missing, f"committed transactions lost: {missing[:10]} ({txn.errors[-5:]})"
    assert not [n for n in txn.aborted if n in by_txn], "an aborted transaction is visible"
    assert len(txn.committed) > FAILOVERS, f"the transactional producer stalled: {txn.errors[-5:]}"

    # SQL sends: every committed one exactly once.
    sql_values = [v for _, v in read_all(primary.bootstrap, SQL_TOPIC, 0)]
    assert sorted(sql_values) == sorted(sql.committed), (
        f"{len(sql.committed)} committed sends, {len(sql_values)} in the topic"
    )
    # SQL consumption: offsets committed with the writes; the rest is consumed once.
    while sql.consume(primary):
        pass
    consumed = [r[0] for r in primary.sql("SELECT value FROM fo_consumed")]
    assert sorted(consumed) == sorted(sql.committed)

    # The group's committed offsets are not behind what was acknowledged.
    stored = {p: o for p, o in primary.sql(
        "SELECT partition, committed_offset FROM kafgres.consumer_offsets WHERE group_id = 'fo-group'"
    )}
    for commit in commits_before_last_kill:
        for p, offset in commit.items():
            assert stored.get(p, -1) >= offset, f"group offset {p}: stored {stored.get(p)}, acknowledged {offset}"
    assert group.values, f"the group consumer consumed nothing: {group.errors[-5:]}"

    promote_to_produce.sort()
    print(
        f"\n{FAILOVERS} synchronous failovers: {len(idem.acked.records)} idempotent records acknowledged "
        f"({len(idem.acked.failed)} failed after retries), {len(txn.committed)} transactions committed, "
        f"{len(sql.committed)} SQL sends; promote to first produce: median {promote_to_produce[len(promote_to_produce) // 2]:.2f}s, "
        f"max {promote_to_produce[-1]:.2f}s"
    )


class Reader:
    """A consumer of fo-async that keeps what it read and the errors it was told."""

    def __init__(self, config: dict, subscribe: bool) -> None:
        self.name = config["group.id"]
        self.consumed: list[tuple[int, str]] = []
        self.events: list[str] = []
        self.consumer = Consumer({
            "bootstrap.servers": BOOTSTRAP, "enable.auto.commit": False,
            "error_cb": lambda err: self.events.append(f"error {err.code()} {err.str()}"), **config,
        })
        if subscribe:
            self.consumer.subscribe(["fo-async"])
        else:
            self.consumer.assign([TopicPartition("fo-async", 0, 0)])

    def poll(self) -> None:
        m = self.consumer.poll(0.05)
        if m is None:
            return
        if m.error():
            self.events.append(f"message error {m.error().code()} {m.error().str()}")
        else:
            self.consumed.append((m.offset(), m.value().decode()))

    def truncations(self) -> list[str]:
        return [e for e in self.events if f" {KafkaError._LOG_TRUNCATION} " in e or "runcat" in e]

    def close(self) -> None:
        self.consumer.close()


def broker_pid(node: Node) -> int:
    rows = node.sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafgres broker'")
    assert rows, "no broker process"
    return rows[0][0]


def test_an_asynchronous_failover_counts_what_it_lost_and_consumers_see_the_truncation(pair):
    a, b = pair
    create_topics(a, {"fo-async": 1, "fo-probe": 1})
    make_standby(a, b)
    wait_until_caught_up(a, b)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    acked: list[tuple[int, str]] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.value().decode()))

    def produce(prefix: str, count: int) -> None:
        nonlocal producer
        for i in range(count):
            producer.produce("fo-async", f"{prefix}{i:05d}".encode(), partition=0, on_delivery=on_delivery)
        assert producer.flush(60) == 0

    # A group member (auto.offset.reset=earliest: librdkafka seeks back to where the logs diverged) and an
    # assigned reader with auto.offset.reset=error (the truncation is an error the application gets).
    group_reader = Reader({"group.id": "fo-async-reader", "auto.offset.reset": "earliest"}, subscribe=True)
    strict_reader = Reader({"group.id": "fo-async-strict", "auto.offset.reset": "error"}, subscribe=False)

    def poll_for(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            group_reader.poll()
            strict_reader.poll()

    produce("before-", 200)
    wait_until_caught_up(a, b)
    poll_for(3)
    # kafgres.replica_partitions on the primary: the standby holds the partition to its end.
    copy = {(r["standby"], r["topic"]): r for r in a.replica_partitions()}
    row = copy.get((b.name, "fo-async"))
    assert row and row["replicated_offset"] == row["log_end_offset"] == 200 and row["lag_records"] == 0, copy
    assert row["caught_up_at"] is not None and (b.name, "fo-probe") in copy, copy
    # The standby's broker stops copying; the primary acknowledges more (asynchronous: nobody waits).
    held = broker_pid(b)
    os.kill(held, signal.SIGSTOP)
    try:
        # In batches of their own: the answer to the fetch the standby had in flight may still reach its socket
        # (and be appended once it runs again), the later batches cannot.
        for batch in range(10):
            produce(f"only-on-a-{batch}-", 10)
        poll_for(2)
        # The view shows the copy behind by the records the standby did not fetch (one fetch in flight at most).
        row = next(r for r in a.replica_partitions() if r["standby"] == b.name and r["topic"] == "fo-async")
        assert row["log_end_offset"] == 300 and row["replicated_offset"] <= 210, row
        assert row["lag_records"] == 300 - row["replicated_offset"], row
        a.kill_everything()
    finally:
        os.kill(held, signal.SIGCONT)
    b.promote()
    b.wait_for_role("leader", READY_TIMEOUT_S)
    # The idempotent producer is told that records it had acknowledged are gone (its next sequence number is
    # past the new leader's), which librdkafka reports as fatal, as against Kafka after an unclean election.
    told: list[str] = []
    producer.produce("fo-async", b"next", partition=0,
                     on_delivery=lambda err, msg: told.append(str(err) if err else "delivered"))
    try:
        producer.flush(60)
    except KafkaException as e:
        told.append(str(e))
    assert told and "OUT_OF_ORDER_SEQUENCE" in told[0], told
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    produce("after-", 150)
    log = dict(read_all(b.bootstrap, "fo-async", 0))

    def settled(reader: Reader) -> bool:
        diverged = {o for o, v in reader.consumed if log.get(o) != v}
        return bool(reader.truncations()) or {o for o, v in reader.consumed if o in diverged and log.get(o) == v} == diverged

    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not (settled(group_reader) and settled(strict_reader)):
        poll_for(0.5)
    group_reader.close()
    strict_reader.close()

    lost = [(o, v) for o, v in acked if log.get(o) != v]
    print(f"\nasynchronous failover: {len(acked)} acknowledged, {len(lost)} lost (acknowledged by the old primary "
          f"only); the strict reader was told: {strict_reader.truncations()[:1]}")
    assert all(v.startswith("only-on-a-") for _, v in lost), "a record the standby held was lost"
    assert lost, "the standby's broker was stopped, yet it holds every record: nothing was tested"
    # No silent divergence: each reader read records only the old primary had; at every such offset it then
    # read the new leader's record (it went back to where the logs diverge), or was told of the truncation.
    for reader in (group_reader, strict_reader):
        diverged = {o for o, v in reader.consumed if log.get(o) != v}
        assert diverged, f"{reader.name} did not read the records only the old primary had"
        repaired = {o for o, v in reader.consumed if o in diverged and log.get(o) == v}
        assert repaired == diverged or reader.truncations(), (
            f"{reader.name}: {len(diverged - repaired)} offsets read with another record than the leader's, "
            f"never read again and no truncation reported: {reader.events[-5:]}"
        )
    assert strict_reader.truncations(), f"auto.offset.reset=error: no LOG_TRUNCATION: {strict_reader.events}"
    # The new leader's log at each offset is one record, and the records after the failover follow it.
    after = [v for _, v in sorted(log.items()) if v.startswith("after-")]
    assert len(after) == 150


def archived_logs(directory) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log")) if directory.is_dir() else []


def archive_settled(node: Node, at_least: int) -> bool:
    (backlog, archived, failures) = node.sql(
        "SELECT backlog_segments, segments_archived, failures FROM kafgres.archive_status")[0]
    assert failures == 0, f"the archive command failed on {node.name}\n{node.log_tail()}"
    return backlog == 0 and archived >= at_least


def test_the_promoted_primary_archives_on_its_new_timeline(pair):
    """kafgres.archive_command with %t: the primary archives its closed segments under its timeline's directory;
    the standby archives nothing; once promoted, it archives every closed segment it holds (its copy of the old
    primary's included, rolled where its own appends rolled) under the new timeline's directory, and the old
    timeline's directory is left as it was."""
    import shutil
    import tempfile
    from pathlib import Path

    a, b = pair
    archive = Path(tempfile.mkdtemp(prefix="kafgres-failover-archive-"))
    try:
        shutil.chown(archive, "postgres", "postgres")
        command = f'd={archive}/%t/%f; mkdir -p "${{d%/*}}" && cp %p "$d"'
        a.sql(f"ALTER SYSTEM SET kafgres.archive_command = '{command}'", "SELECT pg_reload_conf()")
        create_topics(a, {"fo-archived": 1}, {"segment.bytes": str(1 << 20)})
        producer = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(3000):
            producer.produce("fo-archived", f"{i:05d}".encode() + b"x" * 1024, partition=0)
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 30
        while not archive_settled(a, 2):
            assert time.monotonic() < deadline, f"{a.name} did not archive\n{a.log_tail()}"
            time.sleep(0.2)
        (first_timeline,) = a.sql("SELECT timeline_id FROM pg_control_checkpoint()")[0]
        first = archived_logs(archive / str(first_timeline) / "fo-archived-0")
        assert len(first) >= 2, first

        make_standby(a, b)  # the standby's copy of the settings has the same command
        wait_until_caught_up(a, b)
        assert b.sql("SELECT segments_archived FROM kafgres.archive_status")[0][0] == 0, "a standby archived"
        a.kill_everything()
        b.promote()
        b.wait_for_role("leader", READY_TIMEOUT_S)
        (timeline,) = b.sql("SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")[0]
        assert timeline == first_timeline + 1
        # The promoted broker's archive task scans after it starts: wait for the files themselves.
        partition_dir = b.pgdata / "kafgres" / "fo-archived-0"
        deadline = time.monotonic() + 60
        while True:
            held = sorted(p.name for p in partition_dir.glob("*.log"))
            archived = archived_logs(archive / str(timeline) / "fo-archived-0")
            if archived == held[:-1] and archive_settled(b, len(held) - 1):
                break
            assert time.monotonic() < deadline, (
                f"{b.name} archived {archived} of its closed segments {held[:-1]}: "
                f"{b.sql('SELECT * FROM kafgres.archive_status')}\n{b.log_tail()}")
            time.sleep(0.2)
        assert archived_logs(archive / str(first_timeline) / "fo-archived-0") == first, "the old timeline's files"
    finally:
        shutil.rmtree(archive, ignore_errors=True)
