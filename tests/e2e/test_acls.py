"""Kafka ACLs with Postgres roles as principals, with real clients (docs/security.md).

A throwaway cluster of its own (initdb under /tmp, Postgres on 127.0.0.1:5491,
Kafka on 127.0.0.1:9491) with `kafgres.authentication = 'scram-sha-256'` and
`kafgres.authorizer = 'acl'`. Roles created here:

- kafka_admin: SUPERUSER LOGIN: may do everything, manages the ACLs;
- kafka_nobody: LOGIN, no grant and no ACL at all;
- kafka_readers: NOLOGIN, the group role the ACLs name;
- kafka_reader: LOGIN, member of kafka_readers (INHERIT);
- kafka_writer: LOGIN, WRITE on one topic by an ACL of its own.

Checked with confluent-kafka (librdkafka 2.12): a role with no ACL sees no
topic in Metadata, cannot produce, create or delete a topic (the defect the
issue reports: such a role deleted a topic); ACLs created with the Kafka
Admin API land in `kafgres.acls` and are described and deleted through it;
ACLs granted to a group role apply to its members, and a DENY wins over the
group's ALLOW; an ACL inserted by SQL applies after `pg_reload_conf()`;
kafka-acls.sh (the Java tools, tests/java) adds and lists ACLs; the SQL
functions act for their calling role under the same ACLs.

Every wait has a deadline; the cluster is stopped and removed at the end, also
on failure. Runs as root (initdb and pg_ctl run as the postgres user).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support import ThrowawayCluster, port_is_free, wait_for_topic_metadata

PG_PORT = 5491
KAFKA_PORT = 9491
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
READY_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 20.0

PASSWORD = "acl-secret"
ROLES = ("kafka_admin", "kafka_nobody", "kafka_reader", "kafka_writer")


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("acls", PG_PORT, KAFKA_PORT)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the ACL test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is an ACL-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({"kafgres.authentication": "'scram-sha-256'", "kafgres.authorizer": "'acl'"})
        c.start()
        c.sql(
            "create extension kafgres",
            "set password_encryption = 'scram-sha-256'",
            f"create role kafka_admin superuser login password '{PASSWORD}'",
            f"create role kafka_nobody login password '{PASSWORD}'",
            "create role kafka_readers nologin",
            f"create role kafka_reader login password '{PASSWORD}' in role kafka_readers",
            f"create role kafka_writer login password '{PASSWORD}'",
        )
        c.wait_until_serving(READY_TIMEOUT_S)
        yield c
    finally:
        c.destroy()


def sasl(user: str) -> dict:
    return {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORD,
    }


def admin(user: str) -> AdminClient:
    return AdminClient(sasl(user))


def new_topic(prefix: str = "e2e-acl") -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    a = admin("kafka_admin")
    a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(CALL_TIMEOUT_S)
    wait_for_topic_metadata(a, topic, 1)
    return topic


def acl(resource_type, name, principal, operation, permission=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def create_acls(*bindings: AclBinding) -> None:
    a = admin("kafka_admin")
    for future in a.create_acls(list(bindings), request_timeout=CALL_TIMEOUT_S).values():
        future.result(CALL_TIMEOUT_S)


def produce_error(user: str, topic: str) -> KafkaError | None:
    """Produces one record as `user`; None if it was acknowledged, else the delivery error."""
    outcome: list = []
    producer = Producer({**sasl(user), "acks": "all", "message.timeout.ms": 10_000})
    producer.produce(topic, value=b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(CALL_TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def read_back(user: str, topic: str, group: str, count: int) -> list[bytes]:
    """Reads `count` records of partition 0 as `user` in consumer group `group`."""
    consumer = Consumer({**sasl(user), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value())
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def visible_topics(user: str) -> set[str]:
    return set(admin(user).list_topics(timeout=CALL_TIMEOUT_S).topics)


def test_a_role_without_acls_can_do_nothing(cluster: Cluster):
    topic = new_topic()
    assert topic in visible_topics("kafka_admin")
    assert topic not in visible_topics("kafka_nobody"), "a topic it may not describe is hidden"
    err = produce_error("kafka_nobody", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # The reported defect: a role with no grants deleted a topic over the Kafka port.
    nobody = admin("kafka_nobody")  # held: a client destroyed mid-call fails its futures
    with pytest.raises(KafkaException) as refused:
        nobody.delete_topics([topic], request_timeout=CALL_TIMEOUT_S)[topic].result(CALL_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic in visible_topics("kafka_admin"), "the topic is still there"
    created = f"e2e-acl-nobody-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as refused:
        nobody.create_topics([NewTopic(created, 1, 1)])[created].result(CALL_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_of_a_group_role_apply_to_its_members_and_deny_wins(cluster: Cluster):
    topic = new_topic()
    group = f"e2e-acl-group-{uuid.uuid4().hex[:6]}"
    assert produce_error("kafka_admin", topic) is None
    create_acls(
        acl(ResourceType.TOPIC, topic, "User:kafka_readers", AclOperation.READ),
        acl(ResourceType.GROUP, "e2e-acl-group-", "User:kafka_readers", AclOperation.READ,
            pattern=ResourcePatternType.PREFIXED),
    )
    stored = cluster.sql(f"select principal, operation, permission from kafgres.acls where resource_name = '{topic}'")
    assert stored == [("User:kafka_readers", "READ", "ALLOW")], stored
    assert read_back("kafka_reader", topic, group, 1) == [b"v"]
    # READ implies DESCRIBE, not WRITE.
    assert topic in visible_topics("kafka_reader")
    err = produce_error("kafka_reader", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # A member is denied what its group is allowed.
    create_acls(acl(ResourceType.TOPIC, topic, "User:kafka_reader", AclOperation.READ, AclPermissionType.DENY))
    with pytest.raises(KafkaException) as refused:
        read_back("kafka_reader", topic, f"{group}-2", 1)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused.value


def test_acls_are_described_and_deleted(cluster: Cluster):
    topic = new_topic()
    create_acls(acl(ResourceType.TOPIC, topic, "User:kafka_writer", AclOperation.WRITE))
    assert produce_error("kafka_writer", topic) is None
    a = admin("kafka_admin")
    match = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    described = a.describe_acls(match, request_timeout=CALL_TIMEOUT_S).result(CALL_TIMEOUT_S)
    assert [(b.principal, b.operation) for b in described] == [("User:kafka_writer", AclOperation.WRITE)]
    deleted = a.delete_acls([match], request_timeout=CALL_TIMEOUT_S)[match].result(CALL_TIMEOUT_S)
    assert [b.name for b in deleted] == [topic]
    assert cluster.sql(f"select count(*) from kafgres.acls where resource_name = '{topic}'") == [(0,)]
    err = produce_error("kafka_writer", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_an_acl_inserted_by_sql_applies_after_a_reload(cluster: Cluster):
    topic = new_topic()
    cluster.sql(
        "insert into kafgres.acls (resource_type, pattern_type, resource_name, principal, operation, permission) "
        f"values ('TOPIC', 'LITERAL', '{topic}', 'User:kafka_writer', 'WRITE', 'ALLOW')",
        "select pg_reload_conf()",
    )
    deadline = time.monotonic() + 20
    while produce_error("kafka_writer", topic) is not None:
        assert time.monotonic() < deadline, "the reloaded ACL did not apply"
        time.sleep(0.5)


def test_bad_acls_are_refused(cluster: Cluster):
    a = admin("kafka_admin")
    # librdkafka's BROKER is Kafka's CLUSTER resource type (4).
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:kafka_writer", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        a.create_acls([bad], request_timeout=CALL_TIMEOUT_S)[bad].result(CALL_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST, refused.value


def test_java_kafka_acls(cluster: Cluster, java_build, tmp_path: Path):
    from test_java_client import ok, run_java

    def command_config(user: str) -> Path:
        path = tmp_path / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{PASSWORD}";\n'
        )
        return path

    config = command_config("kafka_admin")
    topic = new_topic("e2e-acl-java")
    ok(run_java("kafka-acls", "--bootstrap-server", BOOTSTRAP, "--command-config", str(config), "--add",
                "--allow-principal", "User:kafka_writer", "--operation", "Write", "--topic", topic))
    listed = ok(run_java("kafka-acls", "--bootstrap-server", BOOTSTRAP, "--command-config", str(config), "--list",
                         "--topic", topic))
    assert "User:kafka_writer" in listed and "WRITE" in listed, listed
    assert produce_error("kafka_writer", topic) is None
    # Listing needs DESCRIBE on the cluster, which a role without ACLs lacks.
    refused = run_java("kafka-acls", "--bootstrap-server", BOOTSTRAP, "--command-config",
                       str(command_config("kafka_nobody")), "--list")
    assert "ClusterAuthorizationException" in refused.stdout + refused.stderr, refused.stdout + refused.stderr[-2000:]


def test_the_sql_api_follows_the_same_acls(cluster: Cluster):
    """The SQL functions act for their calling role: a role allowed to EXECUTE them is still held to the Kafka
    ACLs (one rulebook), and a superuser may do everything."""
    topic = new_topic()
    cluster.sql(
        "create role kafka_sqluser login",
        "grant usage on schema kafgres to kafka_sqluser",
        "grant execute on all functions in schema kafgres to kafka_sqluser",
    )
    as_sqluser = cluster.conninfo.replace("user=postgres", "user=kafka_sqluser")
    with psycopg.connect(as_sqluser, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute(f"SELECT kafgres.send('{topic}', 'v'::text)")
        assert "WRITE" in str(refused.value) and "kafka-acls.sh" in (refused.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM kafgres.read_text('{topic}', 0)").fetchall()
    create_acls(
        acl(ResourceType.TOPIC, topic, "User:kafka_sqluser", AclOperation.WRITE),
        acl(ResourceType.TOPIC, topic, "User:kafka_sqluser", AclOperation.READ),
    )
    with psycopg.connect(as_sqluser, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(f"SELECT kafgres.send('{topic}', 'from-sql'::text, 'k'::text)")
        assert conn.execute("SELECT kafgres.wait_for_sends('30 seconds')").fetchone() == (True,)
        rows = conn.execute(f"SELECT key, value FROM kafgres.read_text('{topic}', 0)").fetchall()
    assert rows == [("k", "from-sql")], rows
    # A superuser needs no ACL.
    assert cluster.sql(f"SELECT count(*) FROM kafgres.read_text('{topic}', 0)") == [(1,)]


def test_share_consume_follows_the_same_acls(cluster: Cluster):
    """kafgres.share_consume joins a share group and fetches as its calling role: it needs READ on the group and
    READ on the topic, as a Kafka share consumer does, and is refused with SQLSTATE 42501 until it has both."""
    topic = new_topic()
    group = f"e2e-acl-share-{uuid.uuid4().hex[:8]}"
    cluster.sql(
        "create role kafka_sharer login",
        "grant usage on schema kafgres to kafka_sharer",
        "grant execute on all functions in schema kafgres to kafka_sharer",
    )
    as_sharer = cluster.conninfo.replace("user=postgres", "user=kafka_sharer")
    call = f"SELECT value FROM kafgres.share_consume_text('{group}', '{topic}', 10, '1 s')"
    with psycopg.connect(as_sharer, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute(call).fetchall()
        assert "GROUP_AUTHORIZATION_FAILED" in str(refused.value), refused.value
        assert "kafka-acls.sh" in (refused.value.diag.message_hint or "")
    create_acls(acl(ResourceType.GROUP, group, "User:kafka_sharer", AclOperation.READ))
    with psycopg.connect(as_sharer, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            conn.execute(call).fetchall()
        assert "TOPIC_AUTHORIZATION_FAILED" in str(refused.value), refused.value
    create_acls(acl(ResourceType.TOPIC, topic, "User:kafka_sharer", AclOperation.READ))
    with psycopg.connect(as_sharer) as conn:
        assert conn.execute(call).fetchall() == []  # joined: the group starts at the log end
        conn.commit()
        producer = Producer({**sasl("kafka_admin"), "acks": "all"})
        for i in range(3):
            producer.produce(topic, value=f"job-{i}".encode())
        assert producer.flush(CALL_TIMEOUT_S) == 0
        got: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [v for (v,) in conn.execute(call).fetchall()]
        conn.commit()
    assert sorted(got) == ["job-0", "job-1", "job-2"], got


def test_no_panic_in_the_server_log(cluster: Cluster):
    panics = [line for line in cluster.log_text().splitlines() if "PANIC" in line or "panicked" in line]
    assert not panics, "\n".join(panics[:20])


# The Java build fixture lives with the Java tests; shared here.
from test_java_client import java_build  # noqa: E402,F401
