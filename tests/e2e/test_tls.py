"""TLS listeners with real clients (docs/security.md, "TLS listeners").

A throwaway cluster of its own: Postgres on 127.0.0.1:5493 with `ssl = on`,
Kafka's primary PLAINTEXT listener on 127.0.0.1:9493, and
`kafgres.listeners = 'SSL://127.0.0.1:9494,SASL_SSL://127.0.0.1:9495'` with
no `kafgres.ssl_cert_file`: the broker takes PostgreSQL's own certificate
and key (one certificate serves both), `kafgres.ssl_client_auth =
'requested'`, `kafgres.authorizer = 'acl'`. Certificates are made here with
openssl: a CA, the server's for 127.0.0.1, client certificates whose CN is a
role.

Checked with confluent-kafka (librdkafka 2.12), kcat (librdkafka 2.0.2) and
kafka-python (Python's ssl module):
- psql and a Kafka client verify the same certificate against the same CA;
- SASL_SSL with PLAIN (checked against the role's SCRAM verifier) and with
  SCRAM-SHA-256; a wrong PLAIN password fails; a non-ASCII password logs in
  with PLAIN as typed (SASLprep, as PostgreSQL prepared it);
- on the SSL listener a client certificate's CN is the role: CN=tls_app may
  write where an ACL lets User:tls_app write; without a certificate the
  client is User:ANONYMOUS and is refused; a certificate naming no role is
  dropped, and so is one of another CA or an expired one;
- Metadata on each listener advertises that listener, so clients stay on it;
- a new certificate and CA under the same file names take effect on
  `pg_reload_conf()`: new clients need the new CA, an established producer
  keeps producing.

Every wait has a deadline; the cluster is stopped and removed at the end.
test_tls_clients.py makes a cluster of its own the same way (`Cluster` on other ports,
`running_cluster`) for the Java client and franz-go.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType

from support import ThrowawayCluster, port_is_free, wait_for_topic_metadata

PG_PORT = 5493
KAFKA_PORT = 9493
SSL_PORT = 9494
SASL_SSL_PORT = 9495
PASSWORD = "tls-secret"
CALL_TIMEOUT_S = 20.0


def openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"openssl {' '.join(args)}: {result.stderr}"


class Certificates:
    """A CA and the certificates it signs, as PEM files in `dir`."""

    def __init__(self, dir: Path, name: str) -> None:
        self.dir = dir
        self.name = name
        dir.mkdir(parents=True, exist_ok=True)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.crt", cwd=dir)
        self.ca = dir / f"{name}-ca.crt"

    def issue(self, cn: str, server: bool = False, days: int = 2, tag: str = "") -> tuple[Path, Path]:
        """A certificate for `cn`, valid from now for `days`."""
        key, csr, crt, ext = self._request(cn, server, tag)
        openssl("x509", "-req", "-in", csr.name, "-CA", self.ca.name, "-CAkey", f"{self.name}-ca.key",
                "-CAcreateserial", "-days", str(days), "-extfile", ext.name, "-out", crt.name, cwd=self.dir)
        return crt, key

    def issue_expired(self, cn: str, tag: str = "") -> tuple[Path, Path]:
        """A client certificate for `cn` that expired in 2020 (valid for one day then). It used to be made with
        `-days 0`, valid until the second it was made, seconds before use; in one full run the broker took it
        from franz-go (the Java client's, in the same second, got certificate_expired), for a reason not found.
        Dates years in the past leave no doubt about which side of them the handshake is. `openssl ca` sets
        both dates, which `openssl x509` cannot before OpenSSL 3.4."""
        key, csr, crt, ext = self._request(cn, False, tag)
        config = self.dir / "expired-ca.cnf"
        config.write_text("[ca]\ndefault_ca = expired_ca\n[expired_ca]\ndatabase = expired-index.txt\n"
                          "new_certs_dir = .\nrand_serial = yes\ndefault_md = sha256\npolicy = any_name\n"
                          "unique_subject = no\n[any_name]\ncommonName = supplied\n")
        (self.dir / "expired-index.txt").touch()
        openssl("ca", "-batch", "-notext", "-config", config.name, "-cert", self.ca.name, "-keyfile",
                f"{self.name}-ca.key", "-in", csr.name, "-out", crt.name, "-startdate", "20200101000000Z",
                "-enddate", "20200102000000Z", "-extfile", ext.name, cwd=self.dir)
        return crt, key

    def _request(self, cn: str, server: bool, tag: str) -> tuple[Path, Path, Path, Path]:
        """A key and a signing request for `cn`, and the extensions file of its certificate."""
        key, csr, crt = (self.dir / f"{cn}{tag}.{ext}" for ext in ("key", "csr", "crt"))
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", key.name, "-out", csr.name,
                cwd=self.dir)
        ext = self.dir / f"{cn}.ext"
        usage = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n" if server else (
            "extendedKeyUsage=clientAuth\n")
        ext.write_text(usage)
        return key, csr, crt, ext


class Cluster(ThrowawayCluster):
    """The cluster described at the top; test_tls_clients.py makes one on ports of its own."""

    def __init__(self, tag: str = "tls", pg_port: int = PG_PORT, kafka_port: int = KAFKA_PORT,
                 ssl_port: int = SSL_PORT, sasl_ssl_port: int = SASL_SSL_PORT) -> None:
        if os.geteuid() != 0:
            pytest.fail("the TLS tests must run as root (they run initdb and pg_ctl as postgres)")
        super().__init__(tag, pg_port, kafka_port)
        self.ssl_port = ssl_port
        self.sasl_ssl_port = sasl_ssl_port
        self.certs = Certificates(self.home / "certs", "first")

    def install_server_certificate(self, certs: Certificates) -> None:
        """The server certificate and key where PostgreSQL's ssl_cert_file and ssl_key_file point."""
        crt, key = certs.issue("server", server=True)
        for source, target in ((crt, "server.crt"), (key, "server.key")):
            shutil.copyfile(source, self.pgdata / target)
            shutil.chown(self.pgdata / target, "postgres", "postgres")
            os.chmod(self.pgdata / target, 0o600)


@contextlib.contextmanager
def running_cluster(c: Cluster) -> Iterator[Cluster]:
    """`c` started with the TLS listeners, the roles kafka_admin (a superuser with PASSWORD), tls_app and
    tls_nologin, and `c.expired`, a client certificate for tls_app that has expired; stopped and removed
    at the end."""
    try:
        for port in (c.pg_port, c.kafka_port, c.ssl_port, c.sasl_ssl_port):
            assert port_is_free(port), f"port {port} is in use: is a TLS-test cluster from an earlier run still up?"
        clients_ca = c.home / "clients-ca.crt"
        shutil.copyfile(c.certs.ca, clients_ca)
        c.init({
            "ssl": "on",
            "ssl_ca_file": f"'{clients_ca}'",
            "kafgres.listeners": f"'SSL://127.0.0.1:{c.ssl_port},SASL_SSL://127.0.0.1:{c.sasl_ssl_port}'",
            "kafgres.ssl_client_auth": "requested",
            "kafgres.authorizer": "acl",
        })
        c.install_server_certificate(c.certs)
        c.expired = c.certs.issue_expired("tls_app", tag="-expired")
        c.start()
        c.sql(
            "create extension kafgres",
            f"create role kafka_admin superuser login password '{PASSWORD}'",
            "create role tls_app login",
            "create role tls_nologin nologin",
        )
        c.wait_until_serving(60)
        yield c
    finally:
        c.destroy()


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(Cluster()) as c:
        yield c


def ssl_config(cluster: Cluster, ca: Path, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{cluster.ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https", **extra}


def admin_config(cluster: Cluster, mechanism: str = "PLAIN", password: str = PASSWORD) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{cluster.sasl_ssl_port}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(cluster.certs.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": "kafka_admin",
        "sasl.password": password,
    }


def produce_one(config: dict, topic: str, value: bytes) -> KafkaError | None:
    """Produces one record; the delivery error, or None when it was written."""
    outcome: list = []
    producer = Producer({**config, "message.timeout.ms": 10000, "retries": 0})
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(CALL_TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def create_topic(config: dict, topic: str) -> None:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=CALL_TIMEOUT_S)[topic].result(CALL_TIMEOUT_S)


def test_postgres_and_kafka_serve_one_certificate_and_sasl_ssl_logs_in_with_the_roles_password(cluster):
    # psql verifies the certificate the broker presents: the same file.
    conninfo = (f"host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres sslmode=verify-full "
                f"sslrootcert={cluster.certs.ca} connect_timeout=5")
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()").fetchone() == (True,)
    broker_cert = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{SASL_SSL_PORT}", "-CAfile", str(cluster.certs.ca)],
        input="", capture_output=True, text=True, timeout=30,
    ).stdout
    assert "Verify return code: 0 (ok)" in broker_cert and "CN = server" in broker_cert, broker_cert[-2000:]

    topic = f"tls-{uuid.uuid4().hex[:8]}"
    create_topic(admin_config(cluster, "PLAIN"), topic)
    wait_for_topic_metadata(AdminClient(admin_config(cluster, "SCRAM-SHA-256")), topic, 1)
    assert produce_one(admin_config(cluster, "SCRAM-SHA-256"), topic, b"over SASL_SSL with SCRAM") is None
    assert produce_one(admin_config(cluster, "PLAIN"), topic, b"over SASL_SSL with PLAIN") is None

    consumer = Consumer({**admin_config(cluster), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while len(values) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    assert values == [b"over SASL_SSL with SCRAM", b"over SASL_SSL with PLAIN"]

    # Each listener advertises itself: a client that bootstrapped on SASL_SSL stays there.
    brokers = AdminClient(admin_config(cluster)).list_topics(timeout=CALL_TIMEOUT_S).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", SASL_SSL_PORT)]

    wrong = AdminClient({**admin_config(cluster, "PLAIN", "not-the-password")})
    with pytest.raises(KafkaException) as failed:
        wrong.list_topics(timeout=10)
    assert failed.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
    assert "SASL/PLAIN authentication of" in cluster.log_text()


def test_a_non_ascii_password_logs_in_with_plain_as_postgres_prepared_it(cluster):
    """PostgreSQL SASLprep-normalizes a password before making its verifier (a no-break space becomes a
    space, the Roman numeral nine "IX"); PLAIN prepares the typed password the same way, so the password as
    typed logs in, and the normalized form, being the same password, does too; another one does not."""
    typed = "pa\u00a0ss\u2168"
    cluster.sql("set password_encryption = 'scram-sha-256'", f"create role tls_unicode login password '{typed}'")

    def login(password: str) -> bool:
        config = {**admin_config(cluster, "PLAIN", password), "sasl.username": "tls_unicode"}
        try:
            AdminClient(config).list_topics(timeout=10)
            return True
        except KafkaException:
            return False

    assert login(typed)
    assert login("pa ssIX")
    assert not login("pa\u00a0ss")


def test_a_client_certificate_logs_in_as_its_cn_role_under_the_acls(cluster):
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    admin_cfg = admin_config(cluster)
    create_topic(admin_cfg, topic)
    admin = AdminClient(admin_cfg)
    allow = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:tls_app", "*", op, AclPermissionType.ALLOW)
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    for future in admin.create_acls(allow, request_timeout=CALL_TIMEOUT_S).values():
        future.result(CALL_TIMEOUT_S)

    crt, key = cluster.certs.issue("tls_app")
    with_cert = ssl_config(cluster, cluster.certs.ca, **{"ssl.certificate.location": str(crt), "ssl.key.location": str(key)})
    producer = Producer({**with_cert, "message.timeout.ms": 10000, "retries": 0})
    outcome: list = []
    producer.produce(topic, b"from CN=tls_app", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(CALL_TIMEOUT_S)
    assert outcome == [None]
    # While it is connected, the connection table names the certificate's role.
    principals = {row[0] for row in cluster.sql("select principal from kafgres.connections where principal is not null")}
    assert "tls_app" in principals, principals
    del producer

    # No certificate: User:ANONYMOUS, which no ACL lets write.
    refused = produce_one(ssl_config(cluster, cluster.certs.ca), topic, b"anonymous")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused

    # A certificate whose CN is a role without LOGIN is dropped at the handshake's end.
    crt, key = cluster.certs.issue("tls_nologin")
    dropped = AdminClient(ssl_config(cluster, cluster.certs.ca, **{
        "ssl.certificate.location": str(crt), "ssl.key.location": str(key)}))
    with pytest.raises(KafkaException):
        dropped.list_topics(timeout=5)
    assert 'names role "tls_nologin", which does not exist or may not log in' in cluster.log_text()

    # kcat (librdkafka 2.0.2) over the SSL listener.
    crt, key = cluster.certs.issue("tls_app")
    listed = subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{SSL_PORT}", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={cluster.certs.ca}",
         "-X", f"ssl.certificate.location={crt}", "-X", f"ssl.key.location={key}", "-L", "-t", topic, "-m", "15"],
        capture_output=True, text=True, timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert f'topic "{topic}" with 1 partitions' in listed.stdout, listed.stdout
    assert f"127.0.0.1:{SSL_PORT}" in listed.stdout, listed.stdout


def set_client_auth(cluster: Cluster, mode: str) -> None:
    """ALTER SYSTEM SET kafgres.ssl_client_auth, reloaded; waits for the broker's reload line."""
    marker = "TLS certificate and settings reloaded"
    before = cluster.log_text().count(marker)
    cluster.sql(f"alter system set kafgres.ssl_client_auth = '{mode}'", "select pg_reload_conf()")
    deadline = time.monotonic() + 30
    while cluster.log_text().count(marker) <= before:
        assert time.monotonic() < deadline, cluster.log_tail()
        time.sleep(0.1)


def test_certificates_of_another_ca_or_expired_are_refused_and_kafka_python_is_served(cluster):
    topic = f"refuse-{uuid.uuid4().hex[:8]}"
    create_topic(admin_config(cluster), topic)
    # Client certificates become required at a reload, without a restart.
    set_client_auth(cluster, "required")
    try:
        # Another CA under the name of the cluster's: librdkafka presents only a certificate whose issuer
        # has a name the server asks for, so this one is sent, and its signature is what the broker refuses.
        stranger = Certificates(cluster.home / "certs-stranger", cluster.certs.name)
        offset = len(cluster.log_text())
        for crt, key in (stranger.issue("tls_app"), cluster.expired, (None, None)):
            files = {"ssl.certificate.location": str(crt), "ssl.key.location": str(key)} if crt else {}
            client = AdminClient(ssl_config(cluster, cluster.certs.ca, **files))
            with pytest.raises(KafkaException):
                client.list_topics(timeout=5)
        refusals = cluster.log_text()[offset:]
        assert refusals.count("TLS handshake with") >= 3, refusals[-3000:]
        assert "expired" in refusals.lower(), refusals[-3000:]
        assert "invalid peer certificate: BadSignature" in refusals, refusals[-3000:]
        crt, key = cluster.certs.issue("tls_app", tag="-required")
        assert AdminClient(ssl_config(cluster, cluster.certs.ca, **{
            "ssl.certificate.location": str(crt), "ssl.key.location": str(key)})).list_topics(timeout=10)
    finally:
        set_client_auth(cluster, "requested")

    # kafka-python over SSL with a client certificate (its own TLS stack: Python's ssl module).
    from kafka import KafkaConsumer, KafkaProducer
    crt, key = cluster.certs.issue("kafka_admin", tag="-python")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(cluster.certs.ca), "ssl_certfile": str(crt),
           "ssl_keyfile": str(key), "bootstrap_servers": f"127.0.0.1:{SSL_PORT}"}
    producer = KafkaProducer(**tls, request_timeout_ms=20000)
    producer.send(topic, b"from kafka-python over SSL").get(timeout=CALL_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, **tls, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"from kafka-python over SSL"]


def test_kafka_python_over_sasl_ssl_with_scram_and_plain_and_refusals(cluster):
    """kafka-python (Python's ssl module) on the SASL_SSL listener: SCRAM-SHA-256 and PLAIN as a role with its
    Postgres password produce; a wrong password fails authentication; a client that trusts another CA
    refuses the broker; an expired client certificate is refused on the SSL listener once certificates are
    required."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as PythonKafkaError

    topic = f"py-sasl-{uuid.uuid4().hex[:8]}"
    create_topic(admin_config(cluster), topic)

    def sasl_ssl(mechanism: str, password: str, cafile: Path) -> dict:
        return {"bootstrap_servers": f"127.0.0.1:{SASL_SSL_PORT}", "security_protocol": "SASL_SSL",
                "ssl_cafile": str(cafile), "sasl_mechanism": mechanism, "sasl_plain_username": "kafka_admin",
                "sasl_plain_password": password, "request_timeout_ms": 15000}

    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        producer = KafkaProducer(**sasl_ssl(mechanism, PASSWORD, cluster.certs.ca))
        try:
            written = producer.send(topic, f"kafka-python {mechanism}".encode()).get(timeout=CALL_TIMEOUT_S)
            assert written.topic == topic, written
        finally:
            producer.close(timeout=5)
    refusals = [
        ("a wrong password", sasl_ssl("SCRAM-SHA-256", "not-it", cluster.certs.ca)),
        ("a wrong PLAIN password", sasl_ssl("PLAIN", "not-it", cluster.certs.ca)),
        ("another CA trusted", sasl_ssl("PLAIN", PASSWORD, Certificates(cluster.home / "certs-py", "py").ca)),
    ]
    for what, config in refusals:
        with pytest.raises(PythonKafkaError):
            producer = KafkaProducer(**config, max_block_ms=5000, bootstrap_timeout_ms=5000)
            try:
                producer.send(topic, b"refused").get(timeout=10)
            finally:
                producer.close(timeout=5)
            pytest.fail(f"kafka-python was served with {what}")
    set_client_auth(cluster, "required")
    try:
        crt, key = cluster.expired
        with pytest.raises(PythonKafkaError):
            producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{SSL_PORT}", security_protocol="SSL",
                                     ssl_cafile=str(cluster.certs.ca), ssl_certfile=str(crt), ssl_keyfile=str(key),
                                     max_block_ms=5000, bootstrap_timeout_ms=5000, request_timeout_ms=8000)
            try:
                producer.send(topic, b"expired").get(timeout=10)
            finally:
                producer.close(timeout=5)
            pytest.fail("kafka-python was served with an expired certificate")
    finally:
        set_client_auth(cluster, "requested")


def test_a_reload_serves_a_renewed_certificate_without_dropping_connections(cluster):
    topic = f"renew-{uuid.uuid4().hex[:8]}"
    create_topic(admin_config(cluster), topic)
    established = Producer({**admin_config(cluster), "message.timeout.ms": 10000})
    delivered: list = []
    established.produce(topic, b"before", on_delivery=lambda err, _m: delivered.append(err))
    established.flush(CALL_TIMEOUT_S)
    assert delivered == [None]

    renewed = Certificates(cluster.home / "certs-renewed", "second")
    cluster.install_server_certificate(renewed)
    cluster.sql("select pg_reload_conf()")
    deadline = time.monotonic() + 30
    while "TLS certificate and settings reloaded" not in cluster.log_text():
        assert time.monotonic() < deadline, cluster.log_tail()
        time.sleep(0.2)

    # New clients must trust the new CA; the old CA no longer verifies.
    fresh = {**admin_config(cluster), "ssl.ca.location": str(renewed.ca)}
    assert produce_one(fresh, topic, b"after, new client") is None
    stale = AdminClient({**admin_config(cluster), "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        stale.list_topics(timeout=5)
    # The producer connected before the reload keeps its session.
    established.produce(topic, b"after, old connection", on_delivery=lambda err, _m: delivered.append(err))
    established.flush(CALL_TIMEOUT_S)
    assert delivered == [None, None]
    # Restore the first certificate for the other tests of the module.
    cluster.install_server_certificate(cluster.certs)
    cluster.sql("select pg_reload_conf()")
