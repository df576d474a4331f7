"""Settings that reload (docs/configuration.md, "Reloading").

A throwaway cluster of its own (Postgres on 127.0.0.1:5487, Kafka on
127.0.0.1:9487). While a librdkafka producer sends acks=all records the whole
time on one connection, each reloadable setting is changed with `ALTER SYSTEM`
and `pg_reload_conf()`; the worker logs `kafgres: <setting> is now <value>`
for each change, and the test checks the change takes effect:

- `kafgres.flush_policy`: under `page_cache` appends go on while the
  fdatasync rounds stop; back at `fsync` the rounds resume;
- `kafgres.max_frame_bytes`: a frame announced above the new limit closes its
  connection, one below is read;
- `kafgres.connections_max_idle_ms`: an idle connection is closed;
- `kafgres.max_connections_per_ip` and `kafgres.max_connections`: connections
  over the new limit are refused (the producer's established one stays);
- `kafgres.auto_create_topics` and `kafgres.default_partitions`: a Metadata
  request for a new name creates it, or not, with the new partition count;
- `kafgres.group_initial_rebalance_delay_ms`, `kafgres.log_level`,
  `kafgres.failed_authentication_delay_ms`, `kafgres.request_memory_mb`,
  `kafgres.max_connection_rate_per_ip`: logged as changed.

The producer must deliver every record with no error and keep its one
connection (the same `connected_at` in `kafgres.connections` from start to
end). Every wait has a deadline; the cluster is removed at the end.
"""

from __future__ import annotations

import os
import struct
import threading
import time

import pytest
from confluent_kafka import Producer

import kafka_wire
from support import ThrowawayCluster, port_is_free

PG_PORT = 5487
KAFKA_PORT = 9487
READY_TIMEOUT_S = 60.0
PRODUCER_CLIENT_ID = "reload-test-producer"


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("reload", PG_PORT, KAFKA_PORT)

    def counter(self, name: str) -> int:
        return self.sql(f"SELECT value FROM kafgres.broker_metrics WHERE name = '{name}'")[0][0]


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a reload-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({})
        c.start()
        c.sql("CREATE EXTENSION kafgres")
        c.wait_until_serving(READY_TIMEOUT_S)
        yield c
    finally:
        c.destroy()


class SteadyProducer(threading.Thread):
    """Sends acks=all records on one connection until stopped (at most 10 minutes)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "client.id": PRODUCER_CLIENT_ID,
                                  "linger.ms": 5, "enable.idempotence": True})
        self.topic = topic
        self.stopped = threading.Event()
        self.sent = self.delivered = 0
        self.errors: list[str] = []

    def on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered += 1

    def run(self) -> None:
        deadline = time.monotonic() + 600
        while not self.stopped.is_set() and time.monotonic() < deadline:
            self.producer.produce(self.topic, value=b"x" * 100, on_delivery=self.on_delivery)
            self.sent += 1
            self.producer.poll(0.005)
        self.producer.flush(30)


def wait_until(predicate, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:.0f}s"
        time.sleep(0.05)


def connection_refused(bootstrap: str) -> bool:
    """Whether a new connection is closed by the broker without an answer to ApiVersions."""
    sock = kafka_wire.connect(bootstrap)
    try:
        if not kafka_wire.send_quietly(sock, kafka_wire.api_versions_request(3, 1)):
            return True
        sock.settimeout(5)
        try:
            kafka_wire.read_response(sock)
            return False
        except (EOFError, ConnectionResetError, OSError):
            return True
    finally:
        sock.close()


def metadata_partitions(bootstrap: str, topic: str) -> int | None:
    """Partitions Metadata v12 reports for `topic` when asked to auto-create it, None if it does not exist."""
    response = kafka_wire.metadata_v12(bootstrap, [topic], allow_auto_topic_creation=True)
    entry = response.topics[topic]
    return len(entry.partitions) if entry.error_code == 0 else None


def test_settings_reload_under_load_without_dropping_a_connection(cluster: Cluster):
    bootstrap = cluster.bootstrap
    cluster.sql("SELECT kafgres.create_topic('steady', 1)")
    producer = SteadyProducer(bootstrap, "steady")
    producer.start()
    try:
        wait_until(lambda: producer.delivered > 50, "the producer delivers")
        (connected_at,) = cluster.sql(
            f"SELECT connected_at FROM kafgres.connections WHERE client_id = '{PRODUCER_CLIENT_ID}'")[0]

        # Flush policy: no fdatasync rounds under page_cache while appends go on.
        cluster.reload(flush_policy="page_cache")
        flushes, appended = cluster.counter("flushes"), cluster.counter("appended_batches")
        wait_until(lambda: cluster.counter("appended_batches") > appended + 20, "appends go on under page_cache")
        assert cluster.counter("flushes") == flushes, "page_cache still fdatasyncs each append"
        cluster.reload(flush_policy="fsync")
        flushes = cluster.counter("flushes")
        wait_until(lambda: cluster.counter("flushes") > flushes + 5, "fdatasync rounds resume under fsync")

        # Frame limit: a frame announced above it closes its connection at once.
        cluster.reload(max_frame_bytes=65536)
        sock = kafka_wire.connect(bootstrap)
        kafka_wire.send_quietly(sock, struct.pack(">i", 100_000))
        closed, _ = kafka_wire.wait_for_close(sock, 10)
        sock.close()
        assert closed, "a 100,000-byte frame was accepted under max_frame_bytes = 65536"
        cluster.reload(max_frame_bytes=104857600)

        # Idle timeout.
        cluster.reload(connections_max_idle_ms=1000)
        sock = kafka_wire.connect(bootstrap)
        closed, _ = kafka_wire.wait_for_close(sock, 15)
        sock.close()
        assert closed, "an idle connection outlived connections_max_idle_ms = 1000"
        cluster.reload(connections_max_idle_ms=600000)

        # Connection limits: the producer's connections stay; new ones over the limit are refused.
        cluster.reload(max_connections_per_ip=1)
        assert connection_refused(bootstrap), "a connection over max_connections_per_ip = 1 was served"
        cluster.reload(max_connections_per_ip=0, max_connections=1)
        assert connection_refused(bootstrap), "a connection over max_connections = 1 was served"
        cluster.reload(max_connections=1000)
        assert not connection_refused(bootstrap), "max_connections back at 1000 still refuses"

        # Topic auto-creation and its partition count.
        cluster.reload(auto_create_topics="off")
        assert metadata_partitions(bootstrap, "auto-after-off") is None
        cluster.reload(auto_create_topics="on", default_partitions=3)
        wait_until(lambda: metadata_partitions(bootstrap, "auto-after-on") == 3,
                   "a topic auto-created with default_partitions = 3")

        # The rest are logged as changed.
        cluster.reload(group_initial_rebalance_delay_ms=0, log_level="debug", failed_authentication_delay_ms=50,
                       request_memory_mb=256, max_connection_rate_per_ip=1000)
        cluster.reload(log_level="info")

        before = producer.delivered
        wait_until(lambda: producer.delivered > before + 20, "the producer still delivers")
    finally:
        producer.stopped.set()
        producer.join(60)
    assert not producer.errors, producer.errors[:5]
    assert producer.delivered == producer.sent
    rows = cluster.sql(f"SELECT connected_at FROM kafgres.connections WHERE client_id = '{PRODUCER_CLIENT_ID}'")
    assert connected_at in [r[0] for r in rows], "the producer's connection was dropped by a reload"


def test_topic_changes_sent_right_after_reloads_are_answered(cluster: Cluster):
    """A reload makes the worker try to reopen offline topics, which waits for any topic change in progress;
    a change in progress waits for the worker's main thread to write the catalog. The worker once waited for
    the reopening on that thread, so a CreateTopics arriving just before it handled the SIGHUP hung for good
    (seen at the 6th of 30 reload-then-create rounds). Each round here reloads and at once creates and
    deletes a topic; every answer must come."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for i in range(40):
        cluster.sql(f"ALTER SYSTEM SET kafgres.archive_command = 'true {i}'", "SELECT pg_reload_conf()")
        name = f"reload-race-{i}"
        for what, future in (("create", lambda: admin.create_topics([NewTopic(name, 1, 1)])[name]),
                             ("delete", lambda: admin.delete_topics([name])[name])):
            try:
                future().result(20)
            except Exception as err:  # noqa: BLE001 - any failure, reported with the server log
                pytest.fail(f"round {i}: {what} {name} after a reload failed: {err!r}\n{cluster.log_tail(60)}")
