"""A standby copies topic data from a primary that requires SASL and enforces ACLs (docs/security.md).

Two throwaway clusters (primary on 127.0.0.1:5485 / Kafka 9485, its `pg_basebackup -R` standby on 5486 /
9486), both with `kafgres.authentication = 'scram-sha-256'` and `kafgres.authorizer = 'acl'`. The standby's
broker logs in to the primary's with KAFGRES-INTERNAL (the cluster's internal secret came with the base
backup), so records a SCRAM client produces reach the standby, no ACL granted to it; a SCRAM client may log
in to the standby's broker too, which sends it to the leader. After a promotion the former standby serves
the records, to a role the ACLs (replicated with the catalog) allow and not to one they do not.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from failover_support import node_pair, wait_until_caught_up
from support import wait_for_topic_metadata

# Each node also has a PLAINTEXT listener beside its SASL_PLAINTEXT primary one.
NODES = [("sec-a", 5485, 9485, 1, "PLAINTEXT://127.0.0.1:9385"), ("sec-b", 5486, 9486, 2, "PLAINTEXT://127.0.0.1:9386")]
READY_TIMEOUT_S = 90.0
PASSWORD = "standby-secret"


def sasl(bootstrap: str, user: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORD,
    }


def read_partition(config: dict, topic: str, count: int, timeout_s: float = 30.0):
    consumer = Consumer({**config, "group.id": f"e2e-sec-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    got, errors = [], []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        while len(got) < count and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
            else:
                got.append(msg.value())
    finally:
        consumer.close()
    return got, errors


@pytest.fixture(scope="module")
def pair():
    if os.geteuid() != 0:
        pytest.fail("the standby security test must run as root (it runs initdb and pg_ctl as postgres)")
    with node_pair(NODES, READY_TIMEOUT_S) as (primary, standby):
        primary.sql(
            "ALTER SYSTEM SET kafgres.authentication = 'scram-sha-256'",
            "ALTER SYSTEM SET kafgres.authorizer = 'acl'",
            "SET password_encryption = 'scram-sha-256'",
            f"CREATE ROLE kafka_admin SUPERUSER LOGIN PASSWORD '{PASSWORD}'",
            f"CREATE ROLE kafka_reader LOGIN PASSWORD '{PASSWORD}'",
            f"CREATE ROLE kafka_other LOGIN PASSWORD '{PASSWORD}'",
        )
        primary.stop("fast")
        primary.start()
        primary.wait_until_serving(READY_TIMEOUT_S)
        yield primary, standby


def test_a_standby_copies_and_a_promoted_one_keeps_the_acls(pair):
    primary, standby = pair
    topic = f"e2e-sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl(primary.bootstrap, "kafka_admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    wait_for_topic_metadata(admin, topic, 1)
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:kafka_reader", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "e2e-sec-", ResourcePatternType.PREFIXED, "User:*", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)
    outcome: list = []
    producer = Producer({**sasl(primary.bootstrap, "kafka_admin"), "acks": "all"})
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome == [None] * 20, outcome

    standby.copy_of(primary)
    standby.start()
    standby.wait_for_role("standby", READY_TIMEOUT_S)
    # The primary's view of its standby: fetching at every log end (it logged in as the internal principal;
    # as User:ANONYMOUS its replica fetches would be refused, and without SASL it would not get past Metadata).
    wait_until_caught_up(primary, standby)
    rows = [r for r in primary.replica_partitions() if r["topic"] == topic]
    assert rows and rows[0]["replicated_offset"] == 20, rows
    # A SCRAM client may log in to the standby's broker too (it reads the replica of the roles), which sends
    # it to the leader: a bootstrap list naming both nodes works whichever answers first.
    via_standby = AdminClient(sasl(standby.bootstrap, "kafka_reader"))
    metadata = via_standby.list_topics(timeout=30)
    assert topic in metadata.topics and [b.id for b in metadata.brokers.values()] == [1], metadata.brokers
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", 9485)], metadata.brokers
    # A client of the standby's PLAINTEXT listener is sent to the leader's PLAINTEXT listener (the leader
    # recorded its listeners in kafgres.leader_epochs), not to its SASL_PLAINTEXT primary one.
    recorded = standby.sql("SELECT listeners FROM kafgres.leader_epochs ORDER BY epoch DESC LIMIT 1")[0][0]
    assert recorded == "SASL_PLAINTEXT://127.0.0.1:9485,PLAINTEXT://127.0.0.1:9385", recorded
    plain = AdminClient({"bootstrap.servers": "127.0.0.1:9386"}).list_topics(timeout=30)
    assert [(b.id, b.host, b.port) for b in plain.brokers.values()] == [(1, "127.0.0.1", 9385)], plain.brokers

    primary.stop("fast")
    standby.promote()
    standby.wait_for_role("leader", READY_TIMEOUT_S)
    got, errors = read_partition(sasl(standby.bootstrap, "kafka_reader"), topic, 20)
    assert not errors and got == [f"v{i}".encode() for i in range(20)], (errors, got[:3])
    # A role the ACLs give nothing does not even see the topic.
    other = AdminClient(sasl(standby.bootstrap, "kafka_other"))
    assert topic not in other.list_topics(timeout=30).topics
    reader = AdminClient(sasl(standby.bootstrap, "kafka_reader"))
    assert topic in reader.list_topics(timeout=30).topics
