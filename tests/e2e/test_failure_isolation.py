"""No fault on the SQL side ever takes the Kafka broker down (issue 18).

A throwaway cluster of its own (Postgres on 127.0.0.1:5496, Kafka on
127.0.0.1:9496). Throughout each scenario a librdkafka consumer stays
subscribed to a topic and records every client error (a lost connection is
one); the faults are on the SQL side, so it must record none:

- another client holds the SQL bridge's replication slot (pg_receivewal on
  it), then the bridge restarts: sends are still delivered, the status view
  says the slot is in use, nothing loops;
- the slot is invalidated by max_slot_wal_keep_size while the bridge is
  stopped: the bridge records exactly which commits may be missing in
  kafgres.sql_bridge_gaps, recovers by itself, and later sends are delivered;
- pg_terminate_backend of the bridge and of the broker: each comes back by
  itself (the broker's clients reconnect), repeated terminations back off but
  never give up;
- DROP EXTENSION and CREATE EXTENSION under the running broker: it restarts
  on the new catalog by itself, serving none of the old one's topics.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from confluent_kafka.admin import AdminClient, NewTopic

from support import PG_BIN, ThrowawayCluster, port_is_free, wait_for_topic_metadata

PG_PORT = 5496
KAFKA_PORT = 9496
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
READY_TIMEOUT_S = 60.0
DELIVERY_TIMEOUT_S = 30.0
BRIDGE = "kafgres sql bridge"
BROKER = "kafgres broker"


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("isolation", PG_PORT, KAFKA_PORT)

    def pid_of(self, backend_type: str, timeout_s: float = 30.0, other_than: int | None = None) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = self.sql(f"select pid from pg_stat_activity where backend_type = '{backend_type}'")
            if rows and rows[0][0] != other_than:
                return rows[0][0]
            time.sleep(0.05)
        raise AssertionError(f"no {backend_type} process within {timeout_s:.0f}s\n{self.log_tail()}")

    def bridge_status(self) -> dict:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            cur = conn.execute("select * from kafgres.sql_bridge_status")
            names = [d.name for d in cur.description]
            return dict(zip(names, cur.fetchone()))

    def wait_for_status(self, predicate, what: str, timeout_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        status = {}
        while time.monotonic() < deadline:
            status = self.bridge_status()
            if predicate(status):
                return status
            time.sleep(0.1)
        raise AssertionError(f"the bridge never got to {what}: {status}\n{self.log_tail()}")


class Watcher:
    """A consumer subscribed for the whole scenario: every client error it sees is a lost connection."""

    def __init__(self, topic: str) -> None:
        self.errors: list[str] = []
        self.values: list[bytes] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": BOOTSTRAP,
                "group.id": f"watcher-{topic}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "error_cb": lambda e: self.errors.append(str(e)),
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    self.errors.append(str(message.error()))
                continue
            self.values.append(message.value())

    def wait_for(self, value: bytes, timeout_s: float = DELIVERY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if value in self.values:
                return
            time.sleep(0.05)
        raise AssertionError(f"{value!r} never reached the consumer; it saw {self.values[-5:]}, errors {self.errors}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is an isolation-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({"max_slot_wal_keep_size": "'48MB'", "max_wal_size": "'64MB'", "min_wal_size": "'32MB'"})
        c.start()
        c.sql("create extension kafgres")
        c.wait_until_serving(READY_TIMEOUT_S)
        c.sql("select kafgres.create_topic('events', 1)")
        yield c
    finally:
        c.destroy()


def send(cluster: Cluster, value: str) -> tuple[int, int]:
    """Sends one record from SQL in its own transaction; returns the WAL positions before and after its commit."""
    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        before = conn.execute("select pg_current_wal_insert_lsn() - '0/0'").fetchone()[0]
        with conn.transaction():
            conn.execute("select kafgres.send('events', %s::text)", (value,))
        after = conn.execute("select pg_current_wal_insert_lsn() - '0/0'").fetchone()[0]
    return int(before), int(after)


def test_a_slot_held_by_another_client_never_stops_kafka_or_sends(cluster: Cluster):
    watcher = Watcher("events")
    receiver = None
    try:
        send(cluster, "before")
        watcher.wait_for(b"before")
        wal = cluster.home / "received-wal"
        wal.mkdir()
        subprocess.run(["chown", "postgres:postgres", str(wal)], check=True)
        receiver = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_receivewal"), "-h", "127.0.0.1", "-p", str(PG_PORT),
             "-U", "postgres", "-S", "kafgres_sql_bridge", "-D", str(wal), "--no-loop"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            active = cluster.sql("select active from pg_replication_slots where slot_name = 'kafgres_sql_bridge'")
            if active and active[0][0]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("pg_receivewal never attached to the slot")
        # The bridge restarts while another client holds its slot.
        old = cluster.pid_of(BRIDGE)
        cluster.sql(f"select pg_terminate_backend({old})")
        cluster.pid_of(BRIDGE, other_than=old)
        for i in range(5):
            send(cluster, f"while-held-{i}")
        for i in range(5):
            watcher.wait_for(f"while-held-{i}".encode())
        status = cluster.wait_for_status(lambda s: s["state"] == "running", "running")
        assert status["gaps"] == 0, status
        assert cluster.pid_of(BROKER), "the broker kept running"
        assert watcher.errors == [], f"the Kafka consumer lost its connection: {watcher.errors}"
    finally:
        if receiver is not None:
            receiver.kill()
            receiver.wait(10)
        watcher.close()


def test_an_invalidated_slot_names_the_missing_commits_and_the_bridge_recovers(cluster: Cluster):
    watcher = Watcher("events")
    bridge = None
    try:
        send(cluster, "first")
        watcher.wait_for(b"first")
        bridge = cluster.pid_of(BRIDGE)
        os.kill(bridge, signal.SIGSTOP)
        lost_from, lost_to = send(cluster, "lost")
        # Far more WAL than max_slot_wal_keep_size, then checkpoints: the
        # slot is invalidated and the segment holding "lost" is removed.
        cluster.sql(
            "create table filler as select g, repeat('x', 2000) as pad from generate_series(1, 60000) g",
            "select pg_switch_wal()",
            "checkpoint",
            "select pg_switch_wal()",
            "checkpoint",
        )
        lost = cluster.sql("select wal_status from pg_replication_slots where slot_name = 'kafgres_sql_bridge'")
        assert lost and lost[0][0] == "lost", f"the slot was not invalidated: {lost}"
        os.kill(bridge, signal.SIGCONT)
        bridge = None
        status = cluster.wait_for_status(lambda s: s["gaps"] >= 1 and s["state"] == "running", "a recorded gap")
        gaps = cluster.sql("select from_lsn - '0/0', to_lsn - '0/0', reason from kafgres.sql_bridge_gaps")
        assert any(int(f) <= lost_from and int(t) >= lost_to for f, t, _ in gaps), (
            f"no gap covers the lost commit [{lost_from}, {lost_to}]: {gaps}"
        )
        assert "may be missing" in gaps[0][2]
        send(cluster, "after")
        watcher.wait_for(b"after")
        assert b"lost" not in watcher.values, "a commit from removed WAL cannot have been delivered"
        assert status["errors"] >= 1
        assert watcher.errors == [], f"the Kafka consumer lost its connection: {watcher.errors}"
        log = cluster.log_text()
        assert "may be missing" in log and "stack backtrace" not in log
    finally:
        if bridge is not None:
            os.kill(bridge, signal.SIGCONT)
        watcher.close()


def test_terminated_workers_come_back_by_themselves(cluster: Cluster):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 30000})
    # The bridge, twice in a row: the second restart backs off, both come back.
    for _ in range(2):
        old = cluster.pid_of(BRIDGE)
        cluster.sql(f"select pg_terminate_backend({old})")
        cluster.pid_of(BRIDGE, other_than=old, timeout_s=30)
    cluster.wait_for_status(lambda s: s["state"] == "running", "running after restarts", timeout_s=30)
    send(cluster, "after-bridge-restarts")
    # The broker: its clients reconnect to the new worker.
    old = cluster.pid_of(BROKER)
    cluster.sql(f"select pg_terminate_backend({old})")
    started = time.monotonic()
    cluster.pid_of(BROKER, other_than=old, timeout_s=30)
    cluster.wait_until_serving(30)
    back_after = time.monotonic() - started
    producer.produce("events", b"after-broker-restart", partition=0)
    assert producer.flush(30) == 0, "a produce after the broker came back was acknowledged"
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "terminate-check", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("events", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        while time.monotonic() < deadline and not {b"after-bridge-restarts", b"after-broker-restart"} <= set(seen):
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
        assert {b"after-bridge-restarts", b"after-broker-restart"} <= set(seen), seen
    finally:
        consumer.close()
    print(f"broker back {back_after:.2f}s after pg_terminate_backend")


def test_a_catalog_dropped_and_created_again_restarts_the_broker_on_the_new_one(cluster: Cluster):
    """DROP EXTENSION and CREATE EXTENSION while the broker runs (the catalog made anew): the broker must not
    go on serving the old catalog's topics (which DeleteTopics would then call unknown) nor hand out the new
    catalog's producer ids over logs of the old ones; it restarts on the new catalog by itself, without a
    timer (the install script's commit wakes it). An ALTER EXTENSION-style wake with the same catalog does
    not restart it."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    assert "events" in admin.list_topics(timeout=10).topics
    old_broker = cluster.pid_of(BROKER)
    # The install script's wake with the catalog unchanged: the broker stays as it is.
    cluster.sql("select kafgres._wake_broker()")
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 30000})
    producer.produce("events", b"same-catalog", partition=0)
    assert producer.flush(30) == 0
    assert "created again" not in cluster.log_text()
    cluster.sql("drop extension kafgres cascade", "create extension kafgres")
    deadline = time.monotonic() + READY_TIMEOUT_S
    topics = None
    while time.monotonic() < deadline:
        try:
            topics = AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(timeout=5).topics
            if "events" not in topics:
                break
        except Exception:  # noqa: BLE001  (restarting: refused for a moment)
            pass
        time.sleep(0.2)
    assert topics is not None and "events" not in topics, f"the old catalog's topic is still served: {topics}"
    assert "the kafgres catalog was created again" in cluster.log_text()
    assert cluster.pid_of(BROKER) == old_broker, "the data plane restarted inside the same worker"
    # The new catalog serves: a topic of the old name is created afresh, written, deleted.
    fresh = AdminClient({"bootstrap.servers": BOOTSTRAP})
    fresh.create_topics([NewTopic("events", 2, 1)])["events"].result(30)
    wait_for_topic_metadata(fresh, "events", 2)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 30000})
    producer.produce("events", b"new-catalog", partition=1)
    assert producer.flush(30) == 0
    fresh.delete_topics(["events"])["events"].result(30)


def test_every_legal_topic_name_survives_create_delete_recreate_and_restart(cluster: Cluster):
    """Kafka allows 1-249 characters; the rename for deletion and the partition directory must fit NAME_MAX, and
    every path under $PGDATA/kafgres must fit pg_basebackup's tar limit (99 bytes), or no standby can be made."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    names = [("n" * length)[:length] for length in (1, 48, 49, 205, 206, 249)]
    names = [f"{n[:-1]}{i}" for i, n in enumerate(names)]

    def create(topic: str) -> None:
        futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        futures[topic].result(30)

    def produce(topic: str, value: bytes) -> None:
        producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
        for partition in range(3):
            producer.produce(topic, value, partition=partition)
        assert producer.flush(30) == 0, f"produce to the {len(topic)}-character topic was acknowledged"

    def values(topic: str) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "names-check", "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
            seen: list[bytes] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(seen) < 3:
                m = consumer.poll(0.5)
                if m is not None and not m.error():
                    seen.append(m.value())
            return seen
        finally:
            consumer.close()

    for topic in names:
        create(topic)
        produce(topic, b"first")
        admin.delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                create(topic)
                break
            except Exception:  # the deletion may still be in progress: Kafka answers the same
                time.sleep(0.2)
        produce(topic, b"second")
    cluster.stop("fast")
    cluster.start()
    cluster.wait_until_serving(READY_TIMEOUT_S)
    for topic in names:
        assert values(topic) == [b"second"] * 3, f"the {len(topic)}-character topic kept only its second life"
    log = cluster.log_text()
    assert "File name too long" not in log, log[-2000:]
    paths = [str(p.relative_to(cluster.pgdata)) for p in (cluster.pgdata / "kafgres").rglob("*")]
    assert paths and all(len(p) <= 99 for p in paths), max(paths, key=len)


def test_a_topic_whose_log_cannot_be_opened_is_offline_and_the_rest_is_served(cluster: Cluster):
    from confluent_kafka.admin import AdminClient

    cluster.sql("select kafgres.create_topic('broken', 1)", "select kafgres.create_topic('healthy', 1)")
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 15000})
    for topic in ("broken", "healthy"):
        producer.produce(topic, b"before", partition=0)
    assert producer.flush(30) == 0
    cluster.stop("fast")
    broken_dir = cluster.pgdata / "kafgres" / "broken-0"
    os.chmod(broken_dir, 0)  # the worker (user postgres) can no longer open it
    try:
        cluster.start()
        cluster.wait_until_serving(READY_TIMEOUT_S)
        producer.produce("healthy", b"after", partition=0)
        assert producer.flush(30) == 0, "the healthy topic is served"
        metadata = AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(timeout=10)
        assert "broken" in metadata.topics, "the offline topic is still known"
        assert metadata.topics["broken"].partitions[0].leader == -1
        failed: list[str] = []
        refusing = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 3000, "retries": 0})
        refusing.produce("broken", b"refused", partition=0, on_delivery=lambda e, m: failed.append(str(e)) if e else None)
        refusing.flush(10)
        assert failed, "a produce to the offline topic is refused, not accepted"
        assert "offline" in cluster.log_text()
    finally:
        os.chmod(broken_dir, 0o700)
    # Fixed: a reload opens it again, with its records.
    cluster.sql("select pg_reload_conf()")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "is online again" not in cluster.log_text():
        time.sleep(0.1)
    assert "topic broken is online again" in cluster.log_text()
    producer.produce("broken", b"after-fix", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "offline-check", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("broken", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < 2:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
        assert seen == [b"before", b"after-fix"], seen
    finally:
        consumer.close()


def test_a_shutdown_answers_every_produce_in_flight_and_cuts_nothing(cluster: Cluster):
    cluster.sql("select kafgres.create_topic('inflight', 2)")
    acked: list[int] = []
    failed: list[str] = []
    producer_errors: list[str] = []
    stop = threading.Event()

    def produce_until_stopped() -> None:
        try:
            producer = Producer(
                {"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True, "linger.ms": 1,
                 "message.timeout.ms": 60000}
            )
            n = 0
            while not stop.is_set():
                try:
                    producer.produce(
                        "inflight", str(n).encode(), partition=n % 2,
                        on_delivery=lambda e, m: failed.append(str(e)) if e else acked.append(int(m.value())),
                    )
                except BufferError:
                    # The client's queue is full while the broker restarts (a slow
                    # machine): wait for room, as an application would.
                    producer.poll(0.05)
                    continue
                producer.poll(0)
                n += 1
                if n % 100 == 0:
                    time.sleep(0.001)
            remaining = producer.flush(90)
            if remaining:
                producer_errors.append(f"{remaining} records unanswered 90 s after the last send")
        except Exception as e:  # a thread's exception would otherwise be lost, and its records uncounted
            producer_errors.append(repr(e))

    threads = [threading.Thread(target=produce_until_stopped, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    log_before = len(cluster.log_text())
    cluster.stop("fast")
    cluster.start()
    cluster.wait_until_serving(READY_TIMEOUT_S)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a producer was still flushing 120 s after the last send"
    assert producer_errors == [], producer_errors
    assert failed == [], f"records failed: {failed[:5]}"
    log = cluster.log_text()[log_before:]
    assert "still had a request in flight" not in log, log
    assert "truncating" not in log and "scanning every segment" not in log, "a clean stop leaves nothing to recover"
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "inflight-check", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition("inflight", p, 0) for p in range(2)])
        seen: list[int] = []
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 3:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.append(int(m.value()))
                idle_since = time.monotonic()
    finally:
        consumer.close()
    # Two producers each numbered from 0: every acknowledged value is there,
    # as often as it was acknowledged (idempotence: never twice).
    from collections import Counter

    assert Counter(seen) == Counter(acked), (
        f"{len(acked)} acknowledged, {len(seen)} read; missing {sorted((Counter(acked) - Counter(seen)).elements())[:5]}, "
        f"extra {sorted((Counter(seen) - Counter(acked)).elements())[:5]}"
    )
