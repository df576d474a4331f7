"""The Java client and franz-go over TLS (issue 20; docs/security.md, "Listeners and TLS" and "SASL
mechanisms"), as test_tls.py checks librdkafka, kcat and kafka-python.

A throwaway cluster made as test_tls.py makes its own (`running_cluster`: Postgres with `ssl = on`, the
broker serving PostgreSQL's certificate, `kafgres.ssl_client_auth = 'requested'`, `kafgres.authorizer =
'acl'`), on ports of its own: Postgres 127.0.0.1:5477, PLAINTEXT 9477, SSL 9478, SASL_SSL 9479.

Each client runs once per case, all cases of a test at once: the Java client 4.1.1 as tests/java's
`secure-client` scenario (its settings in a KAFGRES_PROBE_CONFIG properties file: PEM trust store and
key store, SASL's JAAS line) and franz-go as `franz-probe secure` (a tls.Config from the CA, certificate
and key files; kgo.SASL with scram.Auth or plain.Auth). Both connect (Metadata), produce one record to a
topic of their own and read it back, and print what their client reported, so a refusal is the
exception class (Java) or error kind (franz-go) the client itself gives:

- server-only TLS on the SSL listener: the client verifies the server's certificate (and its IP SAN)
  against the CA and, certificate-less, is User:ANONYMOUS, here allowed by ACLs on its topic;
- a client certificate whose CN is a role logs in as that role: CN=tls_app writes and reads where
  the ACLs let User:tls_app, CN=tls_other (a role with LOGIN and no ACL) is refused there with
  TOPIC_AUTHORIZATION_FAILED; with `kafgres.ssl_client_auth = 'required'` a client without a
  certificate is refused at the handshake, one with a certificate is served;
- refused at the handshake: a client certificate of another CA (one named as the cluster's, so that
  the clients present it), an expired one (both while certificates are only requested, and the first
  again while they are required), and a client that trusts another CA refuses the server;
- SASL_SSL with SCRAM-SHA-256 and with PLAIN as a role with its Postgres password, and a wrong
  password refused with either.

Every wait has a deadline; the cluster is stopped and removed at the end.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic, ResourcePatternType, ResourceType

from test_franz_go import franz_build  # noqa: F401 (a fixture)
from test_java_client import JAVA_BIN, PROBE_TIMEOUT_S, java_build  # noqa: F401 (a fixture)
from test_tls import CALL_TIMEOUT_S, Certificates, Cluster, admin_config, running_cluster, set_client_auth

PG_PORT = 5477
KAFKA_PORT = 9477
SSL_PORT = 9478
SASL_SSL_PORT = 9479
SASL_ROLE = "tls_sasl"
SASL_PASSWORD = "sasl-ssl-secret"
CLIENTS = ("java", "franz")
# The Java probe bounds each step by 30 s (PROBE_TIMEOUT_S covers a JVM's start on a loaded machine too),
# franz-probe secure by 20 s.
RUN_TIMEOUT_S = PROBE_TIMEOUT_S
STEP_LINE = re.compile(r"(connect|produce|consume): (.+)")


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(Cluster("tls-clients", PG_PORT, KAFKA_PORT, SSL_PORT, SASL_SSL_PORT)) as c:
        c.sql("create role tls_other login", f"create role {SASL_ROLE} login password '{SASL_PASSWORD}'")
        # A CA the server does not know, for a client that trusts it instead of the server's.
        c.stranger = Certificates(c.home / "certs-stranger", "stranger")
        # Another CA with the very name of the one client certificates must chain to: clients choose the
        # certificate they present by the CA names the server asks for (Java's key manager, Go's
        # crypto/tls, librdkafka), so one of a differently named CA would not even be sent; this one's is,
        # and only its signature tells it from a genuine one.
        c.imposter = Certificates(c.home / "certs-imposter", c.certs.name)
        yield c


@dataclass(frozen=True)
class Settings:
    """One client's security settings: TLS trusting `trust`, a client certificate (crt, key), SASL
    (mechanism, user, password) on the SASL_SSL listener, else the SSL listener."""

    trust: Path
    cert: tuple[Path, Path] | None = None
    sasl: tuple[str, str, str] | None = None


def java_properties(settings: Settings, dir: Path) -> Path:
    """The Java client's settings, as KAFGRES_PROBE_CONFIG reads them (PEM stores, KIP-651)."""
    lines = [f"security.protocol={'SASL_SSL' if settings.sasl else 'SSL'}",
             "ssl.truststore.type=PEM", f"ssl.truststore.location={settings.trust}"]
    if settings.cert:
        crt, key = settings.cert
        store = dir / f"{crt.stem}-{uuid.uuid4().hex[:6]}.pem"  # the chain, then the unencrypted PKCS#8 key
        store.write_text(crt.read_text() + key.read_text())
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={store}"]
    if settings.sasl:
        mechanism, user, password = settings.sasl
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        lines += [f"sasl.mechanism={mechanism}",
                  f'sasl.jaas.config={module} required username="{user}" password="{password}";']
    path = dir / f"java-{uuid.uuid4().hex[:8]}.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def franz_flags(settings: Settings) -> list[str]:
    flags = ["-ca", str(settings.trust)]
    if settings.cert:
        flags += ["-cert", str(settings.cert[0]), "-key", str(settings.cert[1])]
    if settings.sasl:
        mechanism, user, password = settings.sasl
        flags += ["-sasl", mechanism, "-user", user, "-password", password]
    return flags


@dataclass
class Outcome:
    """What one client printed for one case: `connect`, and `produce` and `consume` unless refused."""

    client: str
    topic: str
    lines: dict[str, str]
    stderr: str

    @property
    def served(self) -> dict[str, str]:
        """What a client that may write and read its topic prints."""
        return {"connect": "ok", "produce": "ok", "consume": f"{self.client} {self.topic}"}

    def why(self) -> str:
        return f"{self.client} on {self.topic}: {self.lines}\nstderr (tail):\n{self.stderr[-4000:]}"


def make_topics(cluster: Cluster, cases: dict[str, Settings],
                grant: dict[str, str]) -> dict[tuple[str, str], str]:
    """A new one-partition topic for every case and client, by (case, client); `grant` maps a case to the
    principal given WRITE and READ on its topics (as kafka_admin, over SASL_SSL)."""
    topics = {(case, client): f"{case}-{client}-{uuid.uuid4().hex[:6]}" for case in cases for client in CLIENTS}
    admin = AdminClient(admin_config(cluster))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()],
                                      request_timeout=CALL_TIMEOUT_S).values():
        future.result(CALL_TIMEOUT_S)
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{grant[case]}", "*", op,
                   AclPermissionType.ALLOW)
        for (case, _), topic in topics.items() if case in grant
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    for future in admin.create_acls(bindings, request_timeout=CALL_TIMEOUT_S).values():
        future.result(CALL_TIMEOUT_S)
    return topics


def run_clients(cluster: Cluster, java_build: Path, franz_build: Path, tmp_path: Path, cases: dict[str, Settings],
                topics: dict[tuple[str, str], str]) -> dict[tuple[str, str], Outcome]:
    """Runs every case with both clients at once, each on its topic of `topics`; what they printed by
    (case, client)."""
    procs = {}
    for (case, client), topic in topics.items():
        settings = cases[case]
        port = cluster.sasl_ssl_port if settings.sasl else cluster.ssl_port
        bootstrap = f"127.0.0.1:{port}"
        if client == "java":
            cmd = [str(JAVA_BIN / "kafka-run-class"), "kafgres.probe.KafgresProbe", "secure-client", bootstrap, topic]
            env = {**os.environ, "KAFGRES_JAVA_BUILD": str(java_build),
                   "KAFGRES_PROBE_CONFIG": str(java_properties(settings, tmp_path))}
        else:
            cmd = [str(franz_build), "secure", "-log", os.environ.get("KAFGRES_FRANZ_LOG", "warn"),
                   *franz_flags(settings), bootstrap, topic]
            env = None
        procs[(case, client)] = (cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                       text=True, env=env))
    deadline = time.monotonic() + RUN_TIMEOUT_S
    outcomes = {}
    try:
        for key, (cmd, proc) in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"`{shlex.join(cmd)}` did not finish within {RUN_TIMEOUT_S:.0f}s")
            failed = f"`{shlex.join(cmd)}` exited {proc.returncode}\nstdout:\n{stdout}\nstderr (tail):\n{stderr[-6000:]}"
            assert proc.returncode == 0, failed
            steps = [STEP_LINE.fullmatch(line) for line in stdout.splitlines()]
            assert steps and all(steps), failed
            outcomes[key] = Outcome(key[1], topics[key], {m.group(1): m.group(2) for m in steps}, stderr)
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outcomes


def java_tls_refusal(outcome: Outcome, cause: str) -> None:
    """The Java client reported a failed TLS handshake (SslAuthenticationException) for `cause`."""
    assert outcome.lines.keys() == {"connect"}, outcome.why()
    connect = outcome.lines["connect"]
    assert connect.startswith("SslAuthenticationException (") and cause in connect, outcome.why()


@pytest.fixture(scope="module")
def certificate_cases(cluster) -> dict[str, Settings]:
    certs = cluster.certs
    return {
        "anonymous": Settings(certs.ca),
        "tls-app": Settings(certs.ca, certs.issue("tls_app", tag="-clients")),
        "tls-other": Settings(certs.ca, certs.issue("tls_other")),
        "imposter": Settings(certs.ca, cluster.imposter.issue("tls_app")),
        "expired": Settings(certs.ca, cluster.expired),
        "untrusted": Settings(cluster.stranger.ca),
        "scram": Settings(certs.ca, sasl=("SCRAM-SHA-256", SASL_ROLE, SASL_PASSWORD)),
        "plain": Settings(certs.ca, sasl=("PLAIN", SASL_ROLE, SASL_PASSWORD)),
        "scram-wrong": Settings(certs.ca, sasl=("SCRAM-SHA-256", SASL_ROLE, "not-the-password")),
        "plain-wrong": Settings(certs.ca, sasl=("PLAIN", SASL_ROLE, "not-the-password")),
    }


@pytest.fixture(scope="module")
def requested(cluster, certificate_cases, java_build, franz_build, tmp_path_factory):
    """Every case with certificates requested (the cluster's setting), in one run of all the clients. ACLs:
    User:ANONYMOUS may write and read the anonymous case's topics, User:tls_app those of tls-app and
    tls-other (so CN=tls_other may not), the SASL role those of scram and plain."""
    topics = make_topics(cluster, certificate_cases, grant={
        "anonymous": "ANONYMOUS", "tls-app": "tls_app", "tls-other": "tls_app", "scram": SASL_ROLE, "plain": SASL_ROLE})
    return run_clients(cluster, java_build, franz_build, tmp_path_factory.mktemp("requested"), certificate_cases,
                       topics)


@pytest.mark.parametrize("client", CLIENTS)
def test_server_only_tls_verifies_the_server_and_serves_an_anonymous_client(requested, client):
    """No client certificate: the client verifies the broker's certificate against the CA (and its IP SAN
    127.0.0.1) and is User:ANONYMOUS, which the ACLs on its topic let write and read."""
    outcome = requested["anonymous", client]
    assert outcome.lines == outcome.served, outcome.why()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_certificate_logs_in_as_the_role_its_cn_names(requested, client):
    """CN=tls_app writes and reads where only User:tls_app may; CN=tls_other, a role with LOGIN that no ACL
    names, connects and is refused there, by the ACLs, for both the write and the read."""
    app, other = requested["tls-app", client], requested["tls-other", client]
    assert app.lines == app.served, app.why()
    denied = "TopicAuthorizationException" if client == "java" else "kafka-error TOPIC_AUTHORIZATION_FAILED"
    assert other.lines == {"connect": "ok", "produce": denied, "consume": denied}, other.why()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_certificate_of_another_ca_or_expired_and_an_untrusted_server_are_refused(requested, client):
    """While certificates are only requested: a client certificate signed by another CA (named as the
    server's, so the client does present it) and an expired one end the handshake with the broker's alert;
    a client that trusts another CA refuses the broker's certificate itself."""
    imposter, expired, untrusted = (requested[case, client] for case in ("imposter", "expired", "untrusted"))
    if client == "java":
        java_tls_refusal(imposter, "Received fatal alert: decrypt_error")
        java_tls_refusal(expired, "Received fatal alert: certificate_expired")
        java_tls_refusal(untrusted, "unable to find valid certification path")
    else:
        assert imposter.lines == {"connect": "tls-alert: tls: error decrypting message"}, imposter.why()
        assert expired.lines == {"connect": "tls-alert: tls: expired certificate"}, expired.why()
        assert untrusted.lines == {"connect": "tls-verify: x509: certificate signed by unknown authority"}, untrusted.why()


@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_ssl_logs_in_with_scram_and_plain_and_refuses_a_wrong_password(requested, client):
    """SASL_SSL as a role with its Postgres password, over SCRAM-SHA-256 and PLAIN, writes and reads where
    the ACLs let that role; a wrong password is refused with either mechanism."""
    for case in ("scram", "plain"):
        outcome = requested[case, client]
        assert outcome.lines == outcome.served, outcome.why()
    refused = "SaslAuthenticationException" if client == "java" else "kafka-error SASL_AUTHENTICATION_FAILED"
    for case in ("scram-wrong", "plain-wrong"):
        outcome = requested[case, client]
        assert outcome.lines == {"connect": refused}, outcome.why()


def test_required_client_auth_refuses_a_client_without_a_certificate(cluster, certificate_cases, java_build,
                                                                     franz_build, tmp_path):
    """With `kafgres.ssl_client_auth = 'required'` (set by a reload): on the SSL listener a client without
    a certificate is refused at the handshake (the broker's certificate_required alert), and so is one of
    another CA; CN=tls_app is still served. SASL_SSL clients without a certificate are served with SCRAM and
    PLAIN: the setting is the SSL listeners', as Kafka's broker-wide ssl.client.auth is (KIP-684)."""
    cases = {case: certificate_cases[case] for case in ("anonymous", "tls-app", "imposter", "scram", "plain")}
    topics = make_topics(cluster, cases, grant={"anonymous": "ANONYMOUS", "tls-app": "tls_app",
                                                "scram": SASL_ROLE, "plain": SASL_ROLE})
    set_client_auth(cluster, "required")
    try:
        outcomes = run_clients(cluster, java_build, franz_build, tmp_path, cases, topics)
    finally:
        set_client_auth(cluster, "requested")
    java, franz = ({case: outcomes[case, client] for case in cases} for client in CLIENTS)
    for outcome in (java["tls-app"], franz["tls-app"], java["scram"], franz["scram"], java["plain"], franz["plain"]):
        assert outcome.lines == outcome.served, outcome.why()
    java_tls_refusal(java["anonymous"], "Received fatal alert: certificate_required")
    java_tls_refusal(java["imposter"], "Received fatal alert: decrypt_error")
    assert franz["anonymous"].lines == {"connect": "tls-alert: tls: certificate required"}, franz["anonymous"].why()
    assert franz["imposter"].lines == {"connect": "tls-alert: tls: error decrypting message"}, franz["imposter"].why()
