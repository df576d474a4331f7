"""MirrorMaker 2 between Kafgres and Apache Kafka: the migration docs/outgrowing.md describes.

A dedicated MirrorMaker (`org.apache.kafka.connect.mirror.MirrorMaker`, from
connect-mirror 4.1.1 on Maven Central: tests/mirrormaker/pom.xml resolves its
classpath into .kafgres/mirrormaker once, and again only when the pom is
newer) runs with tests/mirrormaker/mm2.properties, filled in, between the dev
cluster (alias `kafgres`) and an Apache Kafka 4.1 that the test starts with
tests/conformance/reference.py's `ReferenceKafka` on 127.0.0.1:19392 (alias
`kafka`). One MirrorMaker process runs both flows, with
IdentityReplicationPolicy (topic names kept):

- kafgres->kafka: a 3-partition topic with RECORDS_PER_PARTITION keyed records
  (headers, one null key and one null header value per partition, explicit
  partitions) and two groups that committed on Kafgres before MirrorMaker
  started: `done` at the end of every partition, `lagging` part-way (LAGGING_AT).
  Checked: the records on Kafka are identical (partition, offset, key, value,
  headers in order, timestamp); both groups' offsets appear in Kafka's groups;
  `done`'s exactly (the translation of an offset at the end of the copied log
  is exact), `lagging`'s as MirrorMaker's OffsetSyncStore.translateDownstream
  defines it: one past an offset sync at or before the committed offset (or
  the sync itself when they are equal), read from the offset-syncs topic
  MirrorMaker wrote on Kafgres, so never past the commit; the groups' offsets
  on Kafgres are left as they were committed. Then MORE_RECORDS
  more per partition are produced to Kafgres while MirrorMaker runs, and a
  consumer of each group on Kafka resumes: `done` reads exactly the new
  records, `lagging` the records from its translated offset on, which are the
  records [translated, committed) it had already read on Kafgres and
  everything after, none skipped.
- kafka->kafgres: a 2-partition topic created on Kafka after MirrorMaker
  started, REVERSE_RECORDS records; the copy on Kafgres is identical.
- MirrorMaker's log (.kafgres/mirrormaker/mirrormaker.log) has no ERROR line
  until it is told to stop, and none while stopping but MirrorMaker's own
  shutdown race (SHUTDOWN_RACE), which involves neither cluster.

Every wait has a deadline; MirrorMaker and Kafka are stopped whatever happens
(and get SIGTERM from the kernel if pytest dies). Needs Java 17+ and Maven.
"""

from __future__ import annotations

import re
import shutil
import signal
import string
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support import PRODUCER_DEFAULTS, REPO_ROOT, port_is_free, produce_all

sys.path.insert(0, str(REPO_ROOT / "tests" / "conformance"))
import reference  # noqa: E402  (tests/conformance is not a package)
from apache_kafka import _die_with_parent  # noqa: E402  (on the path through reference)

MM_DIR = REPO_ROOT / "tests" / "mirrormaker"
POM = MM_DIR / "pom.xml"
BUILD_DIR = REPO_ROOT / ".kafgres" / "mirrormaker"
CLASSPATH_FILE = BUILD_DIR / "classpath.txt"
LOG_FILE = BUILD_DIR / "mirrormaker.log"

# The reference Kafka's client port (its controller takes the next one): not
# the conformance suite's 19092/19093 nor the benchmark's 9192.
KAFKA_PORT = 19392
KAFKA_ALIAS = "kafka"
# The offset-syncs topic of the kafgres->kafka flow, on the source (Kafgres): the default location.
OFFSET_SYNCS_TOPIC = f"mm2-offset-syncs.{KAFKA_ALIAS}.internal"
# What else MirrorMaker creates on Kafgres (the test deletes them when it is done): the heartbeats
# the kafka->kafgres flow emits, Kafka's heartbeats mirrored, that flow's checkpoints, and the
# offset syncs of kafgres->kafka (Connect's own three topics are named per run).
KAFGRES_MM2_TOPICS = ("heartbeats", f"{KAFKA_ALIAS}.heartbeats", f"{KAFKA_ALIAS}.checkpoints.internal",
                      OFFSET_SYNCS_TOPIC)

PARTITIONS = 3
RECORDS_PER_PARTITION = 50
MORE_RECORDS = 10
# Where the `lagging` group committed, per partition: between the offset syncs
# that offset.lag.max=10 makes (0, 11, 22, 33, 44 when nothing delays them) and on one.
LAGGING_AT = (17, 26, 33)
REVERSE_PARTITIONS = 2
REVERSE_RECORDS = 10  # per partition

MAVEN_TIMEOUT_S = 900.0
MM_HEAP = "-Xmx256m"
MM_STOP_TIMEOUT_S = 30.0
# From MirrorMaker's start: connectors started, topics created, records copied.
REPLICATION_TIMEOUT_S = 90.0
# Checkpoints and offset syncs run every second; a few rounds after the records are there.
OFFSETS_TIMEOUT_S = 60.0
CONSUME_TIMEOUT_S = 30.0
SETTLE_S = 3.0  # three checkpoint and group-sync rounds

ERROR_LINE = re.compile(r"^\[[^\]]+\] ERROR ")
# MirrorMaker's shutdown hook logs this first (MirrorMaker.stop).
STOPPING_LINE = "INFO Kafka MirrorMaker stopping"
# While stopping, MirrorCheckpointTask.stop closes its admin clients before the scheduler whose
# jobs use them, so a job that runs in between fails with this and is logged as an ERROR; the
# cluster is not involved (it happens with the Kafka side's client, against Apache Kafka).
SHUTDOWN_RACE = "Cannot accept new calls when AdminClient is closing"


# --------------------------------------------------------------------------
# MirrorMaker's classpath and process


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"`{tool}` not found on PATH: the MirrorMaker test needs Java 17+ and Maven "
                    f"(Debian: apt-get install openjdk-17-jdk-headless maven)", pytrace=False)
    return path


def ensure_classpath() -> str:
    """connect-mirror's runtime classpath, resolved with Maven unless it is newer than the pom."""
    if CLASSPATH_FILE.is_file() and CLASSPATH_FILE.stat().st_mtime >= POM.stat().st_mtime:
        text = CLASSPATH_FILE.read_text().strip()
        if all(Path(j).is_file() for j in text.split(":") if j):
            return text
    mvn = _need("mvn")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [mvn, "-B", "-q", "-f", str(POM), f"-Dkafgres.mirrormaker.dir={BUILD_DIR}", "dependency:build-classpath"]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"resolving MirrorMaker's classpath did not finish within {MAVEN_TIMEOUT_S:.0f}s", pytrace=False)
    if result.returncode != 0 or not CLASSPATH_FILE.is_file():
        pytest.fail(f"`{' '.join(cmd)}` exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}",
                    pytrace=False)
    return CLASSPATH_FILE.read_text().strip()


class MirrorMaker:
    """The dedicated MirrorMaker JVM; `stop()` is SIGTERM, SIGKILL after MM_STOP_TIMEOUT_S."""

    def __init__(self, classpath: str, properties: Path) -> None:
        LOG_FILE.unlink(missing_ok=True)
        self.stdout = open(BUILD_DIR / "mirrormaker.stdout", "w")
        self.process = subprocess.Popen(
            ["java", MM_HEAP, "-XX:+UseSerialGC", "-Djava.awt.headless=true",
             f"-Dlog4j2.configurationFile={MM_DIR / 'log4j2.properties'}", f"-Dkafgres.mm2.log={LOG_FILE}",
             "-cp", classpath, "org.apache.kafka.connect.mirror.MirrorMaker", str(properties)],
            stdout=self.stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )

    def check_running(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"MirrorMaker exited with {self.process.returncode}; see {LOG_FILE}\n{log_tail()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=MM_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.stdout.close()


def log_text() -> str:
    try:
        return LOG_FILE.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def translations(group: str, topic: str, partition: int, lines: int = 5) -> list[str]:
    """The last lines in which MirrorMaker's OffsetSyncStore translated (or skipped) the group's offset."""
    needle = f"translateDownstream({group},{topic}-{partition},"
    return [line for line in log_text().splitlines() if needle in line][-lines:]


def log_tail(lines: int = 30) -> str:
    return "\n".join(log_text().splitlines()[-lines:])


def error_lines(text: str) -> tuple[list[str], list[str]]:
    """The ERROR lines of the log, each with the first lines of its stack trace:
    those before MirrorMaker began to stop, and those while it stopped."""
    lines = text.splitlines()
    running: list[str] = []
    stopping: list[str] = []
    found = running
    for i, line in enumerate(lines):
        if STOPPING_LINE in line:
            found = stopping
        if ERROR_LINE.match(line):
            trace = [t for t in lines[i + 1:i + 6] if not t.startswith("[")]
            found.append("\n".join([line, *trace]))
    return running, stopping


# --------------------------------------------------------------------------
# Clients


def consumer(bootstrap: str, group: str | None = None, **config) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group or f"kafgres-e2e-unused-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
        **config,
    })


def record_of(msg) -> tuple:
    """What must survive the copy: partition, offset, key, value, headers in order, timestamp."""
    return (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or [], msg.timestamp())


def read_partition(bootstrap: str, topic: str, partition: int, end: int, start: int = OFFSET_BEGINNING,
                   timeout_s: float = CONSUME_TIMEOUT_S) -> list[tuple]:
    """Every record of topic[partition] from `start` until offset `end` - 1."""
    c = consumer(bootstrap)
    c.assign([TopicPartition(topic, partition, start)])
    records: list[tuple] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while (not records or records[-1][1] < end - 1) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(str(msg.error()))
                continue
            records.append(record_of(msg))
    finally:
        c.close()
    assert records and records[-1][1] == end - 1, (
        f"read {len(records)} records of {topic}[{partition}] on {bootstrap} up to offset "
        f"{records[-1][1] if records else None}, not to {end - 1}, within {timeout_s:.0f}s; errors {errors[-5:]}")
    return records


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The high watermark of each partition; -1 where the topic or partition is not there (yet)."""
    c = consumer(bootstrap)
    try:
        ends = {}
        for p in range(partitions):
            try:
                ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            except Exception:  # noqa: BLE001  (unknown topic or partition, broker not answering: not there yet)
                ends[p] = -1
        return ends
    finally:
        c.close()


def wait_for_end_offsets(bootstrap: str, topic: str, expected: dict[int, int], mm: MirrorMaker,
                         timeout_s: float = REPLICATION_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    ends: dict[int, int] = {}
    while time.monotonic() < deadline:
        mm.check_running()
        ends = end_offsets(bootstrap, topic, len(expected))
        if ends == expected:
            return
        time.sleep(0.5)
    pytest.fail(f"{topic} on {bootstrap} has end offsets {ends}, not {expected}, {timeout_s:.0f}s on; "
                f"MirrorMaker's log ends:\n{log_tail()}")


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def group_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets in `topic` ({} when it has none, or no group)."""
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)[group]
    result = future.result(timeout=15)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def offset_syncs(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int]]]:
    """The (upstream, downstream) offset syncs MirrorMaker wrote for `topic`, per partition, in order.

    Key: topic (int16 length, UTF-8), partition (int32); value: upstream offset,
    downstream offset (int64 each): connect-mirror's OffsetSync schema.
    """
    end = end_offsets(bootstrap, OFFSET_SYNCS_TOPIC, 1)[0]
    syncs: dict[int, list[tuple[int, int]]] = {}
    for _, _, key, value, _, _ in read_partition(bootstrap, OFFSET_SYNCS_TOPIC, 0, end):
        (length,) = struct.unpack_from(">h", key)
        name = key[2:2 + length].decode()
        (partition,) = struct.unpack_from(">i", key, 2 + length)
        if name == topic:
            syncs.setdefault(partition, []).append(struct.unpack(">qq", value))
    return syncs


def consume_group(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> dict[int, list[tuple]]:
    """A subscribed member of `group` reads until each partition's end; what it read, per partition."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    read: dict[int, list[tuple]] = {p: [] for p in ends}
    errors: list[str] = []
    deadline = time.monotonic() + CONSUME_TIMEOUT_S

    def done() -> bool:  # every partition has records after the group's offset here
        return all(read[p] and read[p][-1][1] == end - 1 for p, end in ends.items())

    try:
        while time.monotonic() < deadline and not done():
            msg = c.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(str(msg.error()))
            elif msg is not None:
                read[msg.partition()].append(record_of(msg))
        assert done(), f"{group} on {bootstrap} read {[len(r) for r in read.values()]} records; errors {errors[-5:]}"
    finally:
        c.close()
    return read


def commit_on_kafgres(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A subscribed member of `group` reads until it has seen each partition up to its commit, commits, leaves."""
    c = consumer(bootstrap, group, **{"auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = {p: -1 for p in offsets}
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    try:
        while any(seen[p] < offsets[p] - 1 for p in offsets) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen[msg.partition()] = max(seen[msg.partition()], msg.offset())
        assert all(seen[p] >= offsets[p] - 1 for p in offsets), f"{group} saw only {seen} within the deadline"
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


# --------------------------------------------------------------------------


def records_for(topic: str, partitions: int, per_partition: int, origin: str, first: int = 0) -> list[dict]:
    """Keyed records with headers, round-robin over explicit partitions; record 0 of each
    partition has a null key and a header with a null value; a header key repeats."""
    records = []
    for i in range(first, first + partitions * per_partition):
        p = i % partitions
        headers = [("origin", origin.encode()), ("seq", str(i).encode()), ("seq", b"again"), ("empty", b"")]
        if i < partitions:
            headers.append(("null", None))
        records.append({
            "topic": topic, "partition": p,
            "key": None if i < partitions else f"key-{i % 7}".encode(),
            "value": f'{{"n": {i}, "from": "{origin}"}}'.encode(),
            "headers": headers,
        })
    return records


def create_kafka_topic(admin: AdminClient, name: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=15, request_timeout=15)
    futures[name].result(timeout=20)


def test_mirrormaker_migration_and_back(bootstrap, admin, create_topic, topic_name, tmp_path, monkeypatch):
    _need("java")
    classpath = ensure_classpath()
    if not (port_is_free(KAFKA_PORT) and port_is_free(KAFKA_PORT + 1)):
        pytest.fail(f"127.0.0.1:{KAFKA_PORT} or {KAFKA_PORT + 1} is in use: this test's reference Kafka needs both")
    # ReferenceKafka copies its server log there when it stops (instead of the conformance suite's directory).
    monkeypatch.setattr(reference, "STATE_DIR", BUILD_DIR)

    topic = topic_name("orders")
    reverse_topic = topic_name("imported")
    run = uuid.uuid4().hex[:10]
    groups = {"done": f"mm2-e2e-done-{run}", "lagging": f"mm2-e2e-lagging-{run}"}
    connect_prefix = f"mm2-e2e-{run}"
    try:
        create_topic(topic, PARTITIONS)
        producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS})
        produce_all(producer, records_for(topic, PARTITIONS, RECORDS_PER_PARTITION, "kafgres"))
        commit_on_kafgres(bootstrap, groups["done"], topic, {p: RECORDS_PER_PARTITION for p in range(PARTITIONS)})
        commit_on_kafgres(bootstrap, groups["lagging"], topic, dict(enumerate(LAGGING_AT)))

        properties = tmp_path / "mm2.properties"
        with reference.ReferenceKafka(port=KAFKA_PORT) as kafka_bootstrap:
            properties.write_text(string.Template((MM_DIR / "mm2.properties").read_text()).substitute(
                kafgres_bootstrap=bootstrap, kafka_bootstrap=kafka_bootstrap,
                migrate_topics=re.escape(topic), migrate_groups="|".join(map(re.escape, groups.values())),
                import_topics=re.escape(reverse_topic), connect_topic_prefix=connect_prefix,
            ))
            kafka_admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
            mm = MirrorMaker(classpath, properties)
            try:
                check_migration(bootstrap, kafka_bootstrap, admin, kafka_admin, topic, groups, producer, mm)
                check_import(bootstrap, kafka_bootstrap, kafka_admin, reverse_topic, mm)
            finally:
                mm.stop()
    finally:
        cleanup_kafgres(admin, [topic, reverse_topic, *KAFGRES_MM2_TOPICS,
                                *(f"{connect_prefix}-{what}" for what in ("configs", "offsets", "status"))],
                        list(groups.values()))
    running, stopping = error_lines(log_text())
    assert not running, f"MirrorMaker logged {len(running)} ERROR lines ({LOG_FILE}):\n" + "\n".join(running[:20])
    stopping = [e for e in stopping if SHUTDOWN_RACE not in e]
    assert not stopping, f"MirrorMaker logged ERROR lines while stopping ({LOG_FILE}):\n" + "\n".join(stopping[:20])


def check_migration(bootstrap, kafka_bootstrap, admin, kafka_admin, topic, groups, producer, mm) -> None:
    ends = {p: RECORDS_PER_PARTITION for p in range(PARTITIONS)}
    wait_for_end_offsets(kafka_bootstrap, topic, ends, mm)
    assert partition_count(kafka_admin, topic) == PARTITIONS
    for p in range(PARTITIONS):
        source = read_partition(bootstrap, topic, p, ends[p])
        copy = read_partition(kafka_bootstrap, topic, p, ends[p])
        assert copy == source, f"{topic}[{p}] on Kafka differs from Kafgres's"

    # `done` committed at the end of every partition: translated exactly.
    deadline = time.monotonic() + OFFSETS_TIMEOUT_S
    translated: dict[str, dict[int, int]] = {}
    while time.monotonic() < deadline:
        mm.check_running()
        translated = {name: group_offsets(kafka_admin, group, topic) for name, group in groups.items()}
        if translated["done"] == ends and len(translated["lagging"]) == PARTITIONS:
            break
        time.sleep(0.5)
    assert translated.get("done") == ends, (
        f"group {groups['done']} on Kafka has offsets {translated.get('done')}, not {ends} (its commit on Kafgres); "
        f"lagging: {translated.get('lagging')}\n{log_tail()}")
    time.sleep(SETTLE_S)  # no more syncs are coming: the checkpoints stop moving
    translated["lagging"] = group_offsets(kafka_admin, groups["lagging"], topic)

    # `lagging`: one past an offset sync at or before the commit (the sync itself if equal), never past the commit.
    syncs = offset_syncs(bootstrap, topic)
    untranslated = []
    for p, committed in enumerate(LAGGING_AT):
        upstream = [u for u, _ in syncs.get(p, [])]
        downstream = [d for _, d in syncs.get(p, [])]
        assert upstream == sorted(upstream) and downstream == sorted(downstream), (
            f"the offset syncs MirrorMaker wrote for {topic}[{p}] read back from Kafgres out of order: {syncs.get(p)}")
        if p not in translated["lagging"]:
            # MirrorMaker emits no checkpoint when every sync its store kept
            # for the partition lies past the group's offset ("is ahead of
            # upstream consumer group"): the store keeps a sparse history and
            # can lose the early syncs. The syncs on Kafgres are in order (just
            # checked), so the history was MirrorMaker's to keep; the runbook's
            # answer is to reset such a partition on the target (done below).
            seen = translations(groups["lagging"], topic, p)
            assert seen and all("is ahead of upstream consumer group" in line for line in seen), (
                f"{groups['lagging']}[{p}] committed {committed} on Kafgres has no offset on Kafka; offset syncs on "
                f"Kafgres {syncs.get(p)}; MirrorMaker's translations of it:\n" + "\n".join(seen))
            print(f"\nMirrorMaker left {groups['lagging']}[{p}] untranslated: {seen[-1]}")
            untranslated.append(p)
            continue
        at = translated["lagging"][p]
        candidates = {d + (0 if u == committed else 1) for u, d in syncs.get(p, []) if u <= committed}
        assert at <= committed and at in candidates, (
            f"{groups['lagging']}[{p}] committed {committed} on Kafgres, translated to {at} on Kafka; offset syncs "
            f"{syncs.get(p)} allow {sorted(candidates)}")
    print(f"\nlagging group: committed {list(LAGGING_AT)} on Kafgres, resumes at "
          f"{translated['lagging']} on Kafka; offset syncs {syncs}")

    # Producers still write to Kafgres during the migration: MirrorMaker keeps copying.
    more = records_for(topic, PARTITIONS, MORE_RECORDS, "kafgres", first=PARTITIONS * RECORDS_PER_PARTITION)
    produce_all(producer, more)
    ends = {p: RECORDS_PER_PARTITION + MORE_RECORDS for p in range(PARTITIONS)}
    wait_for_end_offsets(kafka_bootstrap, topic, ends, mm)
    source = {p: read_partition(bootstrap, topic, p, ends[p]) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        copy = read_partition(kafka_bootstrap, topic, p, ends[p])
        assert copy == source[p], f"{topic}[{p}] on Kafka differs from Kafgres's after more records"
    time.sleep(SETTLE_S)
    for name, group in groups.items():
        assert group_offsets(kafka_admin, group, topic) == translated[name], (
            f"{group}'s offsets on Kafka moved after more records were mirrored (its Kafgres commit did not)")

    # MirrorMaker wrote nothing into Kafgres's groups: rolling back to Kafgres finds them as they were.
    committed_on_kafgres = {"done": {p: RECORDS_PER_PARTITION for p in range(PARTITIONS)},
                            "lagging": dict(enumerate(LAGGING_AT))}
    for name, group in groups.items():
        assert group_offsets(admin, group, topic) == committed_on_kafgres[name], f"{group}'s offsets on Kafgres moved"

    # A partition MirrorMaker left untranslated is reset to the earliest
    # offset on Kafka before the group moves (docs/outgrowing.md): read again,
    # never skipped.
    if untranslated:
        reset = [TopicPartition(topic, p, 0) for p in untranslated]
        kafka_admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(groups["lagging"], reset)])[groups["lagging"]].result(timeout=15)
        translated["lagging"].update({p: 0 for p in untranslated})

    # Cut-over: each group resumes on Kafka where its translated offset says.
    for name, group in groups.items():
        read = consume_group(kafka_bootstrap, group, topic, ends)
        for p in range(PARTITIONS):
            at = translated[name][p]
            assert read[p] == source[p][at:], (
                f"{group}[{p}] on Kafka read offsets {[r[1] for r in read[p][:3]]}... , expected from {at} "
                f"(committed {RECORDS_PER_PARTITION if name == 'done' else LAGGING_AT[p]} on Kafgres) to {ends[p] - 1}")


def check_import(bootstrap, kafka_bootstrap, kafka_admin, topic, mm) -> None:
    create_kafka_topic(kafka_admin, topic, REVERSE_PARTITIONS)
    kafka_producer = Producer({"bootstrap.servers": kafka_bootstrap, **PRODUCER_DEFAULTS})
    produce_all(kafka_producer, records_for(topic, REVERSE_PARTITIONS, REVERSE_RECORDS, "kafka"))
    ends = {p: REVERSE_RECORDS for p in range(REVERSE_PARTITIONS)}
    wait_for_end_offsets(bootstrap, topic, ends, mm)
    assert partition_count(AdminClient({"bootstrap.servers": bootstrap}), topic) == REVERSE_PARTITIONS
    for p in range(REVERSE_PARTITIONS):
        source = read_partition(kafka_bootstrap, topic, p, ends[p])
        assert read_partition(bootstrap, topic, p, ends[p]) == source, f"{topic}[{p}] on Kafgres differs from Kafka's"


def cleanup_kafgres(admin: AdminClient, topics: list[str], groups: list[str]) -> None:
    """Deletes what this run created on the dev cluster (MirrorMaker's own topics included)."""
    existing = set(admin.list_topics(timeout=10).topics)
    futures = {}
    doomed = [t for t in topics if t in existing]
    if doomed:
        futures.update(admin.delete_topics(doomed, operation_timeout=15, request_timeout=15))
    futures.update(admin.delete_consumer_groups(groups, request_timeout=15))
    for future in futures.values():
        try:
            future.result(timeout=20)
        except Exception:  # noqa: BLE001  (cleanup: a topic or group left behind is not this test's failure)
            pass
