"""A Kafka Connect sink consumes captured changes with their Connect schemas
(docs/cdc.md, `kafgres.capture(..., schemas => true)`).

A table is captured with schemas; a Connect 4.1.1 worker (the one of
test_connect.py, its group and storage topics in Kafgres) runs
FileStreamSink on the capture's topic with Kafka's JsonConverter at
`schemas.enable=true` for keys and values, and Debezium 3.6.1's own
`ExtractNewRecordState` transform (deletes rewritten with `__deleted`,
tombstones dropped), which accepts only records whose value schema is
Debezium's change envelope. So the records pass two checks Kafgres does not
control: the converter turns every payload into a Connect Struct of its
schema (a value that does not fit its field's type fails the task), and the
transform finds Debezium's envelope in it. The sink's file must then hold
each change's new row state (the Struct's text), in commit order: inserts,
an update, a delete marked `__deleted=true`, and the rows of a column added
by ALTER TABLE, which the schema carries from the first change after the DDL.

The classpath is test_connect.py's (connect-runtime, connect-file) followed
by the Debezium classpath of scripts/bench/debezium-pom.xml (the transform).
Needs Java 17+ and Maven; every wait has a deadline.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

import test_connect as connect
from support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts" / "bench"))
from debezium_env import DEBEZIUM_CLASSPATH, DEBEZIUM_POM, resolve_classpath  # noqa: E402

FLOW_TIMEOUT_S = 60.0


def wait_for_lines(worker: connect.Worker, path: Path, count: int) -> list[str]:
    deadline = time.monotonic() + FLOW_TIMEOUT_S
    lines: list[str] = []
    while time.monotonic() < deadline:
        worker.check_running()
        lines = connect.file_lines(path)
        if len(lines) >= count:
            return lines
        time.sleep(0.5)
    pytest.fail(f"{len(lines)} of {count} lines in the sink's file within {FLOW_TIMEOUT_S:.0f}s: {lines}\n"
                f"{worker.log_tail()}")


def test_a_connect_sink_reads_changes_with_schemas(pg_connect, bootstrap, admin, tmp_path):
    run = uuid.uuid4().hex[:8]
    table = f"public.sink_{run}"
    conn = pg_connect(autocommit=True)
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text NOT NULL, price numeric(8, 2), "
                 "placed timestamptz, tags text[], doc jsonb, day date)")
    topics: list[str] = []
    classpath = connect.ensure_classpath() + ":" + resolve_classpath(DEBEZIUM_POM, DEBEZIUM_CLASSPATH)
    properties = tmp_path / "worker.properties"
    properties.write_text(connect.worker_properties(bootstrap, run, exactly_once=False))
    sink_file = tmp_path / "sink.txt"
    worker = None
    try:
        topic = conn.execute("SELECT kafgres.capture(%s, schemas => true)", (table,)).fetchone()[0]
        topics.append(topic)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'alpha', 12.34, '2024-01-02 03:04:05.5+01', "
                     "'{a,b}', '{\"k\": [1, 2]}', '2024-02-29')")
        conn.execute(f"INSERT INTO {table} (id, name) VALUES (2, 'beta')")
        conn.execute(f"UPDATE {table} SET price = 0.5, name = 'alpha2' WHERE id = 1")
        conn.execute(f"DELETE FROM {table} WHERE id = 2")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN note text")
        conn.execute(f"INSERT INTO {table} (id, name, note) VALUES (3, 'gamma', 'added')")
        assert conn.execute("SELECT kafgres.wait_for_sends()").fetchone()[0]

        worker = connect.Worker(classpath, properties, tmp_path / "connect.log")
        worker.wait_ready()
        converter = "org.apache.kafka.connect.json.JsonConverter"
        connect.put_connector(worker, f"sink-{run}", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(sink_file),
            "key.converter": converter,
            "key.converter.schemas.enable": "true",
            "value.converter": converter,
            "value.converter.schemas.enable": "true",
            "transforms": "unwrap",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
            "consumer.override.auto.offset.reset": "earliest",
        })
        connect.wait_running(worker, f"sink-{run}")
        lines = wait_for_lines(worker, sink_file, 5)
        assert lines == [
            "Struct{id=1,name=alpha,price=12.34,placed=2024-01-02T02:04:05.500000Z,tags=[a, b],"
            "doc={\"k\": [1, 2]},day=19782,__deleted=false}",
            "Struct{id=2,name=beta,__deleted=false}",
            "Struct{id=1,name=alpha2,price=0.50,placed=2024-01-02T02:04:05.500000Z,tags=[a, b],"
            "doc={\"k\": [1, 2]},day=19782,__deleted=false}",
            "Struct{id=2,name=beta,__deleted=true}",
            "Struct{id=3,name=gamma,note=added,__deleted=false}",
        ], lines
        assert connect.error_lines(worker.log) == []
    finally:
        if worker is not None:
            worker.stop()
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        connect.cleanup(admin, run, topics, [f"connect-sink-{run}"])
