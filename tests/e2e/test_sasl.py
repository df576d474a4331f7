"""SASL/SCRAM-SHA-256 against PostgreSQL roles, with real clients (docs/conformance.md, "SASL").

A throwaway cluster of its own (initdb under /tmp, Postgres on 127.0.0.1:5498,
Kafka on 127.0.0.1:9498) with `kafgres.authentication = 'scram-sha-256'`, so
the main cluster keeps serving unauthenticated clients. Roles created here:

- kafka_app: LOGIN, a SCRAM-SHA-256 password;
- "kafka,odd=name": LOGIN, a name clients must escape (=2C, =3D);
- kafka_nologin: NOLOGIN, a SCRAM password;
- kafka_expired: LOGIN, a SCRAM password, VALID UNTIL in the past;
- kafka_md5: LOGIN, an md5 password (no SCRAM verifier).

Checked: confluent-kafka (librdkafka 2.12) produces and consumes as
kafka_app, and `kafgres.connections` shows the principal; kcat (librdkafka
2.0.2) produces, consumes and lists; kafka-python produces and reads back;
Kafka's own kafka-topics (the Java client 4.1, tests/java) creates and lists
topics; a wrong password, an unknown user, NOLOGIN, an expired password and an
md5 password all fail with an authentication error (the same one); a
password change applies to the next connection; a client without SASL is
refused (its first request after ApiVersions closes the connection); the
SQL API and the SQL bridge, which log in themselves (KAFGRES-INTERNAL), work.
With `kafgres.connections_max_reauth_ms` (KIP-368), confluent-kafka's
producer re-authenticates on its open connections across several session
lifetimes without an error, and a password changed meanwhile makes its next
re-authentication fail.

Every wait has a deadline; the cluster is stopped and removed at the end, also
on failure. Runs as root (initdb and pg_ctl run as the postgres user).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
import warnings
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire
from support import ThrowawayCluster, port_is_free, wait_for_topic_metadata

PG_PORT = 5498
KAFKA_PORT = 9498
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
READY_TIMEOUT_S = 60.0
# librdkafka retries a failed login until the call's own timeout.
LOGIN_TIMEOUT_S = 8.0

APP_USER, APP_PASSWORD = "kafka_app", "app-secret-1"
ODD_USER, ODD_PASSWORD = "kafka,odd=name", "odd-secret"
# (user, password) pairs that must not log in, and why.
REFUSED = {
    "wrong password": (APP_USER, "not-the-password"),
    "unknown user": ("kafka_nobody", "whatever"),
    "NOLOGIN": ("kafka_nologin", "nologin-secret"),
    "expired VALID UNTIL": ("kafka_expired", "expired-secret"),
    "md5 password": ("kafka_md5", "md5-secret"),
}


class Cluster(ThrowawayCluster):
    """The throwaway cluster of this test, with `kafgres.authentication = 'scram-sha-256'`.
    SQL goes over TCP with trust: pg_hba.conf plays no part in Kafka logins."""

    def __init__(self) -> None:
        super().__init__("sasl", PG_PORT, KAFKA_PORT)

    def init_and_start(self) -> None:
        self.init({"kafgres.authentication": "'scram-sha-256'"})
        self.start()

    def wait_ready(self) -> None:
        self.wait_until_serving(READY_TIMEOUT_S)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the SASL test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a SASL-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init_and_start()
        c.sql(
            "create extension kafgres",
            "set password_encryption = 'scram-sha-256'",
            f"create role {APP_USER} login password '{APP_PASSWORD}'",
            f"create role \"{ODD_USER}\" login password '{ODD_PASSWORD}'",
            "create role kafka_nologin nologin password 'nologin-secret'",
            "create role kafka_expired login password 'expired-secret' valid until '2001-01-01'",
            "set password_encryption = 'md5'",
            "create role kafka_md5 login password 'md5-secret'",
        )
        stored = dict(c.sql("select rolname, left(rolpassword, 14) from pg_authid where rolname like 'kafka%'"))
        assert stored[APP_USER] == "SCRAM-SHA-256$" and stored["kafka_md5"].startswith("md5"), stored
        c.wait_ready()
        yield c
    finally:
        c.destroy()


def sasl(user: str, password: str) -> dict:
    return {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def login_errors(user: str, password: str) -> list[KafkaError]:
    """Asks for metadata as user/password with confluent-kafka: [] if it worked, else librdkafka's errors."""
    errors: list[KafkaError] = []
    admin = AdminClient({**sasl(user, password), "error_cb": errors.append})
    try:
        admin.list_topics(timeout=LOGIN_TIMEOUT_S)
        return []
    except KafkaException as e:
        deadline = time.monotonic() + 5
        while not any(err.code() == KafkaError._AUTHENTICATION for err in errors) and time.monotonic() < deadline:
            admin.poll(0.2)
        return errors or [e.args[0]]


def authentication_failed(errors: list[KafkaError]) -> bool:
    return any(e.code() == KafkaError._AUTHENTICATION and "Authentication failed" in e.str() for e in errors)


def create_topic(user: str, password: str, partitions: int = 1) -> str:
    topic = f"e2e-sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl(user, password))
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    wait_for_topic_metadata(admin, topic, partitions)
    return topic


def consume_all(config: dict, topic: str, count: int, timeout_s: float = 30.0) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({**config, "group.id": f"e2e-sasl-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
        return got
    finally:
        consumer.close()


def test_a_role_produces_and_consumes_with_its_password(cluster: Cluster):
    topic = create_topic(APP_USER, APP_PASSWORD)
    producer = Producer({**sasl(APP_USER, APP_PASSWORD), "acks": "all"})
    failures: list[str] = []
    for i in range(10):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", on_delivery=lambda e, m: e and failures.append(str(e)))
    assert producer.flush(30) == 0 and not failures, failures
    # While the producer's connection is open, SQL sees who it is.
    principals = [r[0] for r in cluster.sql("select principal from kafgres.connections")]
    assert APP_USER in principals, principals
    got = consume_all(sasl(APP_USER, APP_PASSWORD), topic, 10)
    assert got == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]


def test_sessions_end_and_librdkafka_re_authenticates(cluster: Cluster):
    """kafgres.connections_max_reauth_ms (KIP-368): a producer sending across several session lifetimes
    re-authenticates on its connections and never sees an error; a password change then reaches the open
    connection at its next re-authentication, which fails and closes it."""
    lifetime_ms = 1500
    cluster.reload(connections_max_reauth_ms=lifetime_ms)
    try:
        topic = create_topic(APP_USER, APP_PASSWORD)
        errors: list[KafkaError] = []
        failures: list[str] = []
        producer = Producer({**sasl(APP_USER, APP_PASSWORD), "acks": "all", "linger.ms": 0,
                             "error_cb": errors.append})
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < 4 * lifetime_ms / 1000:
            producer.produce(topic, value=f"v{sent}", on_delivery=lambda e, m: e and failures.append(str(e)))
            assert producer.flush(10) == 0
            sent += 1
            time.sleep(0.05)
        assert not failures and not errors, (failures, errors)
        # The same connections served all along: their sessions were renewed, not replaced.
        [[oldest_s]] = cluster.sql(
            "select extract(epoch from now() - min(connected_at)) from kafgres.connections "
            f"where principal = '{APP_USER}'")
        assert float(oldest_s) > 3 * lifetime_ms / 1000, oldest_s
        got = consume_all(sasl(APP_USER, APP_PASSWORD), topic, sent)
        assert [v for _, v in got] == [f"v{i}".encode() for i in range(sent)]

        # A new password reaches the open connection at its next re-authentication.
        cluster.sql(f"alter role {APP_USER} password 'app-secret-2'")
        deadline = time.monotonic() + 3 * lifetime_ms / 1000
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
            producer.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        cluster.sql(f"alter role {APP_USER} password '{APP_PASSWORD}'")
        cluster.reload(connections_max_reauth_ms=0)


def test_an_escaped_user_name_logs_in(cluster: Cluster):
    assert login_errors(ODD_USER, ODD_PASSWORD) == []


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_logins_fail_with_an_authentication_error(cluster: Cluster, case: str):
    user, password = REFUSED[case]
    errors = login_errors(user, password)
    assert authentication_failed(errors), f"{case}: {[e.str() for e in errors]}"


def test_a_password_change_applies_to_the_next_connection(cluster: Cluster):
    cluster.sql("create role kafka_changed login password 'before'")
    assert login_errors("kafka_changed", "before") == []
    cluster.sql("alter role kafka_changed password 'after'")
    assert authentication_failed(login_errors("kafka_changed", "before"))
    assert login_errors("kafka_changed", "after") == []


def test_a_client_without_sasl_is_refused(cluster: Cluster):
    # Raw: ApiVersions is answered, Metadata closes the connection unanswered.
    with kafka_wire.connect(BOOTSTRAP) as sock:
        sock.sendall(kafka_wire.api_versions_request(3, 1))
        assert kafka_wire.read_response(sock)
        sock.sendall(kafka_wire.metadata_v1_request(2, None))
        closed, received = kafka_wire.wait_for_close(sock, 10)
        assert closed and received == b"", (closed, received)
    # librdkafka without SASL gets no metadata.
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    assert "unexpected Kafka request of type Metadata" in cluster.log_text()


def kcat(*args: str, stdin: str | None = None, user: str = APP_USER, password: str = APP_PASSWORD):
    cmd = ["kcat", "-b", BOOTSTRAP, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
           "-X", f"sasl.username={user}", "-X", f"sasl.password={password}", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)


def test_kcat(cluster: Cluster):
    if shutil.which("kcat") is None:
        pytest.fail("kcat not found (apt-get install kcat)")
    topic = create_topic(APP_USER, APP_PASSWORD)
    produced = kcat("-P", "-t", topic, "-K:", stdin="k1:v1\nk2:v2\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("-C", "-t", topic, "-e", "-o", "beginning", "-f", "%k=%s\n")
    assert consumed.returncode == 0 and consumed.stdout.splitlines() == ["k1=v1", "k2=v2"], consumed
    listed = kcat("-L", "-t", topic)
    assert listed.returncode == 0 and f'topic "{topic}"' in listed.stdout, listed
    refused = kcat("-L", password="wrong")
    assert refused.returncode != 0 and "uthentication" in refused.stderr, refused


def test_kafka_python(cluster: Cluster):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, KafkaProducer
        from kafka import TopicPartition as KTopicPartition
    topic = create_topic(APP_USER, APP_PASSWORD)
    common = dict(
        bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=APP_USER, sasl_plain_password=APP_PASSWORD, request_timeout_ms=15000,
    )
    producer = KafkaProducer(**common, max_block_ms=20000)
    try:
        meta = producer.send(topic, key=b"kp", value=b"hello").get(timeout=20)
        assert meta.offset == 0
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(**common, consumer_timeout_ms=5000, enable_auto_commit=False)
    try:
        consumer.assign([KTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = [(r.key, r.value) for r in consumer]
        assert got == [(b"kp", b"hello")]
    finally:
        consumer.close()


def test_java_kafka_topics(cluster: Cluster, java_build, tmp_path: Path):
    from test_java_client import ok, run_java

    def command_config(password: str) -> str:
        path = tmp_path / f"client-{uuid.uuid4().hex[:6]}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{APP_USER}" password="{password}";\n'
        )
        return str(path)

    topic = f"e2e-sasl-java-{uuid.uuid4().hex[:8]}"
    good = command_config(APP_PASSWORD)
    ok(run_java("kafka-topics", "--bootstrap-server", BOOTSTRAP, "--command-config", good, "--create",
                "--topic", topic, "--partitions", "2", "--replication-factor", "1"))
    assert topic in ok(run_java("kafka-topics", "--bootstrap-server", BOOTSTRAP, "--command-config", good, "--list"))
    refused = run_java("kafka-topics", "--bootstrap-server", BOOTSTRAP, "--command-config", command_config("wrong"),
                       "--list")
    assert refused.returncode != 0, refused.stdout
    assert "Authentication failed" in refused.stdout + refused.stderr, refused.stderr[-3000:]


def test_java_admin_sets_and_deletes_scram_credentials(cluster: Cluster, java_build, tmp_path: Path, monkeypatch):
    """The Java Admin client's alterUserScramCredentials (it salts the password itself) and
    describeUserScramCredentials, as a superuser role: the credential becomes the role's password and logs
    it in; SCRAM-SHA-512 is refused; after the deletion the role cannot log in (tests/java's
    scram-credentials scenario)."""
    from test_java_client import probe

    role = f"kafka_java_{uuid.uuid4().hex[:6]}"
    cluster.sql("set password_encryption = 'scram-sha-256'",
                "create role kafka_java_admin superuser login password 'java-admin-secret'",
                f"create role {role} login")
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="kafka_java_admin" password="java-admin-secret";\n'
    )
    monkeypatch.setenv("KAFGRES_PROBE_CONFIG", str(config))
    lines = probe("scram-credentials", BOOTSTRAP, role)
    assert lines == [
        "upsert SCRAM-SHA-256: ok",
        "described: SCRAM_SHA_256 8192",
        "login with it: ok",
        "upsert SCRAM-SHA-512: UnsupportedSaslMechanismException",
        "delete SCRAM-SHA-256: ok",
        "login after the deletion: SaslAuthenticationException",
        "describe after the deletion: ResourceNotFoundException",
    ], lines
    stored = cluster.sql(f"select rolpassword from pg_authid where rolname = '{role}'")
    assert stored == [(None,)], stored


def test_the_sql_api_works_with_sasl_required(cluster: Cluster):
    """The SQL functions and the SQL bridge log in to the broker themselves (SASL KAFGRES-INTERNAL, with the
    cluster's internal secret): with SCRAM required of Kafka clients, a topic created from SQL, records sent
    in a transaction and read back from SQL all work, and a Kafka client sees the records."""
    topic = f"e2e-sasl-sql-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        conn.execute(f"SELECT kafgres.create_topic('{topic}', 1)")
        with conn.transaction():
            for i in range(3):
                conn.execute(f"SELECT kafgres.send('{topic}', 'v{i}'::text, 'k{i}'::text)")
        conn.execute("SELECT kafgres.wait_for_sends('30 seconds')")
        rows = conn.execute(f"SELECT key, value FROM kafgres.read_text('{topic}', 0, 0, 10)").fetchall()
    assert rows == [(f"k{i}", f"v{i}") for i in range(3)], rows
    got = consume_all(sasl(APP_USER, APP_PASSWORD), topic, 3)
    assert got == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]
    # Its connections show as the calling role (postgres) and the bridge's internal principal.
    principals = {r[0] for r in cluster.sql("select principal from kafgres.connections where principal is not null")}
    assert "kafgres (internal)" in principals, principals


def test_scram_credentials_set_over_kafka_are_role_passwords(cluster: Cluster):
    """KIP-554 with kafka-python: a superuser role gives a new role a SCRAM-SHA-256 credential (the
    client sends a salted password), which is the role's Postgres password (pg_authid holds the verifier)
    and logs it in over Kafka; describe shows it; a role that is not a superuser may not change another's;
    SCRAM-SHA-512 is refused; deleting the credential removes the password and the login."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient
        from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion
    admin_user, admin_password = "kafka_scram_admin", "admin-secret"
    new_user = f"kafka_scram_{uuid.uuid4().hex[:6]}"
    cluster.sql("set password_encryption = 'scram-sha-256'",
                f"create role {admin_user} superuser login password '{admin_password}'",
                f"create role {new_user} login")

    def admin_as(user: str, password: str) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                                sasl_plain_password=password, request_timeout_ms=15000)

    admin = admin_as(admin_user, admin_password)
    try:
        assert login_errors(new_user, "new-secret") != []
        set_it = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(new_user, "SCRAM-SHA-256", "new-secret", iterations=8192)])
        assert set_it == {new_user: None}, set_it
        stored = cluster.sql(f"select rolpassword from pg_authid where rolname = '{new_user}'")[0][0]
        assert stored.startswith("SCRAM-SHA-256$8192:"), stored
        assert login_errors(new_user, "new-secret") == []
        described = admin.describe_user_scram_credentials([new_user])
        assert [(c["mechanism"].name, c["iterations"]) for c in described[new_user]["credential_infos"]] == [
            ("SCRAM_SHA_256", 8192)], described
        listed = admin.describe_user_scram_credentials()
        assert {new_user, admin_user, APP_USER} <= set(listed) and "kafka_md5" not in listed, listed

        sha512 = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(new_user, "SCRAM-SHA-512", "other-secret")])
        assert "SCRAM-SHA-256 only" in (sha512[new_user] or ""), sha512
        app = admin_as(APP_USER, APP_PASSWORD)
        try:
            theirs = app.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(new_user, "SCRAM-SHA-256", "hijacked")])
            assert "only a superuser" in (theirs[new_user] or ""), theirs
        finally:
            app.close()
        assert login_errors(new_user, "new-secret") == []

        deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(new_user, "SCRAM-SHA-256")])
        assert deleted == {new_user: None}, deleted
        assert cluster.sql(f"select rolpassword from pg_authid where rolname = '{new_user}'") == [(None,)]
        assert authentication_failed(login_errors(new_user, "new-secret"))
    finally:
        admin.close()


def test_no_panic_in_the_server_log(cluster: Cluster):
    panics = [line for line in cluster.log_text().splitlines() if "PANIC" in line or "panicked" in line]
    assert not panics, "\n".join(panics[:20])


# The Java build fixture lives with the Java tests; shared here.
from test_java_client import java_build  # noqa: E402,F401
