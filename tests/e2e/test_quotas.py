"""Client quotas with real clients (docs/security.md, "Quotas").

On the suite's cluster, with quotas for client ids of these tests only:

- rows inserted into `kafgres.client_quotas` by SQL apply after
  `pg_reload_conf()`: a librdkafka producer over its producer_byte_rate and
  a consumer over its consumer_byte_rate are told to back off (librdkafka's
  throttle callback reports the broker's throttle time), and every record
  still arrives; once the rows are deleted and the configuration reloaded,
  no more throttling;
- the Java Admin client sets, describes and removes a quota
  (alterClientQuotas, describeClientQuotas), a key Kafgres does not enforce
  is refused with InvalidRequestException, and a Java producer over the
  quota sees it in its produce-throttle-time-max metric (tests/java's
  `quotas` scenario);
- an ip quota row (connection_creation_rate) closes new connections from that address only, past its
  burst, until it is deleted.

Every wait has a deadline.
"""

from __future__ import annotations

import socket
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import kafka_wire
from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)

RATE = 50_000  # bytes per second
VALUE = b"q" * 50_000
RECORDS = 16  # 800 kB: 80 kB/s over the 10 s window, 60% over the rate


def reload_and_wait(psql, kafgres) -> None:
    """pg_reload_conf(), then waits until the broker says it reread the quotas."""
    offset = kafgres.pg_log_size()
    psql.rows("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 30
    while "reloaded" not in kafgres.pg_log_since(offset) or "client quotas" not in kafgres.pg_log_since(offset):
        assert time.monotonic() < deadline, "the broker did not reload within 30 s"
        time.sleep(0.05)


def test_quotas_from_sql_throttle_librdkafka_producers_and_consumers(bootstrap, kafgres, psql, create_topic):
    topic = create_topic(f"quota-{uuid.uuid4().hex[:8]}", partitions=1)
    producer_id = f"quota-producer-{uuid.uuid4().hex[:8]}"
    consumer_id = f"quota-consumer-{uuid.uuid4().hex[:8]}"
    psql.rows(
        "INSERT INTO kafgres.client_quotas (client_id, quota_key, quota_value) VALUES "
        "(:'producer', 'producer_byte_rate', :rate), (:'consumer', 'consumer_byte_rate', :rate)",
        producer=producer_id, consumer=consumer_id, rate=RATE,
    )
    try:
        reload_and_wait(psql, kafgres)
        throttled: list[int] = []
        producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": producer_id, "linger.ms": 0, "acks": "all",
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        })
        delivered: list = []
        for _ in range(RECORDS):
            producer.produce(topic, VALUE, on_delivery=lambda err, msg: delivered.append(err))
            producer.flush(60)
        producer.poll(0)
        assert delivered == [None] * RECORDS
        assert throttled and max(throttled) > 0, f"no throttle reported: {throttled}"

        consumer_throttled: list[int] = []
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "client.id": consumer_id, "group.id": f"g-{consumer_id}",
            "enable.auto.commit": False, "message.max.bytes": 100_000, "fetch.max.bytes": 100_000,
            "max.partition.fetch.bytes": 100_000,
            "throttle_cb": lambda event: consumer_throttled.append(event.throttle_time),
        })
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        deadline = time.monotonic() + 90
        while got < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.close()
        assert got == RECORDS, f"{got} of {RECORDS} records consumed"
        assert consumer_throttled and max(consumer_throttled) > 0, f"no throttle reported: {consumer_throttled}"
    finally:
        psql.rows(
            "DELETE FROM kafgres.client_quotas WHERE client_id IN (:'producer', :'consumer')",
            producer=producer_id, consumer=consumer_id,
        )
        reload_and_wait(psql, kafgres)

    # Without the rows, the same client id is not throttled any more.
    throttled_after: list[int] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": producer_id, "linger.ms": 0,
        "throttle_cb": lambda event: throttled_after.append(event.throttle_time),
    })
    for _ in range(RECORDS):
        producer.produce(topic, VALUE)
        producer.flush(60)
    producer.poll(0)
    assert not [t for t in throttled_after if t > 0], throttled_after


def test_java_admin_sets_describes_and_removes_quotas(java_build, bootstrap):  # noqa: F811
    name = f"e2e-java-quotas-{uuid.uuid4().hex[:8]}"
    assert probe("quotas", bootstrap, name) == [
        "alter-client-quotas producer_byte_rate: ok",
        "alter-client-quotas request_percentage: ok",
        "alter-client-quotas controller_mutation_rate: InvalidRequestException",
        "describe-client-quotas: {producer_byte_rate=50000.0, request_percentage=50.0}",
        "producer: sent=8 throttled=true",
        "describe-client-quotas after removal: {}",
    ]


def api_versions_from(source: str, bootstrap: str) -> bool:
    """Whether the broker answers ApiVersions on a connection from `source` (a loopback address)."""
    host, port = kafka_wire.parse_address(bootstrap)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5)
    try:
        sock.bind((source, 0))
        sock.connect((host, port))
        if not kafka_wire.send_quietly(sock, kafka_wire.api_versions_request(0, 1)):
            return False
        try:
            return len(kafka_wire.read_response(sock)) > 0
        except (EOFError, ConnectionResetError):
            return False
    finally:
        sock.close()


def test_an_ip_quota_from_sql_closes_that_address_connections_only(bootstrap, kafgres, psql):
    """A row of kafgres.client_quotas for an ip entity (connection_creation_rate = 1, a burst of ten seconds'
    worth), applied by pg_reload_conf(): past the burst a new connection from that address is closed
    unanswered while its neighbours are served; once the row is deleted and the configuration reloaded, the
    address is served again. (The AlterClientQuotas path, kafka-configs --entity-type ips, is in the reference
    diff's client_quotas scenario and crates/broker/tests/quotas.rs.)"""
    blocked, neighbour = "127.0.0.77", "127.0.0.78"
    psql.rows("INSERT INTO kafgres.client_quotas (ip, quota_key, quota_value) "
              f"VALUES ('{blocked}', 'connection_creation_rate', 1)")
    try:
        reload_and_wait(psql, kafgres)
        served = [api_versions_from(blocked, bootstrap) for _ in range(12)]
        assert served[:10] == [True] * 10 and served[10:] == [False, False], served
        assert api_versions_from(neighbour, bootstrap), "another address is served"
    finally:
        psql.rows(f"DELETE FROM kafgres.client_quotas WHERE ip = '{blocked}'")
        reload_and_wait(psql, kafgres)
    assert api_versions_from(blocked, bootstrap), "served again once the quota is deleted"
