"""Consuming and administering from SQL: read, consume, the views, create/delete topics (docs/sql.md).

- `kafgres.read()` / `read_text()` return what Kafka producers wrote (key,
  value, headers, timestamp) by offset range and by time range;
- `kafgres.consume()` moves the group's committed offsets in the caller's
  transaction: rollback re-delivers, commit moves on, a business write in the
  same transaction commits or rolls back with it; two sessions of one group
  never get the same record; a group with a live Kafka member is refused, and
  a Kafka client's committed offsets are where SQL continues (and back);
  `wait` long-polls until a record arrives;
- `kafgres.partition_status`, `consumer_lag` and `consumer_groups` agree with
  what Kafka clients see;
- `create_topic`, `add_partitions` and `delete_topic` act on the broker at
  once (not at commit), as Kafka clients see.

Records are produced with confluent-kafka (acks=all), so they are in the log
before any SQL reads them; every wait has a deadline.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import datetime, timezone

import psycopg
import pytest
from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from support import produce_all, wait_for_topic_metadata

BASE_TS_MS = 1_700_000_000_000


def group_name() -> str:
    return f"e2e-sql-group-{uuid.uuid4().hex[:10]}"


def sql_create_topic(conn, name: str, partitions: int, admin) -> uuid.UUID:
    topic_id = conn.execute("select kafgres.create_topic(%s, %s)", (name, partitions)).fetchone()[0]
    wait_for_topic_metadata(admin, name, partitions)
    return topic_id


def produce_numbered(make_producer, topic: str, partition: int, count: int, start: int = 0) -> list:
    """Produces records value 'p<partition>-<i>', key 'k<i>', timestamp BASE + i seconds, one header."""
    records = [
        dict(
            topic=topic,
            partition=partition,
            key=f"k{i}".encode(),
            value=f"p{partition}-{i}".encode(),
            timestamp=BASE_TS_MS + i * 1000,
            headers=[("seq", str(i).encode()), ("nothing", None)],
        )
        for i in range(start, start + count)
    ]
    return produce_all(make_producer({"acks": "all"}), records)


def offsets_of(rows) -> list[tuple[int, int]]:
    return [(r[0], r[1]) for r in rows]


def high_watermark(make_consumer, topic: str, partition: int) -> int:
    _, high = make_consumer().get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    return high


# --- read ------------------------------------------------------------------------------------

def test_read_by_offsets_and_time(pg_connect, admin, topic_name, make_producer):
    conn = pg_connect(autocommit=True)
    topic = topic_name()
    sql_create_topic(conn, topic, 2, admin)
    produce_numbered(make_producer, topic, 0, 10)
    binary = bytes(range(256))
    produce_all(make_producer(), [dict(topic=topic, partition=1, key=b"\x00\xff", value=binary)])

    rows = conn.execute('select partition, "offset", "timestamp", key, value, headers from kafgres.read(%s, 0)', (topic,)).fetchall()
    assert [r[1] for r in rows] == list(range(10))
    for i, (partition, offset, ts, key, value, headers) in enumerate(rows):
        assert (partition, key, value) == (0, f"k{i}".encode(), f"p0-{i}".encode())
        assert ts == datetime.fromtimestamp((BASE_TS_MS + i * 1000) / 1000, timezone.utc)
        assert headers == [["seq", str(i)], ["nothing", None]]

    ranged = conn.execute('select "offset", value from kafgres.read(%s, 0, 3, 4)', (topic,)).fetchall()
    assert ranged == [(i, f"p0-{i}".encode()) for i in range(3, 7)]
    tail = conn.execute('select "offset" from kafgres.read(%s, 0, 8, 100)', (topic,)).fetchall()
    assert tail == [(8,), (9,)]
    assert conn.execute('select count(*) from kafgres.read(%s, 0, 10)', (topic,)).fetchone()[0] == 0

    # Paging through with max_records visits every offset once.
    seen, next_offset = [], 0
    for _ in range(10):
        page = conn.execute('select "offset" from kafgres.read(%s, 0, %s, 3)', (topic, next_offset)).fetchall()
        if not page:
            break
        assert len(page) <= 3
        seen += [r[0] for r in page]
        next_offset = page[-1][0] + 1
    assert seen == list(range(10))

    [(key, value)] = conn.execute("select key, value from kafgres.read(%s, 1)", (topic,)).fetchall()
    assert (bytes(key), bytes(value)) == (b"\x00\xff", binary)

    text_rows = conn.execute('select "offset", key, value from kafgres.read_text(%s, 0, 5, 2)', (topic,)).fetchall()
    assert text_rows == [(5, "k5", "p0-5"), (6, "k6", "p0-6")]

    # By time: from_time inclusive, to_time exclusive.
    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(BASE_TS_MS / 1000 + seconds, timezone.utc)

    by_time = conn.execute('select "offset" from kafgres.read(%s, 0, %s::timestamptz, %s::timestamptz)', (topic, at(3), at(6))).fetchall()
    assert [r[0] for r in by_time] == [3, 4, 5]
    open_ended = conn.execute('select "offset" from kafgres.read(%s, 0, %s::timestamptz)', (topic, at(6.5))).fetchall()
    assert [r[0] for r in open_ended] == [7, 8, 9]
    assert conn.execute("select count(*) from kafgres.read(%s, 0, %s::timestamptz)", (topic, at(60))).fetchone()[0] == 0


def test_read_errors(pg_connect, admin, topic_name):
    conn = pg_connect()
    topic = topic_name()
    sql_create_topic(conn, topic, 1, admin)
    conn.commit()
    for sqlstate, query, params in [
        ("42704", "select * from kafgres.read(%s, 0)", (topic_name("missing"),)),
        ("42704", "select * from kafgres.read(%s, 1)", (topic,)),
        ("22023", "select * from kafgres.read(%s, 0, -1)", (topic,)),
        ("22023", "select * from kafgres.read(%s, 0, 0, 0)", (topic,)),
    ]:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(query, params)
        assert info.value.sqlstate == sqlstate, f"{query} {params}: {info.value.sqlstate} {info.value}"
        assert info.value.diag.message_hint, f"{query}: no hint"
        conn.rollback()
    assert conn.execute("select count(*) from kafgres.read(%s, 0)", (topic,)).fetchone()[0] == 0


# --- consume ---------------------------------------------------------------------------------

def committed_offsets(conn, group: str, topic: str) -> dict[int, int]:
    rows = conn.execute(
        'select partition, committed_offset from kafgres.consumer_offsets where group_id = %s and topic = %s',
        (group, topic),
    ).fetchall()
    return dict(rows)


def test_consume_moves_offsets_only_on_commit(pg_connect, admin, topic_name, make_producer):
    conn = pg_connect()
    observer = pg_connect(autocommit=True)
    topic = topic_name()
    sql_create_topic(conn, topic, 1, admin)
    conn.commit()
    produce_numbered(make_producer, topic, 0, 10)
    group = group_name()
    table = f"e2e_sql_consume_{uuid.uuid4().hex[:8]}"
    conn.execute(f"create table {table}(value text primary key)")
    conn.commit()
    try:
        consume_into_table = f"with r as (select * from kafgres.consume_text(%s, %s, %s)) insert into {table} select value from r"

        first = conn.execute('select "offset", value from kafgres.consume_text(%s, %s, 4)', (group, topic)).fetchall()
        assert first == [(i, f"p0-{i}") for i in range(4)]
        conn.execute(f"insert into {table} select unnest(%s::text[])", ([v for _, v in first],))
        assert committed_offsets(observer, group, topic).get(0) is None, "uncommitted offsets are visible outside"
        conn.rollback()

        again = conn.execute('select "offset", value from kafgres.consume_text(%s, %s, 4)', (group, topic)).fetchall()
        assert again == first, "a rolled-back consume must re-deliver the same records"
        conn.execute(f"insert into {table} select unnest(%s::text[])", ([v for _, v in again],))
        conn.commit()
        assert committed_offsets(observer, group, topic) == {0: 4}
        assert observer.execute(f"select count(*) from {table}").fetchone()[0] == 4

        rest = conn.execute('select "offset" from kafgres.consume(%s, %s, 100)', (group, topic)).fetchall()
        assert [r[0] for r in rest] == list(range(4, 10))
        conn.commit()
        assert committed_offsets(observer, group, topic) == {0: 10}
        assert conn.execute("select count(*) from kafgres.consume(%s, %s)", (group, topic)).fetchone()[0] == 0
        conn.commit()

        # A failed business write rolls the consume back with it.
        produce_numbered(make_producer, topic, 0, 1, start=0)  # value 'p0-0' again: the insert will conflict
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(consume_into_table, (group, topic, 10))
        conn.rollback()
        assert committed_offsets(observer, group, topic) == {0: 10}
        [(offset, value)] = conn.execute('select "offset", value from kafgres.consume_text(%s, %s)', (group, topic)).fetchall()
        assert (offset, value) == (10, "p0-0")
        conn.commit()
        assert committed_offsets(observer, group, topic) == {0: 11}
    finally:
        conn.rollback()
        conn.execute(f"drop table {table}")
        conn.commit()


def test_consume_spans_partitions_and_keeps_order(pg_connect, admin, topic_name, make_producer):
    conn = pg_connect()
    topic = topic_name()
    sql_create_topic(conn, topic, 3, admin)
    conn.commit()
    counts = {0: 7, 1: 0, 2: 12}
    for p, n in counts.items():
        if n:
            produce_numbered(make_producer, topic, p, n)
    group = group_name()
    got: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for _ in range(20):
        rows = conn.execute('select partition, "offset", value from kafgres.consume(%s, %s, 5)', (group, topic)).fetchall()
        conn.commit()
        if not rows:
            break
        assert len(rows) <= 5
        for p, offset, value in rows:
            assert bytes(value) == f"p{p}-{offset}".encode()
            got[p].append(offset)
    assert got == {p: list(range(n)) for p, n in counts.items()}


def test_concurrent_consumers_never_share_a_record(pg_connect, admin, topic_name, make_producer):
    topic = topic_name()
    setup = pg_connect(autocommit=True)
    sql_create_topic(setup, topic, 4, admin)
    per_partition = 60
    for p in range(4):
        produce_numbered(make_producer, topic, p, per_partition)
    group = group_name()

    results: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    errors: list[str] = []
    deadline = time.monotonic() + 60

    def worker(name: str) -> None:
        conn = pg_connect()
        empty_rounds = 0
        try:
            while time.monotonic() < deadline and empty_rounds < 50:
                rows = conn.execute('select partition, "offset" from kafgres.consume(%s, %s, 7)', (group, topic)).fetchall()
                conn.commit()
                if rows:
                    results[name] += rows
                    empty_rounds = 0
                elif sum(len(r) for r in results.values()) >= 4 * per_partition:
                    return
                else:
                    empty_rounds += 1
        except psycopg.Error as e:
            errors.append(f"{name}: {e.sqlstate} {e}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "a consumer thread is stuck"
    assert not errors, errors
    a, b = set(results["a"]), set(results["b"])
    assert len(a) == len(results["a"]) and len(b) == len(results["b"]), "a session got a record twice"
    assert not a & b, f"records delivered to both sessions: {sorted(a & b)[:10]}"
    assert a | b == {(p, o) for p in range(4) for o in range(per_partition)}


def test_open_consume_locks_its_partitions(pg_connect, admin, topic_name, make_producer):
    """While session A's consume is uncommitted, B (same group) skips A's partition instead of re-reading it."""
    topic = topic_name()
    a = pg_connect()
    b = pg_connect()
    sql_create_topic(a, topic, 1, admin)
    a.commit()
    group = group_name()
    # The group exists (a committed consume of the empty topic) before the two sessions meet.
    assert a.execute("select count(*) from kafgres.consume(%s, %s)", (group, topic)).fetchone()[0] == 0
    a.commit()
    produce_numbered(make_producer, topic, 0, 6)

    got_a = a.execute('select "offset" from kafgres.consume(%s, %s, 3)', (group, topic)).fetchall()
    assert got_a == [(0,), (1,), (2,)]
    b.execute("set statement_timeout = '5s'")
    try:
        got_b = b.execute('select "offset" from kafgres.consume(%s, %s, 3)', (group, topic)).fetchall()
    except psycopg.errors.QueryCanceled:
        pytest.fail("B's consume waited for A's transaction to end instead of skipping A's partition")
    assert got_b == [], f"B got {got_b} while A holds the partition"
    b.commit()
    a.commit()
    got_b = b.execute('select "offset" from kafgres.consume(%s, %s, 3)', (group, topic)).fetchall()
    assert got_b == [(3,), (4,), (5,)]
    b.commit()


def test_consume_wait_returns_when_a_record_arrives(pg_connect, admin, topic_name, make_producer):
    topic = topic_name()
    conn = pg_connect()
    observer = pg_connect(autocommit=True)
    sql_create_topic(conn, topic, 1, admin)
    conn.commit()
    group = group_name()
    backend_pid = conn.info.backend_pid

    # No record: it returns empty once the wait is over.
    started = time.monotonic()
    assert conn.execute("select count(*) from kafgres.consume(%s, %s, 10, wait => '300 ms')", (group, topic)).fetchone()[0] == 0
    assert time.monotonic() - started >= 0.25, "consume returned before its wait was over"
    conn.commit()

    result: list = []
    errors: list = []

    def waiting_consume():
        try:
            result.extend(conn.execute(
                "select \"offset\", value from kafgres.consume_text(%s, %s, 10, wait => '20 seconds')", (group, topic)
            ).fetchall())
            conn.commit()
        except psycopg.Error as e:
            errors.append(e)

    thread = threading.Thread(target=waiting_consume)
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        [(state, query)] = observer.execute("select state, query from pg_stat_activity where pid = %s", (backend_pid,)).fetchall()
        if state == "active" and "consume_text" in query:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the waiting consume never became active")
    produced_at = time.monotonic()
    produce_all(make_producer({"acks": "all", "linger.ms": 0}), [dict(topic=topic, partition=0, value=b"wake up")])
    thread.join(30)
    assert not thread.is_alive(), "consume with wait never returned"
    assert not errors, errors
    assert result == [(0, "wake up")]
    assert time.monotonic() - produced_at < 15, "consume returned only when its 20 s wait ran out, not on arrival"
    assert committed_offsets(observer, group, topic) == {0: 1}


def test_group_with_live_kafka_member_is_refused(pg_connect, admin, bootstrap, topic_name, make_producer):
    topic = topic_name()
    conn = pg_connect()
    sql_create_topic(conn, topic, 1, admin)
    conn.commit()
    produce_numbered(make_producer, topic, 0, 10)
    group = group_name()

    member = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
    })
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        first = None
        while first is None and time.monotonic() < deadline:
            msg = member.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg
        assert first is not None, "the Kafka member never received a record"
        member.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)

        [(state, protocol_type, members)] = conn.execute(
            "select state, protocol_type, members from kafgres.consumer_groups where group_id = %s", (group,)
        ).fetchall()
        assert (state, protocol_type, members) == ("Stable", "consumer", 1)

        with pytest.raises(psycopg.Error) as info:
            conn.execute("select * from kafgres.consume(%s, %s)", (group, topic))
        assert info.value.sqlstate == "55006", f"{info.value.sqlstate}: {info.value}"
        assert group in str(info.value) and info.value.diag.message_hint
        conn.rollback()
    finally:
        member.close()  # LeaveGroup

    [(state, members)] = conn.execute(
        "select state, members from kafgres.consumer_groups where group_id = %s", (group,)
    ).fetchall()
    assert (state, members) == ("Empty", 0)
    conn.commit()
    # SQL continues where the Kafka member committed.
    rows = conn.execute('select "offset" from kafgres.consume(%s, %s, 4)', (group, topic)).fetchall()
    assert rows == [(3,), (4,), (5,), (6,)]
    conn.commit()

    # And a Kafka client of the group continues where SQL committed.
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [committed] = reader.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 7
    finally:
        reader.close()


def test_consume_errors(pg_connect, admin, topic_name):
    conn = pg_connect()
    topic = topic_name()
    sql_create_topic(conn, topic, 1, admin)
    conn.commit()
    group = group_name()
    for sqlstate, query, params in [
        ("42704", "select * from kafgres.consume(%s, %s)", (group, topic_name("missing"))),
        ("22023", "select * from kafgres.consume(%s, %s, 0)", (group, topic)),
        ("22023", "select * from kafgres.consume(%s, %s, 10, wait => '-1 second')", (group, topic)),
    ]:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(query, params)
        assert info.value.sqlstate == sqlstate, f"{query} {params}: {info.value.sqlstate} {info.value}"
        conn.rollback()
    assert conn.execute("select count(*) from kafgres.consume(%s, %s)", (group, topic)).fetchone()[0] == 0


# --- views -----------------------------------------------------------------------------------

def test_partition_status_and_consumer_lag(pg_connect, admin, bootstrap, topic_name, make_producer, make_consumer):
    conn = pg_connect(autocommit=True)
    topic = topic_name()
    sql_create_topic(conn, topic, 3, admin)
    counts = [9, 4, 0]
    for p, n in enumerate(counts):
        if n:
            produce_numbered(make_producer, topic, p, n)

    status = conn.execute(
        "select partition, log_start_offset, log_end_offset, size_bytes from kafgres.partition_status"
        " where topic = %s order by partition", (topic,)
    ).fetchall()
    assert [(p, s, e) for p, s, e, _ in status] == [(p, 0, n) for p, n in enumerate(counts)]
    for p, _, _, size in status:
        assert high_watermark(make_consumer, topic, p) == counts[p]
    sizes = {p: size for p, _, _, size in status}
    assert sizes[0] > sizes[2] and sizes[1] > sizes[2], f"partitions with records should be larger: {sizes}"

    # DeleteRecords moves the log start; the view follows.
    for future in admin.delete_records([TopicPartition(topic, 0, 5)], request_timeout=15).values():
        future.result(20)
    [(start,)] = conn.execute(
        "select log_start_offset from kafgres.partition_status where topic = %s and partition = 0", (topic,)
    ).fetchall()
    assert start == 5

    # Lag of a group consumed from SQL to the end...
    sql_group = group_name()
    consumed = 0
    for _ in range(10):
        n = conn.execute("select count(*) from kafgres.consume(%s, %s, 100)", (sql_group, topic)).fetchone()[0]
        if n == 0:
            break
        consumed += n
    assert consumed == 4 + 4, "records 5..8 of partition 0 and 0..3 of partition 1"
    # ...and of a group that a Kafka client committed for.
    kafka_group = group_name()
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": kafka_group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 6), TopicPartition(topic, 1, 1)], asynchronous=False)
    finally:
        committer.close()

    lag = conn.execute(
        "select group_id, partition, committed_offset, log_end_offset, lag from kafgres.consumer_lag"
        " where topic = %s order by group_id, partition", (topic,)
    ).fetchall()
    by_group: dict[str, list] = {}
    for group, partition, committed, end, behind in lag:
        by_group.setdefault(group, []).append((partition, committed, end, behind))
        # -1 is "nothing committed yet" (a partition the group never got a
        # record from): its lag counts from the log start, 0 for these.
        assert behind == (end - committed if committed >= 0 else end)
    assert by_group[kafka_group] == [(0, 6, 9, 3), (1, 1, 4, 3)]
    sql_rows = {p: (c, e, l) for p, c, e, l in by_group[sql_group]}
    assert sql_rows[0] == (9, 9, 0) and sql_rows[1] == (4, 4, 0), f"SQL group lag: {by_group[sql_group]}"
    assert sql_rows.get(2, (0, 0, 0))[2] == 0

    # More records: the lag grows by exactly that many.
    produce_numbered(make_producer, topic, 1, 5, start=4)
    [(end, behind)] = conn.execute(
        "select log_end_offset, lag from kafgres.consumer_lag where group_id = %s and topic = %s and partition = 1",
        (kafka_group, topic),
    ).fetchall()
    assert (end, behind) == (9, 8)


# --- administration --------------------------------------------------------------------------

def test_create_alter_delete_topic_from_sql(pg_connect, admin, topic_name, make_producer, consume):
    conn = pg_connect()
    name = topic_name()

    topic_id = conn.execute(
        "select kafgres.create_topic(%s, 3, '{\"retention.ms\": \"3600000\"}')", (name,)
    ).fetchone()[0]
    # Effective at once, not at commit: a rollback does not undo it.
    conn.rollback()
    wait_for_topic_metadata(admin, name, 3)
    [(catalog_id, count)] = conn.execute(
        "select topic_id, partition_count from kafgres.topics where name = %s", (name,)
    ).fetchall()
    assert (catalog_id, count) == (topic_id, 3)
    description = admin.describe_topics(TopicCollection([name]), request_timeout=15)[name].result(20)
    msb = description.topic_id.get_most_significant_bits() & ((1 << 64) - 1)
    lsb = description.topic_id.get_least_significant_bits() & ((1 << 64) - 1)
    assert uuid.UUID(int=(msb << 64) | lsb) == topic_id
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource], request_timeout=15)[resource].result(20)
    assert configs["retention.ms"].value == "3600000"

    with pytest.raises(psycopg.Error) as info:
        conn.execute("select kafgres.create_topic(%s, 1)", (name,))
    assert info.value.sqlstate == "42710"
    conn.rollback()

    conn.execute("select kafgres.add_partitions(%s, 5)", (name,))
    conn.commit()
    wait_for_topic_metadata(admin, name, 5)
    assert conn.execute("select partition_count from kafgres.topics where name = %s", (name,)).fetchone()[0] == 5
    assert conn.execute("select kafgres.send(%s, 'to the new partition'::text, partition => 4)", (name,)).fetchone()[0] == 4
    conn.commit()
    [m] = consume(name, 4, 1)
    assert m.value() == b"to the new partition"

    with pytest.raises(psycopg.Error) as info:
        conn.execute("select kafgres.add_partitions(%s, 2)", (name,))
    assert info.value.sqlstate == "22023", "partitions can only be added"
    conn.rollback()

    conn.execute("select kafgres.delete_topic(%s)", (name,))
    conn.commit()
    deadline = time.monotonic() + 15
    while name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert name not in admin.list_topics(timeout=10).topics
    assert conn.execute("select count(*) from kafgres.topics where name = %s", (name,)).fetchone()[0] == 0
    assert conn.execute("select count(*) from kafgres.partition_status where topic = %s", (name,)).fetchone()[0] == 0
    with pytest.raises(psycopg.Error) as info:
        conn.execute("select kafgres.send(%s, 'v'::text)", (name,))
    assert info.value.sqlstate == "42704"
    conn.rollback()
    with pytest.raises(psycopg.Error) as info:
        conn.execute("select kafgres.delete_topic(%s)", (name,))
    assert info.value.sqlstate == "42704"
    conn.rollback()


def test_create_topic_errors(pg_connect, topic_name):
    conn = pg_connect()
    for query, params in [
        ("select kafgres.create_topic('bad name!', 1)", ()),
        ("select kafgres.create_topic(%s, 0)", (topic_name("zero"),)),
        ("select kafgres.create_topic(%s, 1, '{\"no.such.config\": \"1\"}')", (topic_name("cfg"),)),
    ]:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(query, params)
        assert info.value.sqlstate == "22023", f"{query}: {info.value.sqlstate} {info.value}"
        assert info.value.diag.message_hint
        conn.rollback()
