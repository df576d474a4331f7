"""The log directory belongs to one database (docs/architecture.md, "kafgres.owner" and "Strays").

A throwaway cluster of its own (initdb under /tmp, Postgres on 127.0.0.1:5497,
Kafka on 127.0.0.1:9497), because the test drops the extension and points
`kafgres.database` elsewhere. Checked, with the real worker:

- the first start records the owner (this cluster's system identifier and the
  database's OID) in `kafgres.owner`;
- `DROP EXTENSION kafgres` then `CREATE EXTENSION kafgres`: the old topics'
  directories are removed at the next start (a WARNING names each), the
  owner stays, a new topic of an old name starts empty;
- `kafgres.database` set to another database that has the extension: the
  broker refuses to start (the server log says whose directory it is and
  what to do) and moves nothing; set back, it serves its topics' records.

Every wait has a deadline; the cluster is stopped and removed at the end, also
on failure. Runs as root (initdb and pg_ctl run as the postgres user).
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kafka_wire
from support import ThrowawayCluster, port_is_free

PG_PORT = 5497
KAFKA_PORT = 9497
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
READY_TIMEOUT_S = 60.0


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("logdir", PG_PORT, KAFKA_PORT)

    @property
    def log_dir(self):
        return self.pgdata / "kafgres"

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def wait_ready(self) -> None:
        self.wait_until_serving(READY_TIMEOUT_S)

    def partition_dirs(self) -> list[str]:
        return sorted(p.name for p in self.log_dir.iterdir() if p.is_dir())


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a log-dir-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({})
        c.start()
        c.sql("create extension kafgres")
        c.wait_ready()
        yield c
    finally:
        c.destroy()


def produce(topic: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0, "every record acknowledged"


def watermarks(topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "log-dir-owner-test"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def test_a_recreated_extension_sheds_old_topics_and_another_database_is_refused(cluster: Cluster):
    system_identifier, oid = cluster.sql(
        "select (select system_identifier from pg_control_system()), oid from pg_database where datname = 'postgres'"
    )[0]
    cluster.sql("select kafgres.create_topic('old-events', 2)", "select kafgres.create_topic('orders', 1)")
    produce("old-events", 1, [b"a", b"b", b"c"])
    owner = (cluster.log_dir / "kafgres.owner").read_text()
    assert f"system_identifier: {system_identifier}\n" in owner and f"database_oid: {oid}\n" in owner, owner
    assert cluster.partition_dirs() == ["old-events-0", "old-events-1", "orders-0"]

    # The extension is recreated: its catalog starts empty, the old records are unreachable.
    cluster.sql("drop extension kafgres", "create extension kafgres")
    cluster.restart()
    cluster.wait_ready()
    assert cluster.partition_dirs() == [], "the old topics' directories are removed at startup"
    assert "old-events-1 belongs to no topic of the catalog" in cluster.log_text()
    assert (cluster.log_dir / "kafgres.owner").read_text() == owner, "the same database stays the owner"
    cluster.sql("select kafgres.create_topic('old-events', 2)")
    assert watermarks("old-events", 1) == (0, 0), "a topic of an old name starts empty"
    produce("old-events", 1, [b"new"])

    # Another database with the extension: its broker must not touch this directory.
    cluster.sql("create database other")
    cluster.sql("create extension kafgres", dbname="other")
    cluster.sql("alter system set kafgres.database = 'other'")
    log_before = len(cluster.log_text())
    cluster.restart()
    deadline = time.monotonic() + READY_TIMEOUT_S
    refusal = f'holds the topics of database "postgres" (OID {oid})'
    while refusal not in cluster.log_text()[log_before:]:
        assert time.monotonic() < deadline, f"no refusal in the server log\n{cluster.log_tail()}"
        time.sleep(0.2)
    assert "hint: point kafgres.log_dir at another directory" in cluster.log_text()[log_before:]
    assert not kafka_wire.broker_answers(BOOTSTRAP, timeout_s=1), "no broker serves the other database's topics"
    assert cluster.partition_dirs() == ["old-events-0", "old-events-1"], "nothing moved"

    cluster.sql("alter system reset kafgres.database")
    cluster.restart()
    cluster.wait_ready()
    assert watermarks("old-events", 1) == (0, 1), "its own database serves its records again"


def test_a_primary_whose_log_directory_was_lost_does_not_start_on_an_empty_one(cluster: Cluster):
    """A lost log directory (a new disk, a wrong mount) would make the broker serve empty partitions where the
    catalog has topics, and standbys following it would cut their copies to match: it refuses, says what to do,
    and starts once the directory is back (docs/replication.md, "Faults")."""
    cluster.sql("select kafgres.create_topic('kept-records', 1)")
    produce("kept-records", 0, [b"one", b"two"])
    cluster.stop("fast")
    aside = cluster.pgdata / "kafgres-aside"
    cluster.log_dir.rename(aside)
    log_before = len(cluster.log_text())
    cluster.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "their records were lost, or kafgres.log_dir changed" not in cluster.log_text()[log_before:]:
        assert time.monotonic() < deadline, f"no refusal in the server log\n{cluster.log_tail()}"
        time.sleep(0.2)
    assert not kafka_wire.broker_answers(BOOTSTRAP, timeout_s=1), "no broker serves empty partitions"
    assert not (cluster.log_dir / "kafgres.owner").exists(), "nothing was written in the blank directory"
    # The directory comes back; a reload is the signal.
    if cluster.log_dir.exists():
        cluster.log_dir.rmdir()
    aside.rename(cluster.log_dir)
    cluster.sql("select pg_reload_conf()")
    cluster.wait_ready()
    assert watermarks("kept-records", 0) == (0, 2), "the records are served again"
