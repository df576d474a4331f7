"""Producing from SQL: `kafgres.send()` and `kafgres.send_batch()` (docs/sql.md).

Records sent inside a transaction reach Kafka consumers (confluent-kafka)
if and only if it commits: with the exact key, value, headers and partition;
not at all after ROLLBACK, ROLLBACK TO SAVEPOINT or an aborted PL/pgSQL
block; in commit order across sessions, with an open transaction holding
back nobody else's records. Keyed records land where librdkafka's murmur2
partitioner (Kafka's default) puts the same keys. `synchronous_commit = off`
still delivers, and a consumer already long-polling is woken by the commit.
Bad calls fail with their SQLSTATE and a hint, and leave the session usable
after ROLLBACK, with nothing of the failed transaction delivered.

Sessions are psycopg 3 connections (the `pg_connect` fixture); each test
uses fresh topics created over Kafka, and "nothing else was delivered" is
checked against the partition's high watermark after a marker record that
committed last.
"""

from __future__ import annotations

import decimal
import json
import threading
import time
import uuid

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from psycopg import sql

from support import poll_record, produce_all

WATERMARK_TIMEOUT_S = 10.0


def high_watermark(make_consumer, topic: str, partition: int) -> int:
    consumer = make_consumer()
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=WATERMARK_TIMEOUT_S)
    return high


def assert_partition_holds(consume, make_consumer, topic: str, partition: int, values: list[bytes]) -> list:
    """The partition holds exactly `values`, in order, from offset 0 (and nothing after them)."""
    received = consume(topic, partition, len(values)) if values else []
    assert [m.value() for m in received] == values
    assert [m.offset() for m in received] == list(range(len(values)))
    assert high_watermark(make_consumer, topic, partition) == len(values), (
        f"{topic}[{partition}] holds more than the {len(values)} records expected"
    )
    return received


def send_marker(conn, topic: str, partition: int = 0) -> bytes:
    """Commits one record last, so that everything committed before it is in the log ahead of it."""
    marker = f"marker-{uuid.uuid4().hex[:8]}".encode()
    conn.execute("select kafgres.send(%s, %s::bytea, partition => %s)", (topic, marker, partition))
    conn.commit()
    return marker


def librdkafka_partitions(make_producer, create_topic, topic_name, partitions: int, keys: list[bytes]) -> dict:
    """key -> partition chosen by librdkafka's murmur2_random partitioner (Kafka's default) for `partitions`."""
    reference = create_topic(topic_name("ref"), partitions=partitions)
    producer = make_producer({"partitioner": "murmur2_random"})
    delivered = produce_all(producer, [dict(topic=reference, key=k, value=b"ref") for k in keys])
    return {m.key(): m.partition() for m in delivered}


def test_commit_makes_records_visible_exactly(pg_connect, create_topic, topic_name, consume, make_consumer):
    topic = create_topic(topic_name(), partitions=3)
    conn = pg_connect()
    before_ms = int(time.time() * 1000)

    p1 = conn.execute(
        "select kafgres.send(%s, 'text value'::text, key => 'text key', headers => %s::jsonb, partition => 1)",
        (topic, json.dumps({"trace-id": "abc", "source": "sql"})),
    ).fetchone()[0]
    binary_value = bytes(range(256))
    binary_key = b"\x00\xffkey\x80"
    p2 = conn.execute(
        "select kafgres.send(%s, %s::bytea, key => %s::bytea, headers => %s::jsonb, partition => 2)",
        (topic, binary_value, binary_key, json.dumps([["dup", "first"], ["dup", "second"], ["empty", None]])),
    ).fetchone()[0]
    p3 = conn.execute(
        "select kafgres.send(%s, %s::jsonb, partition => 0)",
        (topic, json.dumps({"order": 42, "items": [1, 2], "note": "ünïcode"})),
    ).fetchone()[0]
    assert (p1, p2, p3) == (1, 2, 0), "send() returns the partition the record goes to"

    # Not yet committed: nothing in any partition.
    assert [high_watermark(make_consumer, topic, p) for p in range(3)] == [0, 0, 0]
    conn.commit()
    after_ms = int(time.time() * 1000)

    [m1] = consume(topic, 1, 1)
    assert (m1.key(), m1.value(), m1.offset()) == (b"text key", b"text value", 0)
    assert sorted(m1.headers()) == [("source", b"sql"), ("trace-id", b"abc")]

    [m2] = consume(topic, 2, 1)
    assert (m2.key(), m2.value()) == (binary_key, binary_value)
    assert m2.headers() == [("dup", b"first"), ("dup", b"second"), ("empty", None)], "array headers keep order"

    [m3] = consume(topic, 0, 1)
    assert m3.key() is None
    assert json.loads(m3.value()) == {"order": 42, "items": [1, 2], "note": "ünïcode"}
    assert not m3.headers()

    for m in (m1, m2, m3):
        _, ts = m.timestamp()
        assert before_ms - 5000 <= ts <= after_ms + 5000, f"record timestamp {ts} not near the send ({before_ms}..{after_ms})"
    for p in range(3):
        assert high_watermark(make_consumer, topic, p) == 1


def test_null_value_is_a_tombstone(pg_connect, create_topic, topic_name, consume):
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect()
    conn.execute("select kafgres.send(%s, NULL::text, key => 'gone')", (topic,))
    conn.commit()
    [m] = consume(topic, 0, 1)
    assert (m.key(), m.value()) == (b"gone", None)


def test_rollback_and_savepoints_drop_records(pg_connect, create_topic, topic_name, consume, make_consumer):
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect()

    conn.execute("select kafgres.send(%s, 'rolled back'::text, partition => 0)", (topic,))
    conn.rollback()

    conn.execute("select kafgres.send(%s, 'keep-1'::text, partition => 0)", (topic,))
    conn.execute("savepoint s1")
    conn.execute("select kafgres.send(%s, 'dropped by rollback to savepoint'::text, partition => 0)", (topic,))
    conn.execute("savepoint s1_inner")
    conn.execute("select kafgres.send(%s, 'dropped with its parent savepoint'::text, partition => 0)", (topic,))
    conn.execute("rollback to savepoint s1")
    conn.execute("select kafgres.send(%s, 'keep-2'::text, partition => 0)", (topic,))
    conn.execute("savepoint s2")
    conn.execute("select kafgres.send(%s, 'keep-3 (released savepoint)'::text, partition => 0)", (topic,))
    conn.execute("release savepoint s2")
    # A PL/pgSQL exception block is a subtransaction: its sends go when it aborts.
    conn.execute(
        sql.SQL(
            "do $$ begin"
            "  begin"
            "    perform kafgres.send({}::text, 'dropped by the exception block'::text, partition => 0);"
            "    raise exception 'abort the block';"
            "  exception when others then null;"
            "  end;"
            "end $$"
        ).format(sql.Literal(topic))
    )
    conn.execute("select kafgres.send(%s, 'keep-4'::text, partition => 0)", (topic,))
    conn.commit()
    marker = send_marker(conn, topic)

    assert_partition_holds(
        consume, make_consumer, topic, 0, [b"keep-1", b"keep-2", b"keep-3 (released savepoint)", b"keep-4", marker]
    )


def test_commit_order_across_sessions(pg_connect, create_topic, topic_name, consume, make_consumer):
    """A sends first but commits last: B's record precedes A's, and is readable while A is open."""
    topic = create_topic(topic_name(), partitions=1)
    a = pg_connect()
    b = pg_connect()

    a.execute("select kafgres.send(%s, 'A: sent first, committed last'::text, partition => 0)", (topic,))
    b.execute("select kafgres.send(%s, 'B: sent second, committed first'::text, partition => 0)", (topic,))
    b.commit()

    [first] = consume(topic, 0, 1)
    assert (first.offset(), first.value()) == (0, b"B: sent second, committed first")
    assert a.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, "A's transaction is still open"
    assert high_watermark(make_consumer, topic, 0) == 1, "A's uncommitted record is not in the log"

    a.commit()
    [second] = consume(topic, 0, 1, start_offset=1)
    assert (second.offset(), second.value()) == (1, b"A: sent first, committed last")
    assert high_watermark(make_consumer, topic, 0) == 2


def test_long_open_transaction_holds_back_nobody(pg_connect, create_topic, topic_name, consume):
    """An open transaction with many sends does not delay later commits of other sessions on the same partition."""
    topic = create_topic(topic_name(), partitions=1)
    long_tx = pg_connect()
    others = pg_connect()
    long_tx.execute("select kafgres.send_batch(%s, array_agg('long-' || i)) from generate_series(1, 500) i", (topic,))

    for i in range(3):
        others.execute("select kafgres.send(%s, %s::text, partition => 0)", (topic, f"other-{i}"))
        others.commit()
        [m] = consume(topic, 0, 1, start_offset=i)
        assert m.value() == f"other-{i}".encode()

    long_tx.commit()
    rest = consume(topic, 0, 500, start_offset=3)
    assert [m.value() for m in rest] == [f"long-{i}".encode() for i in range(1, 501)]


def test_keyed_records_agree_with_murmur2(pg_connect, create_topic, topic_name, make_producer, consume):
    partitions = 7
    text_keys = ["", "a", "user-1", "user-2", "order/42", "ünïcode-ключ", "x" * 300] + [f"k{i}" for i in range(80)]
    binary_keys = [bytes([i, 255 - i, 0, i * 7 % 256]) for i in range(20)]
    keys_bytes = [k.encode() for k in text_keys] + binary_keys
    expected = librdkafka_partitions(make_producer, create_topic, topic_name, partitions, keys_bytes)
    assert len(set(expected.values())) > 1, "the reference keys should spread over several partitions"

    topic = create_topic(topic_name("sql"), partitions=partitions)
    conn = pg_connect()
    sql_text = conn.execute(
        "select k, kafgres.send(%s, 'v:' || k, key => k) from unnest(%s::text[]) with ordinality u(k, n) order by n",
        (topic, text_keys),
    ).fetchall()
    sql_binary = conn.execute(
        "select k, kafgres.send(%s, '\\x00'::bytea, key => k) from unnest(%s::bytea[]) with ordinality u(k, n) order by n",
        (topic, binary_keys),
    ).fetchall()
    conn.commit()

    chosen = {k.encode(): p for k, p in sql_text} | {bytes(k): p for k, p in sql_binary}
    mismatches = {k: (chosen[k], expected[k]) for k in keys_bytes if chosen[k] != expected[k]}
    assert not mismatches, f"key -> (kafgres.send partition, librdkafka murmur2 partition): {mismatches}"

    # And the records really are in those partitions.
    per_partition: dict[int, int] = {}
    for p in expected.values():
        per_partition[p] = per_partition.get(p, 0) + 1
    for p, count in per_partition.items():
        for m in consume(topic, p, count):
            assert expected[m.key()] == p, f"key {m.key()!r} found in partition {p}"


def test_keyless_records_of_one_transaction_share_a_partition(pg_connect, create_topic, topic_name, consume):
    topic = create_topic(topic_name(), partitions=4)
    conn = pg_connect()
    chosen = {
        conn.execute("select kafgres.send(%s, %s::text)", (topic, f"keyless-{i}")).fetchone()[0] for i in range(10)
    }
    conn.commit()
    assert len(chosen) == 1, f"keyless records of one transaction went to partitions {chosen}"
    [p] = chosen
    received = consume(topic, p, 10)
    assert [m.value() for m in received] == [f"keyless-{i}".encode() for i in range(10)]


def test_synchronous_commit_off_still_delivers(pg_connect, create_topic, topic_name, consume, make_consumer):
    """With synchronous_commit = off each commit is delivered on its own (no later commit needed to push it)."""
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect(synchronous_commit="off")
    assert conn.execute("show synchronous_commit").fetchone()[0] == "off"
    for i in range(5):
        conn.execute("select kafgres.send(%s, %s::text, partition => 0)", (topic, f"async-{i}"))
        conn.commit()
        [m] = consume(topic, 0, 1, start_offset=i, timeout_s=10)
        assert m.value() == f"async-{i}".encode()
    assert high_watermark(make_consumer, topic, 0) == 5


def test_long_polling_consumer_sees_commit(pg_connect, create_topic, topic_name, make_consumer):
    """A consumer whose Fetch is already waiting (up to 30 s) receives a record committed meanwhile."""
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect()
    consumer = make_consumer({"fetch.wait.max.ms": 30000, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    received: list = []
    errors: list = []
    stop = threading.Event()

    def poll_loop():
        while not stop.is_set():
            msg = poll_record(consumer, 0.2, errors)
            if msg is not None:
                received.append(msg)

    poller = threading.Thread(target=poll_loop, daemon=True)
    poller.start()
    try:
        # The first record proves the consumer is fetching; its next Fetch then waits on the empty tail.
        for i, value in enumerate([b"first", b"second"]):
            conn.execute("select kafgres.send(%s, %s::bytea, partition => 0)", (topic, value))
            conn.commit()
            deadline = time.monotonic() + 20
            while len(received) <= i and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(received) > i, f"record {value!r} not received within 20 s; client errors: {errors[-5:]}"
    finally:
        stop.set()
        poller.join(5)
    assert [(m.offset(), m.value()) for m in received] == [(0, b"first"), (1, b"second")]


# --- errors ----------------------------------------------------------------------------------

def expect_error(conn, sqlstate: str, query: str, params=()) -> psycopg.Error:
    """Runs `query`, which must fail with `sqlstate`; then checks the transaction is aborted and rolls back."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    err = info.value
    assert err.sqlstate == sqlstate, f"{query!r} failed with {err.sqlstate} ({err}), expected {sqlstate}"
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    conn.rollback()
    return err


def test_errors_leave_the_session_usable(pg_connect, create_topic, topic_name, consume, make_consumer):
    topic = create_topic(topic_name(), partitions=2)
    missing = topic_name("missing")
    conn = pg_connect()

    cases = [
        ("42704", "select kafgres.send(%s, 'v'::text)", (missing,)),
        ("22023", "select kafgres.send(%s, 'v'::text, partition => 2)", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, partition => -1)", (topic,)),
        ("54000", "select kafgres.send(%s, repeat('x', 2 * 1024 * 1024))", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, headers => '5'::jsonb)", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, headers => '\"a string\"'::jsonb)", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, headers => '[[\"only a name\"]]'::jsonb)", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, headers => '[[\"a\", \"b\", \"c\"]]'::jsonb)", (topic,)),
        ("22023", "select kafgres.send(%s, 'v'::text, headers => '[[1, \"name is a number\"]]'::jsonb)", (topic,)),
        ("22023", "select kafgres.send_batch(%s, array['a', 'b'], array['only one key'])", (topic,)),
    ]
    for i, (sqlstate, query, params) in enumerate(cases):
        # A good send earlier in the same transaction must vanish with it.
        conn.execute("select kafgres.send(%s, %s::text, partition => 0)", (topic, f"doomed-{i}"))
        err = expect_error(conn, sqlstate, query, params)
        assert err.diag.message_hint, f"{query!r} failed without a hint: {err}"
        # The session is usable again at once.
        conn.execute("select kafgres.send(%s, %s::text, partition => 0)", (topic, f"after-error-{i}"))
        conn.commit()

    err = expect_error(conn, "42704", "select kafgres.send(%s, 'v'::text)", (missing,))
    assert missing in str(err) and "create_topic" in err.diag.message_hint

    assert_partition_holds(
        consume, make_consumer, topic, 0, [f"after-error-{i}".encode() for i in range(len(cases))]
    )
    assert high_watermark(make_consumer, topic, 1) == 0


def test_error_inside_savepoint_keeps_earlier_sends(pg_connect, create_topic, topic_name, consume, make_consumer):
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect()
    conn.execute("select kafgres.send(%s, 'before the savepoint'::text, partition => 0)", (topic,))
    conn.execute("savepoint s")
    with pytest.raises(psycopg.Error) as info:
        conn.execute("select kafgres.send(%s, 'v'::text, partition => 9)", (topic,))
    assert info.value.sqlstate == "22023"
    conn.execute("rollback to savepoint s")
    conn.execute("select kafgres.send(%s, 'after the savepoint'::text, partition => 0)", (topic,))
    conn.commit()
    assert_partition_holds(
        consume, make_consumer, topic, 0, [b"before the savepoint", b"after the savepoint"]
    )


def test_null_arguments_are_clean_errors(pg_connect, create_topic, topic_name):
    """A NULL topic or values array is refused with a data error, not an internal error (XX000)."""
    topic = create_topic(topic_name(), partitions=1)
    conn = pg_connect()
    wrong = []
    for query, params in [
        ("select kafgres.send(NULL, 'v'::text)", ()),
        ("select kafgres.send_batch(NULL, array['a'])", ()),
        ("select kafgres.send_batch(%s, NULL)", (topic,)),
    ]:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(query, params)
        conn.rollback()
        if info.value.sqlstate not in ("22004", "22023", "39004"):
            wrong.append(f"{query!r} failed with {info.value.sqlstate}: {str(info.value).splitlines()[0]}")
    assert not wrong, "\n".join(wrong)


# --- send_batch ----------------------------------------------------------------------------------

def test_send_batch_with_keys(pg_connect, create_topic, topic_name, make_producer, consume, make_consumer):
    partitions = 5
    keys = [f"batch-key-{i % 12}" for i in range(60)]
    values = [f"value-{i}" for i in range(60)]
    expected = librdkafka_partitions(make_producer, create_topic, topic_name, partitions, [k.encode() for k in keys])

    topic = create_topic(topic_name("sql"), partitions=partitions)
    conn = pg_connect()
    count = conn.execute("select kafgres.send_batch(%s, %s::text[], %s::text[])", (topic, values, keys)).fetchone()[0]
    assert count == 60
    conn.commit()

    for p in range(partitions):
        want = [(k.encode(), v.encode()) for k, v in zip(keys, values) if expected[k.encode()] == p]
        got = consume(topic, p, len(want)) if want else []
        assert [(m.key(), m.value()) for m in got] == want, f"partition {p}: records or their order differ"
        assert high_watermark(make_consumer, topic, p) == len(want)


def test_send_batch_without_keys(pg_connect, create_topic, topic_name, consume, make_consumer):
    topic = create_topic(topic_name(), partitions=3)
    conn = pg_connect()
    values = [f"row-{i}" for i in range(100)]
    assert conn.execute("select kafgres.send_batch(%s, %s::text[])", (topic, values)).fetchone()[0] == 100
    # A rolled-back batch is not delivered.
    conn.rollback()
    assert conn.execute("select kafgres.send_batch(%s, %s::text[])", (topic, values)).fetchone()[0] == 100
    conn.commit()

    watermarks = [high_watermark(make_consumer, topic, p) for p in range(3)]
    deadline = time.monotonic() + 20
    while sum(watermarks) < 100 and time.monotonic() < deadline:
        time.sleep(0.1)
        watermarks = [high_watermark(make_consumer, topic, p) for p in range(3)]
    assert sorted(watermarks) == [0, 0, 100], f"one transaction's keyless batch should fill one partition: {watermarks}"
    p = watermarks.index(100)
    received = consume(topic, p, 100)
    assert [m.value() for m in received] == [v.encode() for v in values]
    assert all(m.key() is None for m in received)

    # An empty batch sends nothing and says so.
    assert conn.execute("select kafgres.send_batch(%s, '{}'::text[])", (topic,)).fetchone()[0] == 0
    conn.commit()


def test_jsonb_values_reach_the_topic_exactly(pg_connect, create_topic, topic_name, consume):
    """A jsonb value's numbers keep every digit (a 21-digit decimal, a 23-digit integer: not rounded through a
    float) and its strings every character; the bytes are jsonb's text without the blanks between tokens."""
    topic = create_topic(topic_name())
    conn = pg_connect(autocommit=True)
    document = ('{"tricky": "a, b: \\"c\\" \\\\ d", "pi": 3.14159265358979323846, '
                '"big": 12345678901234567890123, "nested": [1.0, {"x": -0.000001}]}')
    conn.execute("select kafgres.send(%s, %s::jsonb)", (topic, document))
    [m] = consume(topic, 0, 1)
    assert m.value().decode() == ('{"pi":3.14159265358979323846,"big":12345678901234567890123,'
                                  '"nested":[1.0,{"x":-0.000001}],"tricky":"a, b: \\"c\\" \\\\ d"}')
    parsed = json.loads(m.value(), parse_float=decimal.Decimal)
    assert parsed["pi"] == decimal.Decimal("3.14159265358979323846") and parsed["big"] == 12345678901234567890123
    assert parsed["tricky"] == 'a, b: "c" \\ d'
