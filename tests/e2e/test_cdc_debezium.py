"""Kafgres's change records against Debezium's own (docs/cdc.md): the same
table, of every column type the mapping knows, gets the same changes on the
dev cluster (captured by `kafgres.capture`) and on a Postgres of its own
watched by Debezium's PostgreSQL connector 3.6.1.Final in a Kafka Connect
4.1.1 worker writing to Apache Kafka 4.1.1 (scripts/bench/debezium_env.py,
from Maven Central's jars, on ports 5470, 19470 and 18470), with the JSON
converter with schemas (`schemas.enable=true`, its default) and
`decimal.handling.mode=string`, as docs/cdc.md says Kafgres writes. The
Debezium table has REPLICA IDENTITY FULL, so that its `before` is the whole
old row as Kafgres's is.

Kafgres captures two copies of the table: one without Connect schemas (the
default) and one with them (`schemas => true`). Every record's key must be
byte for byte Debezium's (the schemaless one: Debezium's payload), and its
op, before and after equal to Debezium's column by column, with no
exception. With schemas, the key's schema must be byte for byte Debezium's
and the value's schema equal to Debezium's field by field (names apart: the
logical name and table differ). Tombstones come in the same places. The
environment is torn down at the end, also on failure.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
from debezium_env import debezium_capture  # noqa: E402

BEFORE_TABLE = (
    "CREATE TYPE public.cdc_mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE DOMAIN public.cdc_price AS numeric(8, 2)",
)
COLUMNS = (
    "id int PRIMARY KEY, small smallint, big bigint, exact numeric(10, 2), loose numeric, real_v real, "
    "double_v double precision, flag boolean, name_v text, code varchar(8), fixed char(3), uid uuid, blob bytea, "
    "doc json, docb jsonb, day date, clock time, clock_ms time(3), clock_tz timetz, moment timestamp, "
    "moment_ms timestamp(3), instant timestamptz, span interval, ints int[], texts text[], feeling public.cdc_mood, "
    "cost public.cdc_price, addr inet, cash money, bit1 bit(1), instant0 timestamptz(0), instant3 timestamptz(3), "
    "clock_tz3 timetz(3), span_months interval, bits bit(4), varbits bit varying(12), "
    "notnull_text text NOT NULL DEFAULT 'x', dflt int DEFAULT 7, ser serial"
)
CHANGES = (
    "INSERT INTO {t} VALUES (1, -3, 9007199254740993, 1234.50, 3.14159265358979323846, 1.5, 2.25, true, "
    "'héllo \"quoted\"', 'code', 'ab', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff10', "
    "'{{\"a\": [1, 2]}}', '{{\"b\": {{\"c\": null}}}}', '2024-02-29', '13:14:15.123456', '13:14:15.123', "
    "'13:14:15+02', '2024-01-02 03:04:05.678901', '2024-01-02 03:04:05.678', '2024-01-02 03:04:05.5+01', "
    "'1 day 02:03:04.5', '{{1,NULL,3}}', '{{\"x\",\"y z\"}}', 'happy', 12.34, '192.168.0.1/24', 12.34, B'1', "
    "'2024-01-02 03:04:05.678+01', '2024-01-02 03:04:05.5+01', '13:14:15.5+02', '1 year 2 months 3 days 04:05:06', "
    "B'1010', B'110000000001')",
    "INSERT INTO {t} (id) VALUES (2)",
    "INSERT INTO {t} (id, bits, varbits, span_months, instant3, exact) "
    "VALUES (4, B'0000', B'000000000001', '-1 mon -1 sec', '2024-01-02 03:04:05+01', -0.5)",
    "UPDATE {t} SET exact = 0.01, name_v = 'changed', ints = '{{}}', instant = '1999-12-31 23:59:59Z' WHERE id = 1",
    "DELETE FROM {t} WHERE id = 2",
    "UPDATE {t} SET id = 3 WHERE id = 1",
)
# Delete, tombstone and create for the key change: one record per change otherwise, plus the delete's tombstone.
RECORDS = 3 + 1 + 2 + 3
READ_TIMEOUT_S = 60.0


def read(bootstrap: str, topic: str, count: int) -> list[tuple[object, object]]:
    """The topic's first `count` records as (key bytes, value parsed from JSON or None for null)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cdc-dbz-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[object, object]] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            out.append((msg.key(), json.loads(msg.value()) if msg.value() is not None else None))
    finally:
        consumer.close()
    assert len(out) == count, f"{len(out)} of {count} records from {topic}: {out}"
    return out


CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
WITH_SCHEMAS = {"key.converter": CONVERTER, "key.converter.schemas.enable": "true",
                "value.converter": CONVERTER, "value.converter.schemas.enable": "true"}


def renamed(text: str, theirs: str, ours: str) -> str:
    """Debezium's schema names (<topic.prefix>.<schema>.<table>.Value) as Kafgres's for its table."""
    return text.replace(f"{theirs}.", f"{ours}.")


def essence(records: list[tuple[object, object]]) -> list[tuple]:
    """What must agree: key, op, before, after (source differs: connector name, version, lsn, times)."""
    return [(k, None) if v is None else (k, v["op"], v["before"], v["after"]) for k, v in records]


def column_differences(ours: list[tuple], theirs: list[tuple]) -> list[str]:
    out = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a[:2] != b[:2]:
            out.append(f"record {i}: key/op {a[:2]} != Debezium's {b[:2]}")
            continue
        for side, x, y in (("before", a[2] if len(a) > 2 else None, b[2] if len(b) > 2 else None),
                           ("after", a[3] if len(a) > 3 else None, b[3] if len(b) > 3 else None)):
            if (x is None) != (y is None):
                out.append(f"record {i} {side}: {x} != Debezium's {y}")
                continue
            for column in sorted(set(x or {}) | set(y or {})):
                if (x or {}).get(column, "<absent>") != (y or {}).get(column, "<absent>"):
                    out.append(f"record {i} {side}.{column}: {(x or {}).get(column, '<absent>')!r} != "
                               f"Debezium's {(y or {}).get(column, '<absent>')!r}")
    return out


def test_kafgres_writes_what_debezium_writes(pg_connect, bootstrap):
    table = f"cdc_dbz_{uuid.uuid4().hex[:8]}"
    with_schemas = f"{table}_s"
    conn = pg_connect(autocommit=True)
    for statement in BEFORE_TABLE:
        conn.execute(statement.replace("public.cdc_", f"public.{table}_"))
    ours_columns = COLUMNS.replace("public.cdc_", f"public.{table}_")
    conn.execute(f"CREATE TABLE public.{table} ({ours_columns})")
    conn.execute(f"CREATE TABLE public.{with_schemas} ({ours_columns})")
    with contextlib.ExitStack() as stack:
        stack.callback(conn.execute, f"DROP DOMAIN IF EXISTS public.{table}_price")
        stack.callback(conn.execute, f"DROP TYPE IF EXISTS public.{table}_mood")
        stack.callback(conn.execute, f"DROP TABLE IF EXISTS public.{table}, public.{with_schemas}")
        topic = conn.execute("SELECT kafgres.capture(%s)", (f"public.{table}",)).fetchone()[0]
        schemas_topic = conn.execute("SELECT kafgres.capture(%s, schemas => true)",
                                     (f"public.{with_schemas}",)).fetchone()[0]
        # A directory the postgres user can enter (pytest's tmp_path is private to root).
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafgres-debezium-")))
        with debezium_capture(table, COLUMNS, workdir, before_table=BEFORE_TABLE,
                              after_table=(f"ALTER TABLE public.{table} REPLICA IDENTITY FULL",),
                              connector_settings=WITH_SCHEMAS) as debezium:
            with psycopg.connect(debezium.pg_conninfo, autocommit=True) as theirs_conn:
                for change in CHANGES:
                    conn.execute(change.format(t=table))
                    conn.execute(change.format(t=with_schemas))
                    theirs_conn.execute(change.format(t=table))
            assert conn.execute("SELECT kafgres.wait_for_sends()").fetchone()[0]
            theirs_with_schemas = read(debezium.bootstrap, debezium.topic, RECORDS)
        ours_records = read(bootstrap, topic, RECORDS)
        ours_with_schemas = read(bootstrap, schemas_topic, RECORDS)
        # Debezium's key and value as its converter writes them without schemas: their payloads, byte for byte.
        marker = b',"payload":'
        theirs_records = [(k[k.index(marker) + len(marker):-1], None if v is None else v["payload"])
                          for k, v in theirs_with_schemas]
        # The envelope has Debezium's fields, its source block too (their values differ: connector name, times).
        for (_, a), (_, b) in zip(ours_records, theirs_records):
            if a is not None and b is not None:
                assert sorted(a) == sorted(b) and sorted(a["source"]) == sorted(b["source"]), (a, b)
        theirs, ours = essence(theirs_records), essence(ours_records)
        # Keys byte for byte (a compacted topic or a partitioner sees the bytes).
        assert [k for k, *_ in ours] == [k for k, *_ in theirs], "record keys differ from Debezium's"
        # Values column by column.
        differences = column_differences(ours, theirs)
        assert not differences, "Kafgres's records differ from Debezium's:\n" + "\n".join(differences)
        assert len(ours) == len(theirs) == RECORDS
        # With schemas: the key byte for byte Debezium's, the value's schema field by field, the same payloads.
        their_name, our_name = f"bench.public.{table}", f"kafgres.public.{with_schemas}"
        for i, ((our_key, our_value), (their_key, their_value)) in enumerate(zip(ours_with_schemas,
                                                                                  theirs_with_schemas)):
            assert our_key.decode() == renamed(their_key.decode(), their_name, our_name), (i, our_key, their_key)
            assert (our_value is None) == (their_value is None), (i, our_value, their_value)
            if our_value is None:
                continue
            assert sorted(our_value) == ["payload", "schema"], our_value
            expected_schema = json.loads(renamed(json.dumps(their_value["schema"]), their_name, our_name))
            ours_fields = {f["field"]: f for f in our_value["schema"]["fields"]}
            for field in expected_schema["fields"]:
                assert ours_fields.get(field["field"]) == field, (i, field["field"], ours_fields.get(field["field"]),
                                                                  field)
            assert our_value["schema"] == expected_schema
        assert essence([(None, v and v["payload"]) for _, v in ours_with_schemas]) == \
            essence([(None, v) for _, v in ours_records])

