"""SASL/OAUTHBEARER and PostgreSQL user name maps with real clients (docs/security.md, "OAUTHBEARER"
and "Mapping names to roles").

A throwaway cluster of its own: Postgres on 127.0.0.1:5468 with `ssl = on`, Kafka's primary PLAINTEXT
listener on 127.0.0.1:9468, `kafgres.listeners = 'SASL_SSL://127.0.0.1:9469,SSL://127.0.0.1:9470'`,
`kafgres.authorizer = 'acl'`. An identity provider is played here: an RSA key made with openssl, its
public key in a JWKS file (`kafgres.oauthbearer_jwks_file`), RS256 tokens signed with `openssl dgst`, and
a client-credentials token endpoint on loopback for the Java client. The cluster's own `pg_ident.conf`
holds two maps: `kafka_tokens` (token subjects `svc-<role>`) and `kafka_certs` (certificate subjects
`CN=<role>.clients.test`, read as DNs: `kafgres.ssl_client_name = 'DN'`).

Checked with confluent-kafka (librdkafka 2.12, `oauth_cb`), the Java client 4.1 (its
`OAuthBearerLoginCallbackHandler` against the token endpoint) and kafka-python (a token provider):
- a token whose subject the map turns into a role logs in as that role, and the ACLs of that role apply
  (a topic it may write is written, one it may not is refused);
- an expired token, a token signed by another key and a subject the map does not cover are refused;
- a rotated key file applies without a reload (the old key's tokens are refused from then on);
- a client certificate is mapped by its DN through `kafka_certs` on the SSL listener.

Every wait has a deadline; the cluster and the token endpoint are stopped at the end.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from support import ThrowawayCluster, port_is_free
from test_java_client import java_build  # noqa: F401 (a fixture)
from test_tls import Certificates, openssl, produce_one

PG_PORT = 5468
KAFKA_PORT = 9468
SASL_SSL_PORT = 9469
SSL_PORT = 9470
ISSUER = "https://idp.kafgres.test"
CALL_TIMEOUT_S = 20.0

IDENT_MAPS = r"""
# Kafka clients (tests/e2e/test_oauthbearer.py)
kafka_tokens   /^svc-([a-z_]+)$                 \1
kafka_certs    /^CN=([a-z_]+)\.clients\.test$   \1
"""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class IdentityProvider:
    """An RSA signing key and its JWKS file; tokens signed with openssl."""

    def __init__(self, dir: Path, kid: str) -> None:
        self.dir, self.kid = dir, kid
        dir.mkdir(parents=True, exist_ok=True)
        self.key = dir / f"{kid}.pem"
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.key.name, cwd=dir)

    def jwk(self) -> dict:
        modulus = subprocess.run(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout.strip().split("=", 1)[1]
        return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256", "n": b64url(bytes.fromhex(modulus)),
                "e": "AQAB"}

    def token(self, sub: str, ttl_s: int = 600) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"sub": sub, "iss": ISSUER, "iat": now, "exp": now + ttl_s, "scope": "kafka"}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)], input=signing_input.encode(),
                                   capture_output=True, timeout=30, check=True).stdout
        return f"{signing_input}.{b64url(signature)}"


def write_jwks(path: Path, *providers: IdentityProvider) -> None:
    """Written beside and renamed over, as a key rotation job would."""
    staged = path.with_suffix(".new")
    staged.write_text(json.dumps({"keys": [p.jwk() for p in providers]}))
    os.chmod(staged, 0o644)
    staged.replace(path)


class TokenEndpoint:
    """An OAuth client-credentials token endpoint on loopback: every POST gets a fresh token for `subject`."""

    def __init__(self, provider: IdentityProvider, subject: str) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.dumps({"access_token": provider.token(outer.subject), "token_type": "Bearer",
                                   "expires_in": 600}).encode()
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.subject = subject
        self.requests = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the OAUTHBEARER test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT, SASL_SSL_PORT, SSL_PORT):
        assert port_is_free(port), f"port {port} is in use: is a cluster from an earlier run still up?"
    c = ThrowawayCluster("oauth", PG_PORT, KAFKA_PORT)
    try:
        c.certs = Certificates(c.home / "certs", "oauth")
        c.idp = IdentityProvider(c.home / "idp", "key-1")
        c.jwks = c.home / "jwks.json"
        write_jwks(c.jwks, c.idp)
        c.init({
            "ssl": "on",
            "ssl_ca_file": f"'{c.certs.ca}'",
            "kafgres.listeners": f"'SASL_SSL://127.0.0.1:{SASL_SSL_PORT},SSL://127.0.0.1:{SSL_PORT}'",
            "kafgres.ssl_client_auth": "requested",
            "kafgres.ssl_client_name": "'DN'",
            "kafgres.ssl_ident_map": "'kafka_certs'",
            "kafgres.oauthbearer_jwks_file": f"'{c.jwks}'",
            "kafgres.oauthbearer_expected_issuer": f"'{ISSUER}'",
            "kafgres.oauthbearer_ident_map": "'kafka_tokens'",
            "kafgres.authorizer": "acl",
        })
        with open(c.pgdata / "pg_ident.conf", "a") as ident:
            ident.write(IDENT_MAPS)
        crt, key = c.certs.issue("server", server=True)
        for source, target in ((crt, "server.crt"), (key, "server.key")):
            shutil.copyfile(source, c.pgdata / target)
            shutil.chown(c.pgdata / target, "postgres", "postgres")
            os.chmod(c.pgdata / target, 0o600)
        c.start()
        c.sql("create extension kafgres",
              "create role token_writer login", "create role token_reader login", "create role cert_writer login")
        c.wait_until_serving(60)
        yield c
    finally:
        c.destroy()


def grant_write(cluster: ThrowawayCluster, role: str, topic: str) -> None:
    cluster.sql(
        "insert into kafgres.acls (resource_type, pattern_type, resource_name, principal, host, operation, permission) "
        f"values ('TOPIC', 'LITERAL', '{topic}', 'User:{role}', '*', 'ALL', 'ALLOW')",
        "select pg_reload_conf()",
    )


def oauth_config(cluster, token_for, **extra) -> dict:
    """librdkafka over SASL_SSL with OAUTHBEARER; `token_for()` gives each token."""
    return {
        "bootstrap.servers": f"127.0.0.1:{SASL_SSL_PORT}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(cluster.certs.ca),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token_for(), time.time() + 600),
        **extra,
    }


def principals(cluster) -> set[str]:
    return {row[0] for row in cluster.sql("select principal from kafgres.connections where principal is not null")}


def wait_for(predicate, what: str, timeout_s: float = CALL_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def authentication_errors(cluster, token_for) -> list[KafkaError]:
    """What librdkafka reports while it tries to log in with `token_for()`'s tokens."""
    errors: list[KafkaError] = []
    admin = AdminClient(oauth_config(cluster, token_for, error_cb=errors.append))
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        try:
            admin.list_topics(timeout=1)
        except Exception:  # noqa: BLE001 (the refusal is read from error_cb)
            pass
        admin.poll(0.1)
    return errors


def test_librdkafka_logs_in_with_a_token_as_the_role_its_subject_maps_to(cluster):
    topic, other = f"e2e-oauth-{uuid.uuid4().hex[:8]}", f"e2e-oauth-no-{uuid.uuid4().hex[:8]}"
    for t in (topic, other):
        cluster.sql(f"select kafgres.create_topic('{t}', 1)")
    grant_write(cluster, "token_writer", topic)
    config = oauth_config(cluster, lambda: cluster.idp.token("svc-token_writer"))
    assert produce_one(config, topic, b"by token") is None
    err = produce_one(config, other, b"not allowed")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # A client that stays connected shows as the role (oauth_cb is served by poll()).
    producer = Producer(config)
    wait_for(lambda: producer.poll(0.2) is not None and "token_writer" in principals(cluster),
             "token_writer's connection in kafgres.connections")
    producer.flush(1)


def test_expired_foreign_and_unmapped_tokens_are_refused(cluster):
    stranger = IdentityProvider(cluster.home / "stranger", "key-1")
    cases = {
        "expired": lambda: cluster.idp.token("svc-token_writer", ttl_s=-120),
        "signed by another key": lambda: stranger.token("svc-token_writer"),
        "subject outside the map": lambda: cluster.idp.token("token_writer"),
        "subject mapped to no role": lambda: cluster.idp.token("svc-nobody"),
    }
    for what, token_for in cases.items():
        errors = authentication_errors(cluster, token_for)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), f"{what}: {errors}"


def test_a_rotated_key_file_applies_without_a_reload(cluster):
    topic = f"e2e-oauth-rot-{uuid.uuid4().hex[:8]}"
    cluster.sql(f"select kafgres.create_topic('{topic}', 1)")
    grant_write(cluster, "token_writer", topic)
    successor = IdentityProvider(cluster.home / "idp", "key-2")
    old_idp = cluster.idp
    write_jwks(cluster.jwks, successor)
    try:
        config = oauth_config(cluster, lambda: successor.token("svc-token_writer"))
        assert produce_one(config, topic, b"new key") is None
        errors = authentication_errors(cluster, lambda: old_idp.token("svc-token_writer"))
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        write_jwks(cluster.jwks, old_idp)


def test_kafka_python_logs_in_with_a_token_provider(cluster):
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self):
            return cluster.idp.token("svc-token_writer")

    topic = f"e2e-oauth-py-{uuid.uuid4().hex[:8]}"
    cluster.sql(f"select kafgres.create_topic('{topic}', 1)")
    grant_write(cluster, "token_writer", topic)
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{SASL_SSL_PORT}", security_protocol="SASL_SSL",
                             ssl_cafile=str(cluster.certs.ca), sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=Provider(), request_timeout_ms=15000)
    try:
        metadata = producer.send(topic, b"from kafka-python").get(timeout=CALL_TIMEOUT_S)
        assert metadata.offset == 0
    finally:
        producer.close(timeout=5)


def test_the_java_client_gets_its_token_from_an_endpoint(cluster, java_build, tmp_path: Path, monkeypatch):
    from test_java_client import expected_produce_consume, probe

    topic = f"e2e-oauth-java-{uuid.uuid4().hex[:8]}"
    cluster.sql(
        "insert into kafgres.acls (resource_type, pattern_type, resource_name, principal, host, operation, permission) "
        "values ('CLUSTER', 'LITERAL', 'kafka-cluster', 'User:token_writer', '*', 'ALL', 'ALLOW'), "
        f"('TOPIC', 'LITERAL', '{topic}', 'User:token_writer', '*', 'ALL', 'ALLOW'), "
        f"('GROUP', 'PREFIXED', '{topic}', 'User:token_writer', '*', 'ALL', 'ALLOW')",
        "select pg_reload_conf()",
    )
    endpoint = TokenEndpoint(cluster.idp, "svc-token_writer")
    try:
        config = tmp_path / "oauth.properties"
        config.write_text(
            "security.protocol=SASL_SSL\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={cluster.certs.ca}\n"
            "sasl.mechanism=OAUTHBEARER\n"
            "sasl.login.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
            f"sasl.oauthbearer.token.endpoint.url={endpoint.url}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'clientId="java-app" clientSecret="not-checked-here";\n'
        )
        monkeypatch.setenv("KAFGRES_PROBE_CONFIG", str(config))
        monkeypatch.setenv("KAFGRES_JAVA_OPTS", f"-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
                                                f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={endpoint.url}")
        assert probe("produce-consume", f"127.0.0.1:{SASL_SSL_PORT}", topic) == expected_produce_consume(idempotent=True)
        assert endpoint.requests >= 1
    finally:
        endpoint.stop()


def test_a_client_certificate_is_mapped_by_its_distinguished_name(cluster):
    topic = f"e2e-oauth-cert-{uuid.uuid4().hex[:8]}"
    cluster.sql(f"select kafgres.create_topic('{topic}', 1)")
    grant_write(cluster, "cert_writer", topic)
    crt, key = cluster.certs.issue("cert_writer.clients.test")
    config = {"bootstrap.servers": f"127.0.0.1:{SSL_PORT}", "security.protocol": "SSL",
              "ssl.ca.location": str(cluster.certs.ca), "ssl.certificate.location": str(crt),
              "ssl.key.location": str(key)}
    assert produce_one(config, topic, b"by certificate") is None
    # The CN alone (no mapping line matches "CN=cert_writer") is dropped.
    crt, key = cluster.certs.issue("cert_writer", tag="-bare")
    refused = produce_one({**config, "ssl.certificate.location": str(crt), "ssl.key.location": str(key)}, topic,
                          b"unmapped")
    assert refused is not None, "a certificate the map does not cover must not log in"
