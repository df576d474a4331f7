"""The Java client 4.1.1 still works: the older generation of the Java client, next to the 4.4.0 that
tests/java builds by default (test_java_client.py and the other Java tests).

tests/java is built a second time at `-Dkafka.version=4.1.1` into .kafgres/java-4.1.1 (a few seconds once
the jars are in ~/.m2), and the KafgresProbe scenarios whose lines do not depend on the client's version
run against the cluster with it: the admin calls, the default (idempotent) producer with a group consumer,
a group that resumes at its commit, every compression codec, and a transaction. The expected lines are
test_java_client.py's and test_transactions.py's, so both generations are held to the same answers.
"""

from __future__ import annotations

import uuid

import pytest

from support import REPO_ROOT, ensure_maven_build
from test_java_client import (
    ADMIN_CREATE_CONFIG_LINE,
    BUILD_TIMEOUT_S,
    JAVA_DIR,
    PROBE_TIMEOUT_S,
    expected_produce_consume,
    ok,
    run_java,
)
from test_transactions import EXACTLY_ONCE_LINES

CLIENT_VERSION = "4.1.1"
BUILD_DIR = REPO_ROOT / ".kafgres" / f"java-{CLIENT_VERSION}"


@pytest.fixture(scope="module")
def java_4_1_build():
    ensure_maven_build(JAVA_DIR, [f"-Dkafka.version={CLIENT_VERSION}", f"-Dkafgres.java.build.dir={BUILD_DIR}"],
                       BUILD_DIR / "build.stamp", [BUILD_DIR / "kafgres-probe.jar"], BUILD_DIR / "classpath.txt",
                       BUILD_TIMEOUT_S)
    # The classpath names the client's jars, so a wrong build cannot pass for this version.
    classpath = (BUILD_DIR / "classpath.txt").read_text()
    assert f"kafka-clients-{CLIENT_VERSION}.jar" in classpath, "the build does not use the 4.1.1 client"
    return BUILD_DIR


def probe_4_1(scenario: str, bootstrap: str, name: str) -> list[str]:
    result = run_java("kafka-run-class", "kafgres.probe.KafgresProbe", scenario, bootstrap, name,
                      timeout_s=PROBE_TIMEOUT_S, build_dir=BUILD_DIR)
    return ok(result).splitlines()


def name(tag: str) -> str:
    return f"e2e-java41-{tag}-{uuid.uuid4().hex[:8]}"


def test_admin_calls(java_4_1_build, bootstrap):
    lines = probe_4_1("admin", bootstrap, name("admin"))
    assert "create-topics: ok partitions=3 replication-factor=1 topic-id-set=true" in lines
    assert "delete-topics again: UnknownTopicOrPartitionException" in lines
    assert [line for line in lines if line.startswith(ADMIN_CREATE_CONFIG_LINE)] == [
        f"{ADMIN_CREATE_CONFIG_LINE} retention.ms=604800000 source=DEFAULT_CONFIG read-only=false sensitive=false"
    ]


def test_default_producer_and_group_consumer(java_4_1_build, bootstrap):
    assert probe_4_1("produce-consume", bootstrap, name("pc")) == expected_produce_consume(idempotent=True)


def test_group_resumes_at_its_commit(java_4_1_build, bootstrap):
    assert probe_4_1("group-resume", bootstrap, name("resume"))[-1] == (
        "second member: read offsets 5..9 values value-5..value-9")


def test_every_compression_codec(java_4_1_build, bootstrap):
    assert probe_4_1("compression", bootstrap, name("codecs")) == [
        f"compression.type={codec}: produced 50, consumed 50, verified"
        for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    ]


def test_exactly_once(java_4_1_build, bootstrap):
    assert probe_4_1("transactions", bootstrap, name("tx")) == EXACTLY_ONCE_LINES
