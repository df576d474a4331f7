"""Delegation tokens (KIP-48) with Kafka's own tools and the Java client (docs/security.md).

A throwaway cluster of its own (initdb under /tmp, Postgres on 127.0.0.1:5494, Kafka on 127.0.0.1:9494) with
`kafgres.authentication = 'scram-sha-256'`, `kafgres.authorizer = 'acl'` and a
`kafgres.delegation_token_secret_key`. Roles: token_admin (SUPERUSER LOGIN, manages the ACLs), token_owner
(LOGIN, WRITE and READ on one topic by ACL), token_renewer (LOGIN, named as a renewer).

Checked with kafka-delegation-tokens.sh, kafka-topics.sh and kafka-console-producer.sh (kafka-tools and
kafka-clients 4.4, tests/java): token_owner creates a token naming token_renewer; the token's HMAC logs in
with SCRAM-SHA-256 and `tokenauth="true"` as token_owner, holding that role's ACLs (it lists only the topic it
may use, and produces to it); token_renewer renews it, a stranger may not; the owner describes it; a login
over the token may not create another token; expired, the token no longer logs in, and its row is gone from
`kafgres.delegation_tokens`.

Every wait has a deadline; the cluster is stopped and removed at the end, also on failure. Runs as root.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

from support import ThrowawayCluster, port_is_free, wait_for_topic_metadata
from test_java_client import JAVA_BIN, _tool_env, java_build, ok, run_java  # noqa: F401 (java_build: a fixture)

PG_PORT = 5494
KAFKA_PORT = 9494
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
READY_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 20.0
PASSWORD = "token-secret-pw"


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("tokens", PG_PORT, KAFKA_PORT)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the delegation token test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a token-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({"kafgres.authentication": "'scram-sha-256'", "kafgres.authorizer": "'acl'",
                "kafgres.delegation_token_secret_key": "'e2e-delegation-token-secret'"})
        c.start()
        c.sql(
            "create extension kafgres",
            "set password_encryption = 'scram-sha-256'",
            f"create role token_admin superuser login password '{PASSWORD}'",
            f"create role token_owner login password '{PASSWORD}'",
            f"create role token_renewer login password '{PASSWORD}'",
        )
        c.wait_until_serving(READY_TIMEOUT_S)
        yield c
    finally:
        c.destroy()


def sasl(user: str) -> dict:
    return {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": PASSWORD}


def client_config(path: Path, username: str, password: str, token: bool = False) -> Path:
    extension = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{password}"{extension};\n'
    )
    return path


def tokens(*args: str, config: Path) -> str:
    return ok(run_java("kafka-delegation-tokens", "--bootstrap-server", BOOTSTRAP, "--command-config", str(config),
                       *args))


def test_a_token_logs_in_as_its_owner_and_follows_its_lifecycle(cluster: Cluster, java_build, tmp_path: Path):  # noqa: F811
    admin = AdminClient(sasl("token_admin"))
    mine, other = f"tok-mine-{uuid.uuid4().hex[:6]}", f"tok-other-{uuid.uuid4().hex[:6]}"
    for topic in (mine, other):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(CALL_TIMEOUT_S)
        wait_for_topic_metadata(admin, topic, 1)
    bindings = [AclBinding(ResourceType.TOPIC, mine, ResourcePatternType.LITERAL, "User:token_owner", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    for future in admin.create_acls(bindings, request_timeout=CALL_TIMEOUT_S).values():
        future.result(CALL_TIMEOUT_S)

    owner = client_config(tmp_path / "owner.properties", "token_owner", PASSWORD)
    renewer = client_config(tmp_path / "renewer.properties", "token_renewer", PASSWORD)
    created = tokens("--create", "--max-life-time-period", "-1", "--renewer-principal", "User:token_renewer",
                     config=owner)
    token_id = re.search(r"tokenId\s*:\s*'?([A-Za-z0-9_\-+/=]+)'?", created)
    assert token_id, created
    token_id = token_id.group(1)
    row = next((line.split() for line in created.splitlines() if line.startswith(token_id)), None)
    assert row and len(row) >= 3, created
    hmac = row[1]
    assert "User:token_owner" in row, row
    assert cluster.sql(f"SELECT owner, renewers FROM kafgres.delegation_tokens WHERE token_id = '{token_id}'") == [
        ("token_owner", ["token_renewer"])]

    # The token logs in as token_owner and holds its ACLs: it sees only the topic it may use, and writes there.
    token = client_config(tmp_path / "token.properties", token_id, hmac, token=True)
    listed = ok(run_java("kafka-topics", "--bootstrap-server", BOOTSTRAP, "--command-config", str(token), "--list"))
    assert mine in listed.split() and other not in listed.split(), listed
    produced = subprocess.run(
        [str(JAVA_BIN / "kafka-console-producer"), "--bootstrap-server", BOOTSTRAP, "--producer.config", str(token),
         "--topic", mine], input="over-a-token\n", capture_output=True, text=True, timeout=120, env=_tool_env())
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumer = Consumer({**sasl("token_admin"), "group.id": f"tok-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(mine, 0, OFFSET_BEGINNING)])
        got = None
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got = msg.value()
        assert got == b"over-a-token"
    finally:
        consumer.close()

    # A login over a token may not create tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).
    refused = run_java("kafka-delegation-tokens", "--bootstrap-server", BOOTSTRAP, "--command-config", str(token),
                       "--create", "--max-life-time-period", "-1")
    said = refused.stdout + refused.stderr
    assert "UnsupportedByAuthenticationException" in said or "not allowed" in said.lower(), said[-2000:]

    # The renewer renews; the owner describes it.
    renewed = tokens("--renew", "--hmac", hmac, "--renew-time-period", "3600000", config=renewer)
    assert "Completed renew operation" in renewed, renewed
    described = tokens("--describe", "--owner-principal", "User:token_owner", config=owner)
    assert token_id in described, described

    # Expired now: the token no longer logs in and its row is gone.
    expired = tokens("--expire", "--hmac", hmac, "--expiry-time-period", "-1", config=owner)
    assert "Completed expire operation" in expired, expired
    assert cluster.sql(f"SELECT count(*) FROM kafgres.delegation_tokens WHERE token_id = '{token_id}'") == [(0,)]
    failed = run_java("kafka-topics", "--bootstrap-server", BOOTSTRAP, "--command-config", str(token), "--list")
    assert failed.returncode != 0 and "SaslAuthenticationException" in failed.stdout + failed.stderr, (
        failed.stdout + failed.stderr[-2000:])


def test_no_panic_in_the_server_log(cluster: Cluster):
    panics = [line for line in cluster.log_text().splitlines() if "PANIC" in line or "panicked" in line]
    assert not panics, "\n".join(panics[:20])
