"""Upgrades keep everything (docs/operations.md, "Upgrades").

The first released schema, 0.1.0 (`crates/kafgres/sql/kafgres--0.1.0.sql`, as
pgrx generated it then, installed next to the current scripts by `./kafgres
start`), is installed with `CREATE EXTENSION kafgres VERSION '0.1.0'` and
filled the way a 0.1.0 broker filled its catalog; `ALTER EXTENSION kafgres
UPDATE` then runs the upgrade scripts in order. Checked:

- on scratch databases of the dev cluster: every row survives, and the updated
  schema is the one a fresh `CREATE EXTENSION kafgres` makes, object for object
  (tables, columns, defaults, constraints, indexes, views, functions with their
  C symbols and settings, comments, privileges, what pg_dump keeps: the
  fingerprint of `sql/schema_fingerprint.sql`), so an upgrade script that
  forgets what schema.sql gained fails here;
- on a throwaway cluster of its own (Postgres on 127.0.0.1:5488, Kafka on
  127.0.0.1:9488) given what a real 0.1.0 broker left after clients used it
  through its Kafka port (`fixtures/upgrade-0.1.0`: its catalog rows and its
  log directory, made by that directory's make.py from release 0.1.0 built
  from this repository's history): the worker says "run ALTER EXTENSION
  kafgres UPDATE" and waits (no crash loop); after the update it serves every
  topic, record, end offset and committed offset as 0.1.0 served them, and
  takes new records and transactions after them.

`check_function_bodies = off` while 0.1.0 is created: its C functions are
checked against the current library only once the update has replaced them.
Every wait has a deadline; scratch databases and the cluster are removed at
the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka import KafkaAdminClient

from support import PG_BIN, ThrowawayCluster, port_is_free, produce_all, read_committed_rows

FIRST_RELEASE = "0.1.0"
FINGERPRINT = (Path(__file__).parent / "sql" / "schema_fingerprint.sql").read_text()
PG_PORT = 5488
KAFKA_PORT = 9488
READY_TIMEOUT_S = 60.0

TOPIC_ID = "6f1d2c3b-4a59-4e68-8f7a-9b0c1d2e3f40"
FILL_0_1_0 = [
    f"INSERT INTO kafgres.topics (topic_id, name, partition_count, configs) "
    f"VALUES ('{TOPIC_ID}', 'kept-orders', 2, '{{\"retention.ms\": \"86400000\"}}')",
    "INSERT INTO kafgres.consumer_offsets (group_id, topic, partition, committed_offset, leader_epoch, metadata) "
    "VALUES ('billing', 'kept-orders', 0, 0, -1, 'm0'), ('billing', 'kept-orders', 1, 0, -1, NULL)",
    "INSERT INTO kafgres.transactions (transactional_id, producer_id, producer_epoch, timeout_ms, state, "
    "started_at) VALUES ('kept-txn', 7, 2, 60000, 'Empty', now())",
    "UPDATE kafgres.cluster SET next_producer_id = 1000",
]
KEPT_ROWS = [
    ("SELECT name, partition_count, configs->>'retention.ms' FROM kafgres.topics",
     [("kept-orders", 2, "86400000")]),
    ("SELECT group_id, topic, partition, committed_offset, metadata FROM kafgres.consumer_offsets ORDER BY partition",
     [("billing", "kept-orders", 0, 0, "m0"), ("billing", "kept-orders", 1, 0, None)]),
    ("SELECT transactional_id, producer_id, producer_epoch, state FROM kafgres.transactions",
     [("kept-txn", 7, 2, "Empty")]),
    ("SELECT next_producer_id FROM kafgres.cluster", [(1000,)]),
]


def rows(conn, query: str) -> list[tuple]:
    return conn.execute(query).fetchall()


def fingerprint(conn) -> list[str]:
    return [r[0] for r in conn.execute(FINGERPRINT).fetchall()]


@pytest.fixture
def scratch_databases(kafgres):
    names = [f"kafgres_upgrade_{tag}_{uuid.uuid4().hex[:6]}" for tag in ("updated", "fresh")]
    conninfo = dict(host=kafgres.env["PGHOST"], port=kafgres.env["PGPORT"], user=kafgres.env["PGUSER"],
                    connect_timeout=10)
    with psycopg.connect(dbname=kafgres.env["PGDATABASE"], autocommit=True, **conninfo) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            connections = [psycopg.connect(dbname=name, autocommit=True, **conninfo) for name in names]
            try:
                yield connections
            finally:
                for conn in connections:
                    conn.close()
        finally:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_an_update_from_the_first_release_keeps_every_row_and_ends_at_the_fresh_schema(scratch_databases):
    updated, fresh = scratch_databases
    updated.execute("SET check_function_bodies = off")
    updated.execute(f"CREATE EXTENSION kafgres VERSION '{FIRST_RELEASE}'")
    for statement in FILL_0_1_0:
        updated.execute(statement)
    updated.execute("ALTER EXTENSION kafgres UPDATE")
    fresh.execute("CREATE EXTENSION kafgres")
    (current,) = rows(fresh, "SELECT extversion FROM pg_extension WHERE extname = 'kafgres'")[0]
    assert current != FIRST_RELEASE
    assert rows(updated, "SELECT extversion FROM pg_extension WHERE extname = 'kafgres'") == [(current,)]
    for query, expected in KEPT_ROWS:
        assert rows(updated, query) == expected, query
    got, want = fingerprint(updated), fingerprint(fresh)
    assert len(want) > 100, "the fingerprint sees the schema"
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    assert not missing and not extra, (
        f"ALTER EXTENSION kafgres UPDATE from {FIRST_RELEASE} does not end at the schema of a fresh install:\n"
        f"missing after the update: {missing}\nleft over by the update: {extra}"
    )


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("upgrade", PG_PORT, KAFKA_PORT)


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is an upgrade-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({"kafgres.group_initial_rebalance_delay_ms": "0"})
        c.start()
        yield c
    finally:
        c.destroy()


def wait_for_log(cluster: Cluster, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in cluster.log_text():
        assert time.monotonic() < deadline, f"the server log never said {text!r}:\n{cluster.log_tail()}"
        time.sleep(0.1)


FIXTURE = Path(__file__).parent / "fixtures" / "upgrade-0.1.0"


def load_catalog(cluster: Cluster, catalog_sql: Path) -> None:
    """The 0.1.0 catalog rows (COPY statements) into the cluster's database, with psql."""
    loaded = subprocess.run(
        [str(PG_BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(PG_PORT),
         "-U", "postgres", "-d", "postgres", "-1", "-f", str(catalog_sql)],
        capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr


def test_a_log_and_catalog_a_0_1_0_broker_wrote_are_served_after_the_update(cluster: Cluster):
    """What a 0.1.0 broker left after clients used it through the Kafka port (the fixture
    `fixtures/upgrade-0.1.0`, made by its make.py from release 0.1.0 built from this repository's
    history): its catalog rows under the 0.1.0 schema and its log directory. The current library
    waits with "run ALTER EXTENSION kafgres UPDATE" and serves nothing; after the update it serves
    every topic with its configs, every record as 0.1.0 served it (keys, values, headers,
    timestamps, gzip batches, committed transactions without the aborted one, what the SQL API sent
    without what it rolled back), the same end offsets, the groups' committed offsets with their
    metadata (one committed by kafgres.consume), the latest value of every key of
    the compacted topic; new records follow the old ones, and the 0.1.0 transactional id starts a
    new transaction."""
    expected = json.loads((FIXTURE / "expected.json").read_text())
    cluster.sql("SET check_function_bodies = off", f"CREATE EXTENSION kafgres VERSION '{FIRST_RELEASE}'")
    load_catalog(cluster, FIXTURE / "catalog.sql")
    # As an operator upgrades: the server stops, the 0.1.0 log directory is in place, the new
    # library starts on it.
    cluster.stop("fast")
    log_dir = cluster.pgdata / "kafgres"
    log_dir.mkdir(exist_ok=True)
    with tarfile.open(FIXTURE / "log.tar.gz") as tar:
        # Checked by hand: Debian 12's Python 3.11.2 has no extraction filters (3.11.4+).
        for member in tar.getmembers():
            path = Path(member.name)
            assert (member.isfile() or member.isdir()) and not path.is_absolute() and ".." not in path.parts, member
        tar.extractall(log_dir)
    subprocess.run(["chown", "-R", "postgres:postgres", str(log_dir)], check=True, timeout=30)
    cluster.start()
    wait_for_log(cluster, "ALTER EXTENSION kafgres UPDATE", READY_TIMEOUT_S)
    assert cluster.log_text().count("kafgres: leading in epoch") == 0, "a broker started on the 0.1.0 schema"
    cluster.sql("ALTER EXTENSION kafgres UPDATE")
    cluster.wait_until_serving(READY_TIMEOUT_S)
    bootstrap = cluster.bootstrap

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        topics = admin.list_topics(timeout=10).topics
        if set(expected["topics"]) <= set(topics) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for name, spec in expected["topics"].items():
        assert name in topics, f"the 0.1.0 topic {name} is not served: {sorted(topics)}"
        assert len(topics[name].partitions) == spec["partitions"], name
        if spec["configs"]:
            described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
            configs = next(iter(described.values())).result(timeout=10)
            for key, value in spec["configs"].items():
                assert configs[key].value == value, f"{name} {key}"

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-offsets", "enable.auto.commit": False})
    try:
        for partition_name, end in expected["end_offsets"].items():
            topic, partition = partition_name.rsplit("/", 1)
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=10)
            assert high == end, f"{partition_name}: end offset {high}, 0.1.0 had {end}"
    finally:
        consumer.close()
    for partition_name, records in expected["records"].items():
        topic, partition = partition_name.rsplit("/", 1)
        got = read_committed_rows(bootstrap, topic, int(partition), expected["end_offsets"][partition_name])
        if topic == "kept-compacted":
            # The cleaner may have run since: the latest value of every key is what stays.
            assert {r[1]: r[2] for r in got} == {r[1]: r[2] for r in records}, partition_name
        else:
            assert got == records, f"{partition_name} differs from what 0.1.0 served"
    for partition_name in ("kept-txn/0", "kept-sql/0"):
        values = {r[2] for r in expected["records"][partition_name]}
        assert values and not values & set(expected["aborted_values"]), f"{partition_name}: nothing aborted shows"

    # Read with kafka-python: confluent-kafka's TopicPartition.metadata reads past the end of metadata
    # that is not NUL-terminated (2.12.2).
    offsets_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        for group_id, want in expected["committed"].items():
            committed = offsets_admin.list_group_offsets(group_id)[group_id]
            assert {f"{tp.topic}/{tp.partition}": [o.offset, o.metadata] for tp, o in committed.items()} == want, \
                group_id
    finally:
        offsets_admin.close()

    reports = produce_all(Producer({"bootstrap.servers": bootstrap, "acks": "all"}),
                          [dict(topic="kept-orders", partition=p, value=f"after-{p}".encode()) for p in (0, 1)])
    assert [m.offset() for m in reports] == [expected["end_offsets"][f"kept-orders/{p}"] for p in (0, 1)]
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kept-txn-producer"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("kept-txn", value=b"after-the-update", partition=0)
    txn.commit_transaction(30)
    after = read_committed_rows(bootstrap, "kept-txn", 0)
    assert [r[2] for r in after[len(expected["records"]["kept-txn/0"]):]] == ["after-the-update"]
    assert "terminated by signal" not in cluster.log_text(), cluster.log_tail()


DUMPED_ROWS = [
    "SELECT cluster_id, next_producer_id, internal_secret FROM kafgres.cluster",
    "SELECT name, partition_count FROM kafgres.topics ORDER BY name",
    "SELECT relation::text, topic, format, columns, row_filter, tombstones, schemas FROM kafgres.captures ORDER BY 1",
    "SELECT schema_name, topic, topic_prefix, format, schemas FROM kafgres.schema_captures",
    "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "WHERE t.tgname LIKE 'kafgres_capture%' ORDER BY 1, 2",
]


def test_pg_dump_and_restore_keep_topics_captures_and_schema_captures(scratch_databases, kafgres):
    """A database dumped with pg_dump and restored into an empty one (psql) gets the extension, its cluster row (the
    restore's copy replaces the one CREATE EXTENSION made, id and reserved producer ids), its topics, its
    captures (a table with a column list and a row filter, a schema with Connect schemas) and their triggers back
    as they were, and the restored schema capture captures a table created after the restore. The tables exist
    before the catalog rows are restored, so the CREATE TABLE event trigger leaves them alone."""
    source, target = scratch_databases
    source.execute("CREATE EXTENSION kafgres")
    source.execute("UPDATE kafgres.cluster SET next_producer_id = 4242")
    target.execute("SELECT 1")  # an empty database: the dump creates the extension
    for topic in ("orders.cdc", "dump.sales.invoice", "dump.sales.later"):
        source.execute(f"INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES "
                       f"(gen_random_uuid(), '{topic}', 1)")
    source.execute("CREATE TABLE public.orders (id int PRIMARY KEY, status text, total numeric)")
    source.execute("SELECT kafgres.capture('public.orders', 'orders.cdc', columns => ARRAY['id', 'status']::name[], "
                   "row_filter => $$status = 'paid'$$)")
    source.execute("CREATE SCHEMA sales")
    source.execute("CREATE TABLE sales.invoice (id int PRIMARY KEY)")
    source.execute("SELECT * FROM kafgres.capture_schema('sales', topic_prefix => 'dump', schemas => true)")
    before = [rows(source, q) for q in DUMPED_ROWS]
    assert len(before[2]) == 2 and len(before[3]) == 1 and len(before[4]) == 8, before

    env = {**os.environ, **kafgres.env}
    source_db = source.info.dbname
    target_db = target.info.dbname
    dumped = subprocess.run(["pg_dump", "--dbname", source_db], capture_output=True, text=True, env=env, timeout=60)
    assert dumped.returncode == 0, dumped.stderr
    restored = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname", target_db],
                              input=dumped.stdout, capture_output=True, text=True, env=env, timeout=60)
    assert restored.returncode == 0, restored.stderr
    assert [rows(target, q) for q in DUMPED_ROWS] == before

    target.execute("CREATE TABLE sales.later (id int PRIMARY KEY)")
    assert rows(target, "SELECT topic, schemas FROM kafgres.captures WHERE relation = 'sales.later'::regclass") == [
        ("dump.sales.later", True)]
