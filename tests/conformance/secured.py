"""The secured pair: both brokers with SASL/SCRAM-SHA-256 and an ACL authorizer, for the ACL scenarios.

Scenarios registered with `@scenario(secured=True)` (scenarios_acls.py) run
against these two instead of the plain reference Kafka and the dev cluster:

- `SecuredKafka`: Apache Kafka 4.4.0 (reference.py's broker and classpath) on
  127.0.0.1:19475 (controller 19476) with one SASL_PLAINTEXT listener
  (SCRAM-SHA-256, also the inter-broker listener, as `acl_admin`),
  `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
  `allow.everyone.if.no.acl.found=false` and `super.users=User:acl_admin`
  (and User:ANONYMOUS, the principal of the PLAINTEXT controller listener,
  which no client reaches), and `delegation.token.secret.key` (TOKEN_SECRET). The users' SCRAM credentials are written at
  format time (`kafka-storage format --add-scram`).
- `SecuredKafgres`: a throwaway cluster of its own (tests/e2e/support.py,
  Postgres on 127.0.0.1:5475, Kafka on 9475) with
  `kafgres.authentication = 'scram-sha-256'`, `kafgres.authorizer = 'acl'` and
  `kafgres.delegation_token_secret_key` (TOKEN_SECRET);
  the users are roles with LOGIN and the same passwords, `acl_admin` a
  Postgres SUPERUSER (Kafgres's super users).

Every user of USERS exists on both with the same password; no ACL exists at
start. Both are context managers that stop and remove what they started
whatever happens (the JVM also dies with the Python process that started it).
KAFGRES_SECURED_PORTS moves both (Kafka on N, N+1; Kafgres's Postgres on N+2,
its broker on N+3).
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reference import REPO_ROOT, STATE_DIR, ConformanceKafkaBroker, ReferenceKafka

sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))
from support import ThrowawayCluster, port_is_free  # noqa: E402

_BASE = os.environ.get("KAFGRES_SECURED_PORTS")
KAFKA_PORT = int(_BASE) if _BASE else 19475
KAFKA_CONTROLLER_PORT = KAFKA_PORT + 1
KAFGRES_PG_PORT = int(_BASE) + 2 if _BASE else 5475
KAFGRES_PORT = int(_BASE) + 3 if _BASE else 9475
READY_TIMEOUT_S = 60.0

SUPERUSER = "acl_admin"
# Delegation tokens are served with a secret key (Kafka's delegation.token.secret.key), the same on both.
TOKEN_SECRET = "conformance-delegation-token-secret"
# The principals of the ACL matrix (scenarios_acls.py says what each is granted).
USERS = (SUPERUSER, "acl_nobody", "acl_describe", "acl_read", "acl_write", "acl_create", "acl_create_cluster",
         "acl_delete", "acl_alter", "acl_describe_configs", "acl_alter_configs", "acl_all", "acl_cluster", "acl_prefixed",
         "acl_denied", "acl_other_host", "acl_wildcard")


def password(user: str) -> str:
    return f"{user}-secret"


def librdkafka_config(user: str = SUPERUSER) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password(user)}


def kafka_python_config(user: str = SUPERUSER) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user, "sasl_plain_password": password(user)}


class SecuredKafkaBroker(ConformanceKafkaBroker):
    def server_properties(self, data_dir: Path) -> str:
        listener = f"SASL_PLAINTEXT://127.0.0.1:{self.port}"
        replaced = {
            "listeners": f"{listener},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": listener,
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
        lines = []
        for line in super().server_properties(data_dir).splitlines():
            key = line.split("=", 1)[0]
            lines.append(f"{key}={replaced[key]}" if key in replaced else line)
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{SUPERUSER}" '
                f'password="{password(SUPERUSER)}";')
        lines += [
            "inter.broker.listener.name=SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
            f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={jaas}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            f"super.users=User:{SUPERUSER};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found=false",
            f"delegation.token.secret.key={TOKEN_SECRET}",
        ]
        return "\n".join(lines) + "\n"

    def java(self, classpath: str, *args: str, heap: bool = False) -> list[str]:
        if args and args[0] == "kafka.tools.StorageTool":
            scram = [a for user in USERS
                     for a in ("--add-scram", f"SCRAM-SHA-256=[name={user},password={password(user)}]")]
            args = (*args, *scram)
        return super().java(classpath, *args, heap=heap)


class SecuredKafka(ReferenceKafka):
    """`with SecuredKafka() as bootstrap:` Apache Kafka with SCRAM and StandardAuthorizer."""

    broker_class = SecuredKafkaBroker
    log_name = "kafka-secured-server.log"
    external_env = None

    def __init__(self) -> None:
        super().__init__(port=KAFKA_PORT)


class SecuredKafgres:
    """`with SecuredKafgres() as bootstrap:` a throwaway Kafgres cluster with SCRAM and the ACL authorizer."""

    def __init__(self) -> None:
        self.cluster: ThrowawayCluster | None = None

    def __enter__(self) -> str:
        if os.geteuid() != 0:
            raise RuntimeError("the secured Kafgres cluster needs root (initdb and pg_ctl run as postgres)")
        for port in (KAFGRES_PG_PORT, KAFGRES_PORT):
            if not port_is_free(port):
                raise RuntimeError(f"port {port} is in use: is a secured cluster of an earlier run still up?")
        self.cluster = ThrowawayCluster("conformance-acls", KAFGRES_PG_PORT, KAFGRES_PORT)
        try:
            self.cluster.init({"kafgres.authentication": "'scram-sha-256'", "kafgres.authorizer": "'acl'",
                               "kafgres.delegation_token_secret_key": f"'{TOKEN_SECRET}'"})
            self.cluster.start()
            statements = ["create extension kafgres", "set password_encryption = 'scram-sha-256'"]
            for user in USERS:
                superuser = "superuser " if user == SUPERUSER else ""
                statements.append(f"create role {user} {superuser}login password '{password(user)}'")
            self.cluster.sql(*statements)
            self.cluster.wait_until_serving(READY_TIMEOUT_S)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.cluster.bootstrap

    def __exit__(self, *exc) -> None:
        if self.cluster is not None:
            try:
                STATE_DIR.mkdir(parents=True, exist_ok=True)
                (STATE_DIR / "kafgres-secured-postgres.log").write_text(self.cluster.log_text())
            finally:
                self.cluster.destroy()
                self.cluster = None


class SecuredPair:
    """`with SecuredPair() as (kafka, kafgres):` both secured brokers, started at once."""

    def __init__(self) -> None:
        self.kafka = SecuredKafka()
        self.kafgres = SecuredKafgres()
        self.started_s = 0.0

    def __enter__(self) -> tuple[str, str]:
        started = time.monotonic()
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            # Kafka in this thread: its JVM gets SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG).
            on_kafgres = pool.submit(self.kafgres.__enter__)
            try:
                kafka = self.kafka.__enter__()
            except BaseException as e:  # noqa: BLE001  (stop the other, then raise)
                errors.append(e)
            try:
                kafgres = on_kafgres.result(timeout=READY_TIMEOUT_S * 3)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
        if errors:
            self.__exit__(None, None, None)
            raise errors[0]
        self.started_s = time.monotonic() - started
        return kafka, kafgres

    def __exit__(self, *exc) -> None:
        try:
            self.kafka.__exit__(*exc)
        finally:
            self.kafgres.__exit__(*exc)
