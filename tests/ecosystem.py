"""docs/ecosystem.md, generated: every client, tool and framework the test suite runs against Kafgres.

Each entry names what it is, where its version is pinned (read from that file, so the page cannot
name a version the tests do not use), what it covers and the tests that run it (they must exist).
tests/e2e/test_ecosystem_doc.py fails when docs/ecosystem.md is not what this prints.

    python3 tests/ecosystem.py > docs/ecosystem.md
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Pin:
    """A version read from a file of the repository: the first group of `pattern`."""

    path: str
    pattern: str

    def version(self) -> str:
        text = (REPO_ROOT / self.path).read_text()
        found = re.search(self.pattern, text, re.MULTILINE)
        if found is None:
            raise ValueError(f"no version matching {self.pattern!r} in {self.path}")
        return found.group(1)


@dataclass(frozen=True)
class Entry:
    name: str
    version: Pin | str
    covers: str
    tests: tuple[str, ...]

    def version_text(self) -> str:
        if isinstance(self.version, Pin):
            return f"{self.version.version()} (`{self.version.path}`)"
        return self.version


KAFKA = Pin("tests/java/pom.xml", r"<kafka\.version>([^<]+)</kafka\.version>")

ENTRIES: tuple[Entry, ...] = (
    Entry(
        "librdkafka, through confluent-kafka (Python)",
        Pin("tests/requirements.txt", r"^confluent-kafka==(\S+)"),
        "produce (acks 0, 1, all; compressed batches in the reference diff), consume, classic and KIP-848 groups, the idempotent producer, "
        "transactions with read_committed, the Admin API, long polls, SASL/SCRAM and TLS, SASL/OAUTHBEARER "
        "(oauth_cb) and certificates mapped through pg_ident.conf, restarts, kill -9 and failover to a standby",
        (
            "tests/e2e/test_roundtrip.py",
            "tests/e2e/test_acks.py",
            "tests/e2e/test_groups.py",
            "tests/e2e/test_consumer_protocol.py",
            "tests/e2e/test_idempotence.py",
            "tests/e2e/test_admin.py",
            "tests/e2e/test_long_poll.py",
            "tests/e2e/test_sasl.py",
            "tests/e2e/test_tls.py",
            "tests/e2e/test_oauthbearer.py",
            "tests/e2e/test_failover.py",
            "tests/conformance",
        ),
    ),
    Entry(
        "kcat",
        "1.7.1 on librdkafka 2.0.2 (Debian 12's package, installed by `./kafgres start`)",
        "metadata as JSON, keyed produce with headers, consume by offset, auto-created topics, SASL/SCRAM; an old "
        "librdkafka's reading of ApiVersions",
        ("tests/e2e/test_kcat.py", "tests/e2e/test_sasl.py"),
    ),
    Entry(
        "kafka-python",
        Pin("tests/requirements.txt", r"^kafka-python==(\S+)"),
        "produce, consume, SASL/SCRAM, TLS with client certificates and SASL_SSL with SCRAM and PLAIN, "
        "SASL/OAUTHBEARER (a token provider), the admin APIs the reference diff compares (transactions, replica "
        "placement, SCRAM credentials, features, config resources, client quotas)",
        (
            "tests/e2e/test_kafka_python.py",
            "tests/e2e/test_sasl.py",
            "tests/e2e/test_tls.py",
            "tests/e2e/test_oauthbearer.py",
            "tests/conformance/scenarios_admin_tools.py",
        ),
    ),
    Entry(
        "the Java client",
        KAFKA,
        "the default producer and consumer, compression, cooperative and KIP-848 groups, share groups "
        "(KafkaShareConsumer, KIP-932), transactions, quotas, "
        "SCRAM credentials with the Admin client, TLS (PEM stores; client certificates as roles, refusals) and "
        "SASL_SSL with SCRAM and PLAIN, SASL/OAUTHBEARER with a token endpoint (OAuthBearerLoginCallbackHandler), "
        "failover",
        (
            "tests/e2e/test_java_client.py",
            "tests/e2e/test_share_groups.py",
            "tests/e2e/test_oauthbearer.py",
            "tests/e2e/test_quotas.py",
            "tests/e2e/test_sasl.py",
            "tests/e2e/test_tls_clients.py",
            "tests/e2e/test_failover_clients.py",
        ),
    ),
    Entry(
        "the Java client, the generation before",
        Pin("tests/e2e/test_java_client_4_1.py", r'^CLIENT_VERSION = "([^"]+)"'),
        "the Admin calls, the default (idempotent) producer with a group consumer, a group resuming at its "
        "commit, every compression codec, exactly-once transactions",
        ("tests/e2e/test_java_client_4_1.py",),
    ),
    Entry(
        "Kafka's command-line tools",
        KAFKA,
        "kafka-topics, kafka-consumer-groups, kafka-console-producer/-consumer, kafka-configs, kafka-acls, "
        "kafka-transactions, kafka-leader-election, kafka-reassign-partitions, kafka-features, kafka-get-offsets",
        ("tests/e2e/test_java_client.py", "tests/e2e/test_acls.py", "tests/conformance"),
    ),
    Entry(
        "franz-go (kgo, kadm)",
        Pin("tests/franz/go.mod", r"github\.com/twmb/franz-go v(\S+)"),
        "the idempotent producer with lz4 and zstd, ListOffsets, group consume and commits, group admin, "
        "TLS (client certificates as roles, refusals) and SASL_SSL with SCRAM and PLAIN (pkg/sasl), failover",
        ("tests/e2e/test_franz_go.py", "tests/e2e/test_tls_clients.py", "tests/e2e/test_failover_clients.py"),
    ),
    Entry(
        "Sarama",
        Pin("tests/sarama/go.mod", r"github\.com/IBM/sarama v(\S+)"),
        "at its newest protocol and again as a Kafka 2.1 client: produce, group consume and commits, group "
        "admin, transactions with read_committed, topic admin",
        ("tests/e2e/test_sarama.py",),
    ),
    Entry(
        "kafkajs",
        Pin("tests/kafkajs/package.json", r'"kafkajs":\s*"([^"]+)"'),
        "non-flexible versions only: produce with gzip, group consume and commits, group admin, transactions, "
        "topic admin",
        ("tests/e2e/test_kafkajs.py",),
    ),
    Entry(
        "MirrorMaker 2 (connect-mirror)",
        Pin("tests/mirrormaker/pom.xml", r"<kafka\.version>([^<]+)</kafka\.version>"),
        "Kafgres to Apache Kafka and back: records, headers, offsets and timestamps, group offsets translated "
        "and resumed on Kafka (docs/outgrowing.md)",
        ("tests/e2e/test_mirrormaker.py",),
    ),
    Entry(
        "Kafka Streams",
        Pin("tests/streams/pom.xml", r"<kafka\.version>([^<]+)</kafka\.version>"),
        "a word count with exactly_once_v2 (transaction version 2): a repartition topic, a persistent store "
        "with its changelog, killed with kill -9 mid-transaction and restarted with its state directory kept "
        "and wiped; every committed count exact, aborted updates never visible",
        ("tests/e2e/test_streams.py",),
    ),
    Entry(
        "Kafka Connect, a distributed worker (connect-runtime, connect-file)",
        Pin("tests/connect/pom.xml", r"<kafka\.version>([^<]+)</kafka\.version>"),
        "config, offset and status topics in Kafgres; FileStream source and sink, a restart without duplicates, "
        "exactly-once source support (transactional config writes, records and offsets in one transaction, zombie "
        "fencing) across a kill -9, read back read_committed; the offsets REST API (read and altered)",
        ("tests/e2e/test_connect.py",),
    ),
    Entry(
        "Apache Kafka, the reference broker",
        Pin("scripts/bench/pom.xml", r"<kafka\.version>([^<]+)</kafka\.version>"),
        "every scenario of the reference diff, run against it and Kafgres and compared",
        ("tests/conformance",),
    ),
    Entry(
        "Debezium's PostgreSQL connector, in a Kafka Connect standalone worker",
        Pin("scripts/bench/debezium-pom.xml", r"<debezium\.version>([^<]+)</debezium\.version>"),
        "the reference for change data capture: the same changes to a table of every mapped column type must "
        "give records equal to Debezium's, column by column (docs/cdc.md); also the other side of "
        "scripts/bench/cdc_bench.py",
        ("tests/e2e/test_cdc_debezium.py",),
    ),
    Entry(
        "prometheus-client's text-format parser",
        Pin("tests/requirements.txt", r"^prometheus-client==(\S+)"),
        "the /metrics endpoint, parsed and checked against what was produced",
        ("tests/e2e/test_prometheus.py",),
    ),
)


def render() -> str:
    lines = [
        "# Clients, tools and frameworks tested",
        "",
        "Generated by `python3 tests/ecosystem.py > docs/ecosystem.md` from the versions pinned in the",
        "repository; `tests/e2e/test_ecosystem_doc.py` fails when this page is out of date. What each test",
        "checks is in its module's docstring; docs/conformance.md says where Kafgres differs from Kafka.",
        "",
        "| client or tool | version | covered | tests |",
        "|---|---|---|---|",
    ]
    for e in ENTRIES:
        missing = [t for t in e.tests if not (REPO_ROOT / t).exists()]
        if missing:
            raise ValueError(f"{e.name}: no such test {missing}")
        tests = ", ".join(f"`{t}`" for t in e.tests)
        lines.append(f"| {e.name} | {e.version_text()} | {e.covers} | {tests} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
