"""Change data capture: `kafgres.capture(table, topic, ...)` (docs/cdc.md).

A captured table's changes reach Kafka consumers (confluent-kafka) as
records of its topic: INSERT, UPDATE, DELETE (with a tombstone) and TRUNCATE,
each once, keyed by the primary key, in commit order across sessions, only
for transactions that commit, with the xid, commit LSN and commit time in
headers (the commit LSN the one `pg_current_wal_lsn()` shows after the
COMMIT). Checked too: Debezium's envelope and value mapping (numeric as a
string, timestamps, dates, bytea in base64, json as a string, arrays,
enums, domains); a key change becomes a delete and a create; the initial
snapshot is consistent with the stream; a column added while capturing is
in the next change; the `row` format and a column list; a change too large
for its topic goes to the dead-letter topic, or fails its statement when
there is none; a dropped table ends its capture; uncapture stops it. Row
filters: updates moving rows in and out become creates and deletes, an
ALTER TABLE that would break the filter is refused, and a filter that is not
one expression (an injected statement, a subquery) or not boolean is refused
before anything runs. The chunked snapshot (`kafgres.snapshot`) under
concurrent writers replays to the table exactly and resumes after an
interruption. A 1,000-column table and 10 KB rows. The lag in time while
changes wait (the bridge stopped). A whole schema captured, with the tables
created in it later.

Sessions are psycopg 3 connections on the dev cluster; every table and
topic is this test's own; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from psycopg import errors

WATERMARK_TIMEOUT_S = 10.0


@pytest.fixture
def table(pg_connect):
    """A fresh table name in public; dropped (with its capture) at teardown."""
    names: list[str] = []

    def make(columns: str) -> str:
        name = f"cdc_{uuid.uuid4().hex[:10]}"
        conn = pg_connect(autocommit=True)
        conn.execute(f"CREATE TABLE public.{name} ({columns})")
        names.append(name)
        return name

    yield make
    conn = pg_connect(autocommit=True)
    for name in names:
        conn.execute(f"DROP TABLE IF EXISTS public.{name}")


def changes(consume, topic: str, count: int) -> list[dict]:
    """The topic's first `count` records: key and value as JSON (None for null), headers as a dict."""
    out = []
    for m in consume(topic, 0, count):
        out.append({
            "offset": m.offset(),
            "key": json.loads(m.key()) if m.key() is not None else None,
            "value": json.loads(m.value()) if m.value() is not None else None,
            "headers": {k: (v.decode() if v is not None else None) for k, v in (m.headers() or [])},
        })
    return out


def end_offset(make_consumer, topic: str) -> int:
    return make_consumer().get_watermark_offsets(TopicPartition(topic, 0), timeout=WATERMARK_TIMEOUT_S)[1]


def wait_applied(conn) -> None:
    assert conn.execute("SELECT kafgres.wait_for_sends()").fetchone()[0], "the SQL bridge did not apply the sends"


def test_changes_arrive_once_in_commit_order_with_the_commit_in_headers(pg_connect, table, consume, make_consumer):
    name = table("id int PRIMARY KEY, amount numeric(10,2), note text")
    topic = f"cdc.{name}"
    a = pg_connect(autocommit=True)
    assert a.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", topic)).fetchone()[0] == topic

    a.execute(f"INSERT INTO {name} VALUES (1, 12.34, 'first')")
    commit_lsns = [a.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]]
    # Two open transactions: the one that began second commits first.
    first, second = pg_connect(), pg_connect()
    first.execute(f"INSERT INTO {name} VALUES (2, 1, 'began first')")
    second.execute(f"UPDATE {name} SET amount = 13 WHERE id = 1")
    second.commit()
    first.commit()
    # A rollback publishes nothing.
    with pytest.raises(errors.UniqueViolation):
        a.execute(f"INSERT INTO {name} VALUES (3, 0, 'kept'), (1, 0, 'duplicate')")
    a.execute(f"UPDATE {name} SET id = 20 WHERE id = 2")  # a key change
    a.execute(f"DELETE FROM {name} WHERE id = 20")
    a.execute(f"TRUNCATE {name}")
    wait_applied(a)

    got = changes(consume, topic, 9)
    ops = [(c["headers"]["kafgres.op"], c["key"]) for c in got]
    assert ops == [("c", {"id": 1}), ("u", {"id": 1}), ("c", {"id": 2}), ("d", {"id": 2}), ("d", {"id": 2}),
                   ("c", {"id": 20}), ("d", {"id": 20}), ("d", {"id": 20}), ("t", None)]
    assert [c["value"] is None for c in got] == [False, False, False, False, True, False, False, True, False]
    assert end_offset(make_consumer, topic) == 9, "more records than changes"

    insert, update = got[0]["value"], got[1]["value"]
    assert insert["op"] == "c" and insert["before"] is None
    assert insert["after"] == {"id": 1, "amount": "12.34", "note": "first"}
    assert update["before"]["amount"] == "12.34" and update["after"]["amount"] == "13.00"
    assert insert["source"]["table"] == name and insert["source"]["schema"] == "public"
    assert insert["source"]["connector"] == "postgresql" and insert["source"]["snapshot"] == "false"
    assert got[-1]["value"]["op"] == "t"

    # Headers: the xid and the commit of each transaction, increasing in commit order.
    assert got[0]["headers"]["kafgres.commit_lsn"] == commit_lsns[0]
    assert int(got[0]["headers"]["kafgres.xid"]) == insert["source"]["txId"]
    lsn = [int(h.split("/")[0], 16) << 32 | int(h.split("/")[1], 16)
           for h in (c["headers"]["kafgres.commit_lsn"] for c in got)]
    assert lsn == sorted(lsn) and len(set(lsn)) == 6  # six transactions committed changes
    assert all(int(c["headers"]["kafgres.commit_ts_ms"]) >= insert["ts_ms"] - 1000 for c in got)

    status = a.execute("SELECT topic, format, state FROM kafgres.capture_status WHERE relation = %s::regclass",
                       (f"public.{name}",)).fetchone()
    assert status == (topic, "debezium", "capturing")
    assert a.execute("SELECT kafgres.uncapture(%s)", (f"public.{name}",)).fetchone()[0] is True
    a.execute(f"INSERT INTO {name} VALUES (5, 0, 'after uncapture')")
    a.execute("SELECT kafgres.send(%s, 'marker'::text)", (topic,))
    wait_applied(a)
    assert [m.value() for m in consume(topic, 0, 1, start_offset=9)] == [b"marker"]


def test_values_are_mapped_as_debezium_maps_them(pg_connect, table, consume):
    conn = pg_connect(autocommit=True)
    enum = f"mood_{uuid.uuid4().hex[:6]}"
    conn.execute(f"CREATE TYPE {enum} AS ENUM ('sad', 'happy')")
    try:
        name = table(f"id bigint PRIMARY KEY, n numeric, ts timestamp, ts3 timestamp(3), tz timestamptz, d date, "
                     f"t time, b bytea, j jsonb, tags text[], nums numeric[], m {enum}, ok boolean, f float8, "
                     f"u uuid, iv interval, no_value text")
        topic = conn.execute("SELECT kafgres.capture(%s)", (f"public.{name}",)).fetchone()[0]
        assert topic == f"{conn.info.dbname}.public.{name}"  # Debezium's naming: <prefix>.<schema>.<table>
        conn.execute("SET TimeZone = 'Europe/Paris'")
        conn.execute(
            f"INSERT INTO {name} VALUES (7, 1234567890.0123456789, '2024-01-02 03:04:05.123456', "
            f"'2024-01-02 03:04:05.123', '2024-01-02 03:04:05.5+01', '2024-01-02', '01:02:03.5', '\\x00ff10', "
            f"'{{\"a\": [1, 2]}}', '{{x,NULL,\"y z\"}}', '{{1.5,2}}', 'happy', true, 0.25, "
            f"'6f1d2c3b-4a59-4e68-8f7a-9b0c1d2e3f40', '1 day 2 hours', NULL)")
        wait_applied(conn)
        after = changes(consume, topic, 1)[0]["value"]["after"]
        assert after == {
            "id": 7, "n": "1234567890.0123456789", "ts": 1704164645123456, "ts3": 1704164645123,
            "tz": "2024-01-02T02:04:05.500000Z", "d": 19724, "t": 3723500000, "b": "AP8Q", "j": '{"a": [1, 2]}',
            "tags": ["x", None, "y z"], "nums": ["1.5", "2"], "m": "happy", "ok": True, "f": 0.25,
            "u": "6f1d2c3b-4a59-4e68-8f7a-9b0c1d2e3f40", "iv": 93600000000, "no_value": None,
        }
    finally:
        conn.execute(f"DROP TYPE {enum} CASCADE")


def test_a_snapshot_then_the_stream_misses_and_repeats_nothing(pg_connect, table, consume, make_consumer):
    name = table("id int PRIMARY KEY, v text")
    conn = pg_connect(autocommit=True)
    conn.execute(f"INSERT INTO {name} SELECT g, 'old' FROM generate_series(1, 50) g")
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s, snapshot => true)", (f"public.{name}", topic))
    conn.execute(f"UPDATE {name} SET v = 'new' WHERE id = 50")
    conn.execute(f"ALTER TABLE {name} ADD COLUMN extra int DEFAULT 7")
    conn.execute(f"INSERT INTO {name} (id, v) VALUES (51, 'after the column')")
    wait_applied(conn)
    got = changes(consume, topic, 52)
    assert [(c["value"]["op"], c["key"]["id"]) for c in got] == [("r", i) for i in range(1, 51)] + [("u", 50), ("c", 51)]
    assert all(c["value"]["source"]["snapshot"] == "true" for c in got[:50])
    assert got[50]["value"]["after"] == {"id": 50, "v": "new"}
    assert got[51]["value"]["after"] == {"id": 51, "v": "after the column", "extra": 7}
    assert end_offset(make_consumer, topic) == 52
    assert conn.execute("SELECT snapshot_rows FROM kafgres.captures WHERE relation = %s::regclass",
                        (f"public.{name}",)).fetchone() == (50,)


def test_row_format_with_a_column_list(pg_connect, table, consume):
    name = table("id int PRIMARY KEY, visible text, secret text")
    conn = pg_connect(autocommit=True)
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s, format => 'row', columns => ARRAY['id', 'visible']::name[])",
                 (f"public.{name}", topic))
    conn.execute(f"INSERT INTO {name} VALUES (1, 'shown', 'hidden')")
    conn.execute(f"DELETE FROM {name}")
    wait_applied(conn)
    got = changes(consume, topic, 2)
    assert [(c["headers"]["kafgres.op"], c["key"], c["value"]) for c in got] == [
        ("c", {"id": 1}, {"id": 1, "visible": "shown"}), ("d", {"id": 1}, None)]


def test_a_change_too_large_goes_to_the_dead_letter_topic_or_fails(pg_connect, table, consume):
    name = table("id int PRIMARY KEY, body text")
    conn = pg_connect(autocommit=True)
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.create_topic(%s, 1, '{\"max.message.bytes\": \"2048\"}')", (topic,))
    dead = f"cdc.{name}.dead"
    conn.execute("SELECT kafgres.capture(%s, %s, dead_letter_topic => %s)", (f"public.{name}", topic, dead))
    conn.execute(f"INSERT INTO {name} VALUES (1, repeat('x', 4000))")
    conn.execute(f"INSERT INTO {name} VALUES (2, 'small')")
    wait_applied(conn)
    [letter] = changes(consume, dead, 1)
    assert letter["key"] == {"id": 1} and letter["value"]["op"] == "c" and "max.message.bytes" in letter["value"]["reason"]
    assert [c["key"] for c in changes(consume, topic, 1)] == [{"id": 2}]

    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", topic))  # no dead-letter topic now
    with pytest.raises(errors.ProgramLimitExceeded, match="does not fit topic"):
        conn.execute(f"INSERT INTO {name} VALUES (3, repeat('x', 4000))")


def test_bad_calls_fail_clearly_and_a_dropped_table_ends_its_capture(pg_connect, table):
    name = table("id int PRIMARY KEY")
    conn = pg_connect(autocommit=True)
    with pytest.raises(errors.InvalidParameterValue, match="unknown format"):
        conn.execute("SELECT kafgres.capture(%s, format => 'avro')", (f"public.{name}",))
    with pytest.raises(errors.UndefinedColumn, match="no column"):
        conn.execute("SELECT kafgres.capture(%s, columns => ARRAY['nope']::name[])", (f"public.{name}",))
    view = f"{name}_v"
    conn.execute(f"CREATE VIEW {view} AS SELECT 1 AS one")
    with pytest.raises(errors.WrongObjectType, match="is not a table"):
        conn.execute("SELECT kafgres.capture(%s)", (view,))
    conn.execute(f"DROP VIEW {view}")
    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", f"cdc.{name}"))
    conn.execute(f"DROP TABLE {name}")
    assert conn.execute("SELECT count(*) FROM kafgres.captures WHERE topic = %s", (f"cdc.{name}",)).fetchone() == (0,)


def test_a_row_filter_publishes_rows_inside_it_and_their_moves_in_and_out(pg_connect, table, consume, make_consumer):
    name = table("id int PRIMARY KEY, status text, amount numeric, note text")
    conn = pg_connect(autocommit=True)
    conn.execute(f"INSERT INTO {name} VALUES (1, 'paid', 10, 'before'), (2, 'open', 5, 'before')")
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s, row_filter => %s, snapshot => true)",
                 (f"public.{name}", topic, "status = 'paid' AND amount >= 1"))
    conn.execute(f"INSERT INTO {name} VALUES (3, 'paid', 7, NULL), (4, 'open', 7, NULL), (5, 'paid', NULL, NULL)")
    conn.execute(f"UPDATE {name} SET status = 'paid' WHERE id = 2")   # moves in: a create
    conn.execute(f"UPDATE {name} SET note = 'changed' WHERE id = 1")  # stays in: an update
    conn.execute(f"UPDATE {name} SET note = 'changed' WHERE id = 4")  # stays out: nothing
    conn.execute(f"UPDATE {name} SET status = 'refunded' WHERE id = 3")  # moves out: a delete (and tombstone)
    conn.execute(f"DELETE FROM {name} WHERE id IN (4, 5)")  # outside (5's NULL amount is not true): nothing
    # A column the filter does not use may go; one it uses may not.
    conn.execute(f"ALTER TABLE {name} DROP COLUMN note")
    with pytest.raises(errors.DependentObjectsStillExist, match="breaks the row filter") as refused:
        conn.execute(f"ALTER TABLE {name} DROP COLUMN amount")
    assert refused.value.diag.message_hint and "capture the table again" in refused.value.diag.message_hint
    conn.execute(f"ALTER TABLE {name} ADD COLUMN region text DEFAULT 'eu'")
    conn.execute(f"DELETE FROM {name} WHERE id = 1")
    wait_applied(conn)
    expected = [("r", 1), ("c", 3), ("c", 2), ("u", 1), ("d", 3), (None, 3), ("d", 1), (None, 1)]
    got = changes(consume, topic, len(expected))
    assert [(c["value"]["op"] if c["value"] else None, c["key"]["id"]) for c in got] == expected
    assert got[2]["value"]["after"]["status"] == "paid" and got[2]["value"]["before"] is None
    assert got[4]["value"]["before"]["status"] == "paid" and got[4]["value"]["after"] is None
    assert got[6]["value"]["before"] == {"id": 1, "status": "paid", "amount": "10", "region": "eu"}
    assert end_offset(make_consumer, topic) == len(expected)
    assert conn.execute("SELECT row_filter, snapshot_state, snapshot_rows FROM kafgres.capture_status "
                        "WHERE relation = %s::regclass", (f"public.{name}",)).fetchone() == (
                            "status = 'paid' AND amount >= 1", "done", 1)
    # Uncapture and DROP TABLE take the filter's function with them.
    filter_function = f"_capture_filter_{conn.execute('SELECT %s::regclass::oid', (f'public.{name}',)).fetchone()[0]}"
    conn.execute("SELECT kafgres.uncapture(%s)", (f"public.{name}",))
    assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = %s", (filter_function,)).fetchone() == (0,)
    conn.execute("SELECT kafgres.capture(%s, %s, row_filter => 'amount > 0')", (f"public.{name}", topic))
    conn.execute(f"DROP TABLE {name}")
    assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = %s", (filter_function,)).fetchone() == (0,)


def test_a_row_filter_must_be_one_expression_over_the_row(pg_connect, table):
    name = table("id int PRIMARY KEY, status text")
    conn = pg_connect(autocommit=True)
    victim = f"{name}_victim"
    conn.execute(f"CREATE TABLE {victim} (x int)")
    try:
        for injection in (f"true); DROP TABLE {victim}; SELECT (true",
                          "true) FROM pg_authid WHERE (true",
                          "true) UNION SELECT (false",
                          "(SELECT true FROM pg_authid LIMIT 1)"):
            with pytest.raises(errors.SyntaxError, match="one expression"):
                conn.execute("SELECT kafgres.capture(%s, row_filter => %s)", (f"public.{name}", injection))
        assert conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{victim}",)).fetchone() == (True,)
        with pytest.raises(errors.DatatypeMismatch, match="must be type boolean"):
            conn.execute("SELECT kafgres.capture(%s, row_filter => 'id + 1')", (f"public.{name}",))
        with pytest.raises(errors.UndefinedColumn, match="nope"):
            conn.execute("SELECT kafgres.capture(%s, row_filter => 'nope = 1')", (f"public.{name}",))
        with pytest.raises(errors.GroupingError, match="aggregate"):
            conn.execute("SELECT kafgres.capture(%s, row_filter => 'count(*) > 1')", (f"public.{name}",))
        with pytest.raises(errors.UndefinedColumn, match="xmin"):
            conn.execute("SELECT kafgres.capture(%s, row_filter => 'xmin::text <> ''''')", (f"public.{name}",))
        assert conn.execute("SELECT count(*) FROM kafgres.captures WHERE relation = %s::regclass",
                            (f"public.{name}",)).fetchone() == (0,)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {victim}")


def replay(records: list[dict]) -> dict[int, dict]:
    """The table a consumer rebuilds from a capture's records: creates, updates and snapshot rows set a key's
    row, deletes remove it, tombstones change nothing."""
    rows: dict[int, dict] = {}
    for r in records:
        if r["value"] is None:
            continue
        op, key = r["value"]["op"], r["key"]["id"]
        if op in ("c", "u", "r"):
            rows[key] = r["value"]["after"]
        elif op == "d":
            rows.pop(key, None)
    return rows


def test_a_chunked_snapshot_under_concurrent_writes_rebuilds_the_table_exactly(pg_connect, table, consume,
                                                                               make_consumer):
    """kafgres.snapshot reads a captured table in chunks while writers go on: replaying the topic gives the
    table as it is, every row nobody touched arrives once as a snapshot record, and an interrupted snapshot
    resumes after its last committed chunk instead of starting over."""
    name = table("id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL")
    conn = pg_connect(autocommit=True)
    rows = 6000
    conn.execute(f"INSERT INTO {name} SELECT g, 0, repeat('p', 100) FROM generate_series(1, %s) g", (rows,))
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", topic))
    pages_total = conn.execute(f"SELECT pg_relation_size('{name}') / current_setting('block_size')::int").fetchone()[0]
    assert pages_total >= 20

    # Interrupted: a row locked a quarter into the table stops the chunk that reaches it; cancel the snapshot there.
    locked_id = conn.execute(f"SELECT id FROM {name} WHERE ctid >= %s::tid ORDER BY ctid LIMIT 1",
                             (f"({pages_total // 4},0)",)).fetchone()[0]
    locker = pg_connect()
    locker.execute(f"SELECT 1 FROM {name} WHERE id = %s FOR UPDATE", (locked_id,))
    snapshotter = pg_connect(autocommit=True)
    snapshot_pid = snapshotter.execute("SELECT pg_backend_pid()").fetchone()[0]
    interrupted = threading.Thread(target=lambda: call_quietly(snapshotter, f"CALL kafgres.snapshot('{name}', 4)"))
    interrupted.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and conn.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", (snapshot_pid,)).fetchone()[0] == 0:
        time.sleep(0.02)
    conn.execute("SELECT pg_cancel_backend(%s)", (snapshot_pid,))
    interrupted.join(30)
    assert not interrupted.is_alive()
    locker.rollback()
    state, done, sent = conn.execute("SELECT snapshot_state, snapshot_pages_done, snapshot_rows FROM "
                                     "kafgres.capture_status WHERE relation = %s::regclass",
                                     (f"public.{name}",)).fetchone()
    assert state == "running" and 0 < done < pages_total and 0 < sent < rows

    # Resumed while writers update, delete and insert rows all over the table.
    stop = threading.Event()
    writes: list[int] = []

    def write() -> None:
        w = pg_connect(autocommit=True)
        rng = random.Random(7)
        for i in range(2000):
            if stop.is_set():
                break
            key = rng.randint(1, rows)
            kind = i % 4
            if kind == 0:
                w.execute(f"DELETE FROM {name} WHERE id = %s", (key,))
            elif kind == 1:
                w.execute(f"INSERT INTO {name} VALUES (%s, 1, 'new') ON CONFLICT (id) DO UPDATE SET v = {name}.v + 1",
                          (rows + i,))
            else:
                w.execute(f"UPDATE {name} SET v = v + 1 WHERE id = %s", (key,))
            writes.append(key)
        wait_applied(w)  # its changes are in the topic before the test reads it

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 30
    while len(writes) < 20 and writer.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        snapshotter.execute(f"CALL kafgres.snapshot('{name}', 4)")
    finally:
        stop.set()
        writer.join(60)
    assert not writer.is_alive() and writes
    wait_applied(snapshotter)
    count = end_offset(make_consumer, topic)
    records = changes(consume, topic, count)
    table_now = {r[0]: {"id": r[0], "v": r[1], "pad": r[2]} for r in conn.execute(f"SELECT id, v, pad FROM {name}")}
    assert replay(records) == table_now
    untouched = set(range(1, rows + 1)) - set(writes)
    snapshot_reads = [r["key"]["id"] for r in records if r["value"] and r["value"]["op"] == "r"]
    assert sorted(k for k in snapshot_reads if k in untouched) == sorted(untouched), "an untouched row not read once"
    state, done, total, percent = conn.execute(
        "SELECT snapshot_state, snapshot_pages_done, snapshot_pages_total, snapshot_percent FROM "
        "kafgres.capture_status WHERE relation = %s::regclass", (f"public.{name}",)).fetchone()
    assert (state, done, total, float(percent)) == ("done", pages_total, pages_total, 100.0)

    with pytest.raises(errors.UndefinedObject, match="is not captured"):
        snapshotter.execute("CALL kafgres.snapshot('kafgres.captures')")


def call_quietly(conn, statement: str) -> None:
    """Runs a statement expected to be cancelled."""
    try:
        conn.execute(statement)
    except errors.QueryCanceled:
        pass


def test_a_table_of_1000_columns_and_rows_of_10_kb(pg_connect, table, consume):
    wide = table(", ".join(["id int PRIMARY KEY"] + [f"c{i} int" for i in range(1, 1000)]))
    conn = pg_connect(autocommit=True)
    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{wide}", f"cdc.{wide}"))
    conn.execute(f"INSERT INTO {wide} (id, c1, c999) VALUES (1, 1, 999)")
    conn.execute(f"UPDATE {wide} SET c500 = 500")
    big = table("id int PRIMARY KEY, body text, blob bytea")
    conn.execute("SELECT kafgres.capture(%s, %s, format => 'row')", (f"public.{big}", f"cdc.{big}"))
    body = "".join(random.Random(3).choice("abcdefghij") for _ in range(10_000))
    conn.execute(f"INSERT INTO {big} VALUES (1, %s, %s)", (body, body.encode()))
    conn.execute(f"UPDATE {big} SET body = body || 'z'")
    wait_applied(conn)
    created, updated = changes(consume, f"cdc.{wide}", 2)
    assert len(created["value"]["after"]) == 1000 and created["value"]["after"]["c999"] == 999
    assert updated["value"]["before"]["c500"] is None and updated["value"]["after"]["c500"] == 500
    assert sum(v is not None for v in updated["value"]["after"].values()) == 4
    created, updated = changes(consume, f"cdc.{big}", 2)
    assert created["value"]["body"] == body and updated["value"]["body"] == body + "z"
    assert created["value"]["blob"] == "\\x" + body.encode().hex()


def test_schema_changes_give_the_next_change_the_new_shape(pg_connect, table, consume):
    """The triggers carry what they need of the table (key columns, which columns need mapping); ALTER TABLE and
    DROP INDEX give them the new one in the DDL's own transaction."""
    name = table("id int NOT NULL, v text")
    conn = pg_connect(autocommit=True)
    conn.execute(f"CREATE UNIQUE INDEX {name}_id ON {name} (id)")
    conn.execute(f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {name}_id")
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", topic))
    conn.execute(f"INSERT INTO {name} VALUES (1, 'keyed by the replica identity')")
    conn.execute(f"ALTER TABLE {name} ADD COLUMN price numeric(6, 2) DEFAULT 1.5")
    conn.execute(f"INSERT INTO {name} (id, v) VALUES (2, 'a numeric column, mapped as a string')")
    conn.execute(f"DROP INDEX {name}_id")
    conn.execute(f"INSERT INTO {name} (id, v) VALUES (3, 'no key any more')")
    conn.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id, v)")
    conn.execute(f"INSERT INTO {name} (id, v) VALUES (4, 'a two-column key')")
    with conn.transaction():  # the DDL and a change in one transaction: the change has the new shape
        conn.execute(f"ALTER TABLE {name} ALTER COLUMN price TYPE int USING price::int")
        conn.execute(f"INSERT INTO {name} (id, v, price) VALUES (5, 'int now', 7)")
    wait_applied(conn)
    got = changes(consume, topic, 5)
    assert [c["key"] for c in got] == [{"id": 1}, {"id": 2}, None, {"id": 4, "v": "a two-column key"},
                                       {"id": 5, "v": "int now"}]
    assert got[0]["value"]["after"] == {"id": 1, "v": "keyed by the replica identity"}
    assert got[1]["value"]["after"]["price"] == "1.50"
    assert got[4]["value"]["after"]["price"] == 7


def test_the_lag_counts_from_the_commit_while_changes_wait(pg_connect, table, consume):
    """bridge_lag is how long the oldest committed change not yet in its topic has waited: the bridge is stopped
    (SIGSTOP) while a change commits, so the change waits, and the lag grows from its COMMIT; once delivered, the
    lag is 0 and last_commit_at is its commit."""
    name = table("id int PRIMARY KEY")
    conn = pg_connect(autocommit=True)
    topic = f"cdc.{name}"
    conn.execute("SELECT kafgres.capture(%s, %s)", (f"public.{name}", topic))
    wait_applied(conn)
    status = (f"SELECT extract(epoch FROM bridge_lag), extract(epoch FROM last_commit_at) FROM kafgres.capture_status "
              f"WHERE relation = 'public.{name}'::regclass")
    pid = conn.execute("SELECT pid FROM kafgres.sql_bridge_status").fetchone()[0]
    assert pid, "the SQL bridge is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        conn.execute(f"INSERT INTO {name} VALUES (1)")
        committed = time.time()
        time.sleep(1.5)
        lag, _ = conn.execute(status).fetchone()
        waited = time.time() - committed
        assert waited - 0.5 <= float(lag) <= waited + 0.5, (lag, waited)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_applied(conn)
    lag, last_commit = conn.execute(status).fetchone()
    assert float(lag) == 0.0
    assert committed - 1.0 <= float(last_commit) <= committed + 1.0, (last_commit, committed)
    assert [c["key"] for c in changes(consume, topic, 1)] == [{"id": 1}]


def test_a_whole_schema_is_captured_with_the_tables_created_later(pg_connect, consume):
    """capture_schema captures every table of a schema (a partitioned one through its parent), then each table
    created in it later, to <database>.<schema>.<table> or to one topic; uncapture_schema ends them all."""
    conn = pg_connect(autocommit=True)
    schema, single = f"cdc_s_{uuid.uuid4().hex[:8]}", f"cdc_one_{uuid.uuid4().hex[:8]}"
    try:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.a (id int PRIMARY KEY, v text)")
        conn.execute(f"CREATE TABLE {schema}.p (id int PRIMARY KEY) PARTITION BY RANGE (id)")
        conn.execute(f"CREATE TABLE {schema}.p1 PARTITION OF {schema}.p FOR VALUES FROM (0) TO (100)")
        captured = conn.execute("SELECT relation::text, topic_name FROM kafgres.capture_schema(%s) ORDER BY 1",
                                (schema,)).fetchall()
        assert captured == [(f"{schema}.a", f"postgres.{schema}.a"), (f"{schema}.p", f"postgres.{schema}.p")]
        conn.execute(f"CREATE TABLE {schema}.later (id int PRIMARY KEY)")
        conn.execute(f"CREATE TABLE {schema}.made AS SELECT 1 AS id")
        conn.execute(f"INSERT INTO {schema}.a VALUES (1, 'x')")
        conn.execute(f"INSERT INTO {schema}.p VALUES (5)")
        conn.execute(f"INSERT INTO {schema}.later VALUES (7)")
        conn.execute(f"INSERT INTO {schema}.made VALUES (2)")
        wait_applied(conn)
        assert changes(consume, f"postgres.{schema}.a", 1)[0]["value"]["after"] == {"id": 1, "v": "x"}
        partition_change = changes(consume, f"postgres.{schema}.p", 1)[0]
        assert partition_change["value"]["after"] == {"id": 5} and partition_change["value"]["source"]["table"] == "p1"
        assert changes(consume, f"postgres.{schema}.later", 1)[0]["key"] == {"id": 7}
        assert changes(consume, f"postgres.{schema}.made", 1)[0]["value"]["after"] == {"id": 2}

        # One topic for a schema; uncapture_schema ends its captures and stops capturing new tables.
        conn.execute(f"CREATE SCHEMA {single}")
        conn.execute(f"CREATE TABLE {single}.x (id int PRIMARY KEY)")
        topic = f"cdc.{single}"
        conn.execute("SELECT * FROM kafgres.capture_schema(%s, topic => %s, format => 'row')", (single, topic))
        conn.execute(f"CREATE TABLE {single}.y (id int PRIMARY KEY)")
        conn.execute(f"INSERT INTO {single}.x VALUES (1)")
        conn.execute(f"INSERT INTO {single}.y VALUES (2)")
        wait_applied(conn)
        both = changes(consume, topic, 2)
        assert [(c["headers"]["kafgres.table"], c["value"]) for c in both] == [
            (f"{single}.x", {"id": 1}), (f"{single}.y", {"id": 2})]
        assert conn.execute("SELECT kafgres.uncapture_schema(%s)", (single,)).fetchone()[0] == 2
        conn.execute(f"CREATE TABLE {single}.z (id int PRIMARY KEY)")
        assert conn.execute("SELECT count(*) FROM kafgres.captures WHERE relation::text LIKE %s",
                            (f"{single}.%",)).fetchone()[0] == 0
        assert conn.execute("SELECT kafgres.uncapture_schema(%s)", (single,)).fetchone()[0] == 0

        with pytest.raises(errors.InvalidSchemaName):
            conn.execute("SELECT * FROM kafgres.capture_schema('no_such_schema')")
        with pytest.raises(errors.InvalidParameterValue):
            conn.execute("SELECT * FROM kafgres.capture_schema('kafgres')")
        captured_oids = [r[0] for r in conn.execute("SELECT relation::oid FROM kafgres.captures "
                                                    "WHERE relation::text LIKE %s", (f"{schema}.%",)).fetchall()]
        assert len(captured_oids) == 4
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"DROP SCHEMA IF EXISTS {single} CASCADE")
    # A dropped schema ends its schema capture and its tables' captures.
    assert conn.execute("SELECT count(*) FROM kafgres.schema_captures WHERE schema_name = %s",
                        (schema,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM kafgres.captures WHERE relation::oid = ANY(%s)",
                        (captured_oids,)).fetchone()[0] == 0


def test_connect_schema_defaults_never_run_the_databases_own_functions(pg_connect, table):
    """A column default goes into the Connect schema only when it is built of built-in immutable functions: it is
    evaluated with the extension owner's rights inside the capture trigger, so a user's function (even one declared
    IMMUTABLE) or a domain's CHECK is left out, never called."""
    conn = pg_connect(autocommit=True)
    suffix = uuid.uuid4().hex[:8]
    conn.execute(f"CREATE FUNCTION public.cdc_mine_{suffix}() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 42'")
    conn.execute(f"CREATE DOMAIN public.cdc_positive_{suffix} AS int CHECK (VALUE > 0)")
    try:
        name = table(f"id serial PRIMARY KEY, mine int DEFAULT public.cdc_mine_{suffix}(), seven int DEFAULT 3 + 4, "
                     f"checked public.cdc_positive_{suffix} DEFAULT 3, label text NOT NULL DEFAULT 'x'")
        defaults = dict(conn.execute("SELECT field, default_value FROM kafgres._capture_connect_fields(%s)",
                                     (f"public.{name}",)).fetchall())
        assert defaults == {"id": 0, "mine": None, "seven": 7, "checked": None, "label": "x"}
        conn.execute(f"DROP TABLE public.{name}")
    finally:
        conn.execute(f"DROP FUNCTION IF EXISTS public.cdc_mine_{suffix}()")
        conn.execute(f"DROP DOMAIN IF EXISTS public.cdc_positive_{suffix}")
