"""The Java client (kafka-clients 4.4) and Kafka's command-line tools against Kafgres.

tests/java is a Maven project that builds kafgres-probe.jar and the runtime
classpath of kafka-clients and kafka-tools 4.4.0 (from Maven Central), under
.kafgres/java (test_java_client_4_1.py builds it again with the 4.1.1 client). The session builds it once, and not at all when the build is
newer than pom.xml and src/ (offline when ~/.m2 has everything). Java 17+ and
Maven must be installed: without them every test here fails and says so.

- KafgresProbe scenarios print exact lines, compared whole: `admin`
  (CreateTopics, Metadata, DescribeCluster, DescribeConfigs, CreatePartitions,
  DeleteTopics and their expected errors), `produce-consume` (the default
  producer: acks=all and idempotence, so InitProducerId), `produce-consume-plain`
  (the same with enable.idempotence=false), `group-resume` (a classic group
  resumes at its commit) and `compression` (none, gzip, snappy, lz4, zstd).
- tests/java/bin/kafka-consumer-groups, kafka-topics and kafka-get-offsets run
  the tools' main classes; their output is parsed and its important fields
  checked (lag, state, members, partitions, offsets).

A difference from Apache Kafka found here is a strict xfail whose reason names
the request and what Kafka answers, so the test turns into a failure (and gets
noticed) the day the broker is fixed.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, TopicPartition

import kafka_wire
from support import REPO_ROOT, ensure_maven_build, need_tool, produce_all

JAVA_DIR = REPO_ROOT / "tests" / "java"
JAVA_BIN = JAVA_DIR / "bin"
BUILD_DIR = Path(os.environ.get("KAFGRES_JAVA_BUILD", REPO_ROOT / ".kafgres" / "java"))
PROBE_JAR = BUILD_DIR / "kafgres-probe.jar"
CLASSPATH_FILE = BUILD_DIR / "classpath.txt"
# Written after a successful build; the build is reused while it is newer than every source.
BUILD_STAMP = BUILD_DIR / "build.stamp"
JAVA_MAJOR_MIN = 17

# A first build downloads kafka-clients, kafka-tools and Maven's plugins.
BUILD_TIMEOUT_S = 900.0
# A probe scenario bounds each of its own waits (30 s per call, 60 s to consume).
PROBE_TIMEOUT_S = 150.0
TOOL_TIMEOUT_S = 60.0

# What `mvn -o` says when ~/.m2 lacks an artifact or plugin (then the build goes online).

API_KEY_INIT_PRODUCER_ID = 22
NODE_ID = 1


# --------------------------------------------------------------------------
# Building and running


def _java_major(java: str) -> int:
    result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    if result.returncode != 0 or match is None:
        pytest.fail(f"`java -version` failed or was not understood:\n{result.stderr}", pytrace=False)
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major  # "1.8.0" is Java 8


@pytest.fixture(scope="session")
def java_build() -> Path:
    """Builds tests/java unless the build is current; fails every test here if it cannot."""
    java = need_tool("java", f"the Java e2e tests need a JDK {JAVA_MAJOR_MIN} or newer")
    major = _java_major(java)
    if major < JAVA_MAJOR_MIN:
        pytest.fail(f"{java} is Java {major}; the Java e2e tests need Java {JAVA_MAJOR_MIN} or newer", pytrace=False)
    ensure_maven_build(JAVA_DIR, [f"-Dkafgres.java.build.dir={BUILD_DIR}"], BUILD_STAMP, [PROBE_JAR], CLASSPATH_FILE,
                       BUILD_TIMEOUT_S)
    return BUILD_DIR


def _tool_env(build_dir: Path = BUILD_DIR) -> dict[str, str]:
    return {**os.environ, "KAFGRES_JAVA_BUILD": str(build_dir)}


def run_java(script: str, *args: str, timeout_s: float = TOOL_TIMEOUT_S,
             build_dir: Path = BUILD_DIR) -> subprocess.CompletedProcess:
    """Runs tests/java/bin/SCRIPT ARGS (from the build in `build_dir`); fails the test on a timeout (never on
    the exit status)."""
    cmd = [str(JAVA_BIN / script), *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_tool_env(build_dir))
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}"
        )


def run_java_concurrently(
    *commands: tuple[str, ...], timeout_s: float = TOOL_TIMEOUT_S
) -> list[subprocess.CompletedProcess]:
    """Runs several read-only tool commands at once (JVM start-up dominates); results in order."""
    procs = []
    for script, *args in commands:
        cmd = [str(JAVA_BIN / script), *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_tool_env())
        procs.append((cmd, proc))
    deadline = time.monotonic() + timeout_s
    results = []
    try:
        for cmd, proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s")
            results.append(subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr))
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def ok(result: subprocess.CompletedProcess) -> str:
    """The stdout of a command that must have exited 0."""
    assert result.returncode == 0, (
        f"`{shlex.join(result.args)}` exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


def probe(scenario: str, bootstrap: str, name: str) -> list[str]:
    """Runs one KafgresProbe scenario; returns its stdout lines (it must exit 0)."""
    result = run_java(
        "kafka-run-class", "kafgres.probe.KafgresProbe", scenario, bootstrap, name, timeout_s=PROBE_TIMEOUT_S
    )
    return ok(result).splitlines()


@pytest.fixture
def unique_name(request):
    """unique_name(tag) -> 'e2e-java-<test>-<tag>-<random>' (topics, and groups as NAME-group)."""
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_")).strip("-")[:40]
    return lambda tag="t": f"e2e-java-{test}-{tag}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------
# Output parsers


def table(stdout: str) -> list[dict[str, str]]:
    """The rows of a kafka-consumer-groups table (the one whose header starts with GROUP).

    The coordinator cell, `host:port  (id)`, is read as one cell `host:port(id)`.
    """
    lines = [line for line in stdout.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.split()[0] == "GROUP"]
    assert len(starts) == 1, f"expected one table with a GROUP header in:\n{stdout}"
    header = lines[starts[0]].replace("COORDINATOR (ID)", "COORDINATOR").split()
    rows = []
    for line in lines[starts[0] + 1:]:
        cells = re.sub(r"\s+\((\d+)\)", r"(\1)", line).split()
        assert len(cells) == len(header), f"row {line!r} does not match header {header}"
        rows.append(dict(zip(header, cells)))
    return rows


def offsets_by_partition(stdout: str, group: str, topic: str) -> dict[int, tuple[str, str, str]]:
    """--describe's offsets table: partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG)."""
    rows = table(stdout)
    assert {(r["GROUP"], r["TOPIC"]) for r in rows} == {(group, topic)}, stdout
    return {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows}


def topic_description(stdout: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe of one topic: (the topic line's fields, one dict per partition line).

    Lines are tab-separated `Key: value` fields; the topic line is the one that is not indented.
    """
    topic, partitions = None, []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        fields = dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip().split("\t"))
        if line.startswith("\t"):
            partitions.append(fields)
        else:
            assert topic is None, f"more than one topic in:\n{stdout}"
            topic = fields
    assert topic is not None, f"no topic line in:\n{stdout}"
    return topic, partitions


def kafka_uuid_text(u: uuid.UUID) -> str:
    """How Kafka's Uuid.toString() prints a topic id: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), as an unsigned 32-bit value."""
    m, seed, mask = 0x5BD1E995, 0x9747B28C, 0xFFFFFFFF
    h = (seed ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def key_partition(key: str, partitions: int) -> int:
    """The Java producer's partition for a keyed record: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


# --------------------------------------------------------------------------
# KafgresProbe scenarios


ADMIN_CREATE_CONFIG_LINE = "create-topics: returned config"


@pytest.fixture(scope="module")
def admin_run(java_build, bootstrap) -> list[str]:
    """One run of the `admin` scenario, shared by the tests that check its lines."""
    return probe("admin", bootstrap, f"e2e-java-admin-{uuid.uuid4().hex[:8]}")


def test_admin_scenario(admin_run, bootstrap):
    host, port = kafka_wire.parse_address(bootstrap)
    lines = [line for line in admin_run if not line.startswith(ADMIN_CREATE_CONFIG_LINE)]
    assert lines == [
        "create-topics: ok partitions=3 replication-factor=1 topic-id-set=true",
        "list-topics: includes topic=true",
        "create-topics again: TopicExistsException",
        "describe-topics: partitions=3 internal=false topic-id-set=true topic-id-as-created=true",
        f"describe-topics: partition=0 leader={NODE_ID} replicas={NODE_ID} isr={NODE_ID}",
        f"describe-topics: partition=1 leader={NODE_ID} replicas={NODE_ID} isr={NODE_ID}",
        f"describe-topics: partition=2 leader={NODE_ID} replicas={NODE_ID} isr={NODE_ID}",
        f"describe-cluster: nodes=1 node={NODE_ID} endpoint={host}:{port} cluster-id-set=true controller={NODE_ID}",
        "describe-configs: retention.ms=604800000 source=DEFAULT_CONFIG read-only=false sensitive=false",
        "describe-configs: cleanup.policy=delete source=DEFAULT_CONFIG read-only=false sensitive=false",
        "create-partitions: increase to 4: ok",
        "describe-topics: partitions=4 leaders=1,1,1,1",
        "create-partitions: increase to 4 again: InvalidPartitionsException",
        "delete-topics: ok",
        "list-topics: includes topic=false",
        "delete-topics again: UnknownTopicOrPartitionException",
    ]


def test_create_topics_returns_the_topic_configs(admin_run):
    assert [line for line in admin_run if line.startswith(ADMIN_CREATE_CONFIG_LINE)] == [
        f"{ADMIN_CREATE_CONFIG_LINE} retention.ms=604800000 source=DEFAULT_CONFIG read-only=false sensitive=false"
    ]


def expected_produce_consume(idempotent: bool) -> list[str]:
    records, partitions = 100, 3
    counts = Counter(key_partition(f"key-{i:03d}", partitions) for i in range(records))
    lines = [f"producer: acks=-1 enable.idempotence={'true' if idempotent else 'false'}",  # -1 is acks=all
             f"produced: {records} records acknowledged"]
    lines += [f"produced: partition={p} records={counts[p]} offsets=0..{counts[p] - 1}" for p in range(partitions)]
    lines += [f"consumed: {records} records, 0 duplicates"]
    lines += [f"consumed: partition={p} records={counts[p]} offsets=0..{counts[p] - 1}" for p in range(partitions)]
    lines += [f"verified: keys, values, headers, timestamps, partitions and offsets of {records} records"]
    lines += [f"committed: partition={p} offset={counts[p]}" for p in range(partitions)]
    return lines


def test_default_producer_needs_init_producer_id(java_build, bootstrap, unique_name):
    """The Java client's default producer: acks=all and enable.idempotence=true.

    This is the test that waited for InitProducerId: the idempotent producer asks
    for a producer id before its first batch, and a broker that does not serve
    InitProducerId leaves the default Java producer unable to send anything.
    """
    served = kafka_wire.api_versions(bootstrap).apis
    assert API_KEY_INIT_PRODUCER_ID in served, (
        f"the broker does not advertise InitProducerId (API key {API_KEY_INIT_PRODUCER_ID}) in ApiVersions, "
        f"so the Java client's default (idempotent) producer cannot send; advertised: {sorted(served)}"
    )
    assert probe("produce-consume", bootstrap, unique_name()) == expected_produce_consume(idempotent=True)


def test_plain_producer_and_group_consumer(java_build, bootstrap, unique_name):
    assert probe("produce-consume-plain", bootstrap, unique_name()) == expected_produce_consume(idempotent=False)


def test_group_resumes_at_its_commit(java_build, bootstrap, unique_name):
    assert probe("group-resume", bootstrap, unique_name()) == [
        "produced: 10 records",
        "first member: read offsets 0..4",
        "first member: committed offset=5 metadata=resume-here",
        "first member: closed",
        "second member: sees committed offset=5 metadata=resume-here",
        "second member: read offsets 5..9 values value-5..value-9",
    ]


def test_every_compression_codec(java_build, bootstrap, unique_name):
    assert probe("compression", bootstrap, unique_name()) == [
        f"compression.type={codec}: produced 50, consumed 50, verified"
        for codec in ("none", "gzip", "snappy", "lz4", "zstd")
    ]


# --------------------------------------------------------------------------
# Command-line tools


def produce_per_partition(make_producer, topic: str, counts: dict[int, int], timestamp_base_ms: int) -> None:
    """counts[p] records to partition p, the i-th with timestamp base + i seconds."""
    produce_all(
        make_producer(),
        [
            dict(topic=topic, partition=p, value=b"v%d" % i, timestamp=timestamp_base_ms + i * 1000)
            for p, n in counts.items()
            for i in range(n)
        ],
    )


def wait_for_group_state(admin, group: str, state: ConsumerGroupState, timeout_s: float = 15.0) -> None:
    """Waits until DescribeGroups (through librdkafka) shows the group in `state`."""
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        seen = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10).state
        if seen == state:
            return
        time.sleep(0.1)
    pytest.fail(f"group {group} is {seen}, not {state}, after {timeout_s:.0f}s")


def test_consumer_groups_cli(java_build, bootstrap, admin, create_topic, make_producer, make_consumer, unique_name):
    """kafka-consumer-groups: --list, --describe (offsets, --members, --state) of an active group,
    --delete and --reset-offsets refused while it is active; once it is empty: lag, a dry-run
    reset, an executed reset to the earliest offsets, --delete."""
    topic = create_topic(unique_name(), partitions=3)
    group = f"{topic}-group"
    produce_per_partition(make_producer, topic, {0: 5, 1: 3}, int(time.time() * 1000) - 600_000)

    consumer = make_consumer({
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
    })
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert len(consumer.assignment()) == 3, f"assignment after 30 s: {consumer.assignment()}"
    consumer.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 1), TopicPartition(topic, 2, 0)],
                    asynchronous=False)

    groups = ("kafka-consumer-groups", "--bootstrap-server", bootstrap)
    listed, described, members, state = run_java_concurrently(
        (*groups, "--list"),
        (*groups, "--describe", "--group", group),
        (*groups, "--describe", "--group", group, "--members"),
        (*groups, "--describe", "--group", group, "--state"),
    )
    assert group in ok(listed).split()
    rows = table(ok(described))
    assert {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows} == {
        0: ("5", "5", "0"), 1: ("1", "3", "2"), 2: ("0", "0", "0")}
    assert {(r["GROUP"], r["TOPIC"], r["HOST"], r["CLIENT-ID"]) for r in rows} == {
        (group, topic, "/127.0.0.1", "rdkafka")}
    [member_id] = {r["CONSUMER-ID"] for r in rows}
    assert member_id.startswith("rdkafka-")
    assert table(ok(members)) == [
        {"GROUP": group, "CONSUMER-ID": member_id, "HOST": "/127.0.0.1", "CLIENT-ID": "rdkafka", "#PARTITIONS": "3"}]
    host, port = kafka_wire.parse_address(bootstrap)
    assert table(ok(state)) == [{"GROUP": group, "COORDINATOR": f"{host}:{port}({NODE_ID})",
                                 "ASSIGNMENT-STRATEGY": "range", "STATE": "Stable", "#MEMBERS": "1"}]

    # The tool checks the group itself (GroupNotEmptyException from DeleteGroups; the state from DescribeGroups).
    assert "GroupNotEmptyException" in ok(run_java(*groups, "--delete", "--group", group))
    refused = ok(run_java(*groups, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"))
    assert (f"Assignments can only be reset if the group '{group}' is inactive, "
            "but the current state is Stable.") in refused

    consumer.close()
    wait_for_group_state(admin, group, ConsumerGroupState.EMPTY)
    described, state, dry_run = run_java_concurrently(
        (*groups, "--describe", "--group", group),
        (*groups, "--describe", "--group", group, "--state"),
        (*groups, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"),
    )
    assert offsets_by_partition(ok(described), group, topic) == {
        0: ("5", "5", "0"), 1: ("1", "3", "2"), 2: ("0", "0", "0")}
    assert {r["CONSUMER-ID"] for r in table(described.stdout)} == {"-"}
    assert f"Consumer group '{group}' has no active members." in described.stderr
    assert [(r["STATE"], r["#MEMBERS"]) for r in table(ok(state))] == [("Empty", "0")]
    assert {int(r["PARTITION"]): r["NEW-OFFSET"] for r in table(ok(dry_run))} == {0: "0", 1: "0", 2: "0"}
    # The dry run wrote nothing.
    committed = make_consumer({"group.id": group}).committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 5), (1, 1), (2, 0)]

    executed = run_java(*groups, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert {int(r["PARTITION"]): r["NEW-OFFSET"] for r in table(ok(executed))} == {0: "0", 1: "0", 2: "0"}
    assert offsets_by_partition(ok(run_java(*groups, "--describe", "--group", group)), group, topic) == {
        0: ("0", "5", "5"), 1: ("0", "3", "3"), 2: ("0", "0", "0")}

    deleted = ok(run_java(*groups, "--delete", "--group", group))
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    listed, described = run_java_concurrently((*groups, "--list"), (*groups, "--describe", "--group", group))
    assert group not in ok(listed).split()
    # DescribeGroups v5 answers state Dead (the tool: "does not exist"); v6+ GROUP_ID_NOT_FOUND.
    assert re.search(f"Consumer group '{re.escape(group)}' does not exist|GroupIdNotFoundException",
                     described.stdout + described.stderr), described


def test_topics_cli(java_build, bootstrap, unique_name):
    """kafka-topics: --create with a config, --create again, --list, --describe, --alter --partitions, --delete."""
    topic = unique_name()
    topics = ("kafka-topics", "--bootstrap-server", bootstrap)
    created = run_java(*topics, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
                       "--config", "retention.ms=3600000")
    assert ok(created).strip() == f"Created topic {topic}."
    again = run_java(*topics, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    assert again.returncode == 1 and f"Topic '{topic}' already exists." in again.stdout + again.stderr, again

    listed, described = run_java_concurrently((*topics, "--list"), (*topics, "--describe", "--topic", topic))
    assert topic in ok(listed).splitlines()
    header, partitions = topic_description(ok(described))
    metadata = kafka_wire.metadata_v12(bootstrap, [topic])
    assert header == {"Topic": topic, "TopicId": kafka_uuid_text(metadata.topics[topic].topic_id),
                      "PartitionCount": "2", "ReplicationFactor": "1", "Configs": "retention.ms=3600000"}
    assert [(p["Topic"], p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in partitions] == [
        (topic, str(i), str(NODE_ID), str(NODE_ID), str(NODE_ID)) for i in range(2)]

    ok(run_java(*topics, "--alter", "--topic", topic, "--partitions", "3"))
    header, partitions = topic_description(ok(run_java(*topics, "--describe", "--topic", topic)))
    assert header["PartitionCount"] == "3"
    assert [(p["Partition"], p["Leader"]) for p in partitions] == [(str(i), str(NODE_ID)) for i in range(3)]

    ok(run_java(*topics, "--delete", "--topic", topic))
    assert topic not in ok(run_java(*topics, "--list")).splitlines()


@pytest.fixture
def offsets_topic(bootstrap, create_topic, make_producer, unique_name):
    """A 3-partition topic: 5 records in partition 0 and 3 in partition 1, timestamps base + i s; 2 empty.

    Returns (topic, base timestamp in ms).
    """
    topic = create_topic(unique_name(), partitions=3)
    base = (int(time.time()) - 600) * 1000
    produce_per_partition(make_producer, topic, {0: 5, 1: 3}, base)
    return topic, base


def test_get_offsets_cli(java_build, bootstrap, offsets_topic):
    """kafka-get-offsets: latest (default), earliest (-2), max-timestamp (-3), by timestamp; a partition
    without an answer (offset -1) is left out, as the tool does."""
    topic, base = offsets_topic
    get = ("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic)
    latest, earliest, max_timestamp, at_2s, at_2500ms = run_java_concurrently(
        get,
        (*get, "--time", "-2"),
        (*get, "--time", "-3", "--partitions", "0,1"),
        (*get, "--time", str(base + 2000)),
        (*get, "--time", str(base + 2500)),
    )
    assert ok(latest).splitlines() == [f"{topic}:0:5", f"{topic}:1:3", f"{topic}:2:0"]
    assert ok(earliest).splitlines() == [f"{topic}:0:0", f"{topic}:1:0", f"{topic}:2:0"]
    assert ok(max_timestamp).splitlines() == [f"{topic}:0:4", f"{topic}:1:2"]
    assert ok(at_2s).splitlines() == [f"{topic}:0:2", f"{topic}:1:2"]
    assert ok(at_2500ms).splitlines() == [f"{topic}:0:3"]
    for result in (latest, earliest, max_timestamp, at_2s, at_2500ms):
        assert "Skip getting offsets" not in result.stderr, result.stderr


def test_get_offsets_earliest_local_and_latest_tiered(java_build, bootstrap, offsets_topic):
    topic, _ = offsets_topic
    get = ("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic)
    earliest_local, latest_tiered = run_java_concurrently((*get, "--time", "-4"), (*get, "--time", "-5"))
    assert "Skip getting offsets" not in earliest_local.stderr + latest_tiered.stderr, (
        earliest_local.stderr + latest_tiered.stderr)
    assert ok(earliest_local).splitlines() == [f"{topic}:0:0", f"{topic}:1:0", f"{topic}:2:0"]
    assert ok(latest_tiered).splitlines() == []  # offset -1 everywhere: the tool prints nothing
