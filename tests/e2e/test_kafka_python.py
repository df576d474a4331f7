"""kafka-python (pure Python, its own protocol implementation) against Kafgres.

- KafkaAdminClient: api_versions() (every advertised key is one kafka-python
  knows), CreateTopics with a config (and again: TOPIC_ALREADY_EXISTS),
  Metadata (describe_topics, list_topics), DescribeConfigs (modified only, and
  named keys with their defaults), DeleteTopics (and again:
  UNKNOWN_TOPIC_OR_PARTITION);
- KafkaProducer: the idempotent producer (kafka-python's default, so
  InitProducerId) with acks=all, gzip and no compression (lz4, snappy and zstd
  need extra packages); every acknowledged offset and timestamp checked;
- KafkaConsumer with assign(): every record read back exactly, beginning and
  end offsets, offsets_for_times, and commits of a group that never joins
  (generation -1);
- KafkaConsumer with subscribe() in a group: the range assignment, a commit,
  ListGroups / DescribeGroups / OffsetFetch through the admin client while the
  group is Stable and once it is Empty, a second member resuming at the commit
  with metadata, DeleteGroups;
- ListOffsets max timestamp (-3) on gzip batches of several records.

Record i of a test goes to partition i % 3 (so its offset is i // 3) with
timestamp base + i seconds, so every expected value is exact. kafka-python logs
through `logging`; pytest shows its WARNING lines with a failure (run with
`--log-level=DEBUG` for the protocol exchange).
"""

from __future__ import annotations

import time
import warnings

import pytest

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its protocol schemas with importlib.resources.read_text, deprecated since 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
    from kafka.structs import OffsetAndMetadata

PARTITIONS = 3
NODE_ID = 1
CLIENT_ID = "kafgres-kafka-python"
REQUEST_TIMEOUT_MS = 15000
# Deadline for polling a known number of records, a group's state, a send.
WAIT_S = 30.0


@pytest.fixture(scope="module")
def kp_admin(kafgres):
    admin = KafkaAdminClient(bootstrap_servers=kafgres.bootstrap, client_id=CLIENT_ID,
                             request_timeout_ms=REQUEST_TIMEOUT_MS)
    yield admin
    admin.close()


@pytest.fixture
def kp_clients(bootstrap):
    """kp_clients(kind, **config) -> a KafkaProducer or KafkaConsumer on the broker; closed at teardown."""
    made = []

    def make(kind, **config):
        common = dict(bootstrap_servers=bootstrap, client_id=CLIENT_ID, request_timeout_ms=REQUEST_TIMEOUT_MS)
        if kind is KafkaProducer:
            client = KafkaProducer(**common, max_block_ms=REQUEST_TIMEOUT_MS, **config)
        else:
            client = KafkaConsumer(**common, enable_auto_commit=False, **config)
        made.append(client)
        return client

    yield make
    for client in made:
        if isinstance(client, KafkaConsumer):
            client.close(timeout_ms=5000)
        else:
            client.close(timeout=5)


@pytest.fixture
def kp_topic(kp_admin, topic_name):
    """kp_topic(tag='t') -> a new 3-partition topic, created with kafka-python."""

    def create(tag: str = "t") -> str:
        name = topic_name(tag)
        kp_admin.create_topics({name: {"num_partitions": PARTITIONS, "replication_factor": 1}},
                               wait_for_metadata=True)
        return name

    return create


def base_ms() -> int:
    """Whole seconds ten minutes ago: inside any timestamp bound a broker applies."""
    return (int(time.time()) - 600) * 1000


def record(topic: str, i: int, base: int) -> dict:
    return dict(topic=topic, partition=i % PARTITIONS, key=b"key-%03d" % i, value=b"value-%03d;" % i * 20,
                timestamp_ms=base + i * 1000, headers=[("i", str(i).encode())])


def produce(producer: KafkaProducer, topic: str, indices: range, base: int) -> None:
    """Sends records `indices` (then flushes, so each partition's share leaves as one batch when linger
    is long) and checks every acknowledgement: partition i % 3, offset i // 3, the timestamp sent."""
    futures = [producer.send(**record(topic, i, base)) for i in indices]
    producer.flush(timeout=WAIT_S)
    acked = [(m.partition, m.offset, m.timestamp) for m in (f.get(timeout=WAIT_S) for f in futures)]
    assert acked == [(i % PARTITIONS, i // PARTITIONS, base + i * 1000) for i in indices]


def consume_exactly(consumer: KafkaConsumer, count: int) -> list:
    """Polls until `count` records arrived; fails on fewer within WAIT_S."""
    received = []
    deadline = time.monotonic() + WAIT_S
    while len(received) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            received.extend(records)
    assert len(received) == count, f"got {len(received)} of {count} records within {WAIT_S:.0f}s"
    return received


def check_records(received: list, topic: str, indices: range, base: int) -> None:
    by_index = {int(dict(r.headers)["i"]): r for r in received}
    assert sorted(by_index) == list(indices), "missing or duplicated records"
    for i in indices:
        r, want = by_index[i], record(topic, i, base)
        assert (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type, r.headers) == (
            topic, want["partition"], i // PARTITIONS, want["key"], want["value"], want["timestamp_ms"], 0,
            want["headers"]), f"record {i}"


def counts_below(n: int) -> dict[int, int]:
    """How many of records 0..n-1 each partition holds."""
    return {p: len(range(p, n, PARTITIONS)) for p in range(PARTITIONS)}


def wait_for_group(admin: KafkaAdminClient, group: str, state: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        described = admin.describe_groups([group])[group]
        if described["group_state"] == state or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert described["group_state"] == state, described
    return described


# --------------------------------------------------------------------------
# Admin


# kafka-python 3.0.12's ApiKey enum stops at key 92 (DeleteShareGroupOffsets).
LAST_KEY_KAFKA_PYTHON_KNOWS = 92


def test_admin_api_versions_names_every_advertised_key(kp_admin):
    """KafkaAdminClient.api_versions() turns every key the broker advertises into kafka-python's ApiKey enum,
    so one key it does not know raises "ValueError: 93 is not a valid ApiKey", as it does against Apache Kafka
    4.4.0. Kafgres serves the keys of Kafka 4.4 kafka-python knows (the share, streams and delegation token
    ones among them) and none it does not (docs/conformance.md, "Old clients and new keys")."""
    versions = kp_admin.api_versions()
    raw = kp_admin._manager.broker_version_data.api_versions
    assert sorted(int(key) for key in versions) == sorted(raw), "a key lost on the way into the enum"
    assert max(raw) <= LAST_KEY_KAFKA_PYTHON_KNOWS, f"advertised keys past kafka-python's enum: {sorted(raw)}"
    names = {key.name for key in versions}
    assert {"Produce", "Fetch", "DescribeAcls", "CreateDelegationToken", "ShareFetch", "ShareAcknowledge",
            "StreamsGroupHeartbeat", "StreamsGroupDescribe", "DescribeShareGroupOffsets",
            "DeleteShareGroupOffsets"} <= names, sorted(names)
    for key, (low, high) in versions.items():
        assert 0 <= low <= high, (key, low, high)


def test_admin_topics_and_configs(kp_admin, topic_name):
    topic = topic_name()
    created = kp_admin.create_topics(
        {topic: {"num_partitions": PARTITIONS, "replication_factor": 1, "configs": {"retention.ms": "3600000"}}},
        timeout_ms=REQUEST_TIMEOUT_MS)
    [answer] = created["topics"]
    assert (answer["name"], answer["error_code"], answer["num_partitions"], answer["replication_factor"]) == (
        topic, 0, PARTITIONS, 1)
    assert answer["configs"]["retention.ms"]["value"] == "3600000"
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}})

    kp_admin.wait_for_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
    assert topic in kp_admin.list_topics()
    [described] = kp_admin.describe_topics([topic])
    assert (described["name"], described["error_code"], described["is_internal"], str(described["topic_id"])) == (
        topic, 0, False, str(answer["topic_id"]))
    assert [(p["partition_index"], p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
            for p in sorted(described["partitions"], key=lambda p: p["partition_index"])] == [
        (p, 0, NODE_ID, [NODE_ID], [NODE_ID]) for p in range(PARTITIONS)]

    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    modified = kp_admin.describe_configs([resource])["topic"][topic]
    assert {k: (v["value"], v["config_source"], v["read_only"], v["is_sensitive"]) for k, v in modified.items()} == {
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG", False, False)}
    named = ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None, "cleanup.policy": None})
    chosen = kp_admin.describe_configs([named], config_filter="all")["topic"][topic]
    assert {k: (v["value"], v["config_source"], v["config_type"]) for k, v in chosen.items()} == {
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG", "LONG"),
        "cleanup.policy": ("delete", "DEFAULT_CONFIG", "LIST"),
    }

    deleted = kp_admin.delete_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, 0)]
    assert topic not in kp_admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([topic])


# --------------------------------------------------------------------------
# Producer and assign() consumer


def test_idempotent_producer_and_assigned_consumer(kp_admin, kp_clients, kp_topic):
    """Records 0..14 gzip-compressed, 15..29 uncompressed, both idempotent with acks=all; read back
    with assign(); offsets by time; commits of a group that only assigns."""
    topic, base, half, total = kp_topic(), base_ms(), 15, 30
    for codec, indices in (("gzip", range(0, half)), (None, range(half, total))):
        producer = kp_clients(KafkaProducer, acks="all", enable_idempotence=True, compression_type=codec,
                              linger_ms=1000)
        produce(producer, topic, indices, base)
        producer_id = producer._transaction_manager.producer_id_and_epoch  # no public accessor
        assert producer_id.producer_id >= 0 and producer_id.epoch == 0, "no producer id from InitProducerId"

    group = f"{topic}-assign-group"
    consumer = kp_clients(KafkaConsumer, group_id=group, auto_offset_reset="none")
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    check_records(consume_exactly(consumer, total), topic, range(total), base)

    counts = counts_below(total)
    assert consumer.beginning_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS) == {tp: 0 for tp in tps}
    assert consumer.end_offsets(tps, timeout_ms=REQUEST_TIMEOUT_MS) == {tp: counts[tp.partition] for tp in tps}

    # Record 20 (partition 2, offset 6) is the first at or after base + 19.5 s in partition 2; in partitions
    # 0 and 1 it is records 21 and 22. Those are in the uncompressed batches: offsets and timestamps are exact.
    at = consumer.offsets_for_times({tp: base + 19_500 for tp in tps}, timeout_ms=REQUEST_TIMEOUT_MS)
    assert {tp.partition: (o.offset, o.timestamp) for tp, o in at.items()} == {
        0: (7, base + 21_000), 1: (7, base + 22_000), 2: (6, base + 20_000)}
    # Before every record: the first offset (of a gzip batch, whose own timestamp Kafgres does not look up:
    # docs/conformance.md). After every record: nothing (None).
    first = consumer.offsets_for_times({tp: base - 1 for tp in tps}, timeout_ms=REQUEST_TIMEOUT_MS)
    assert {tp.partition: o.offset for tp, o in first.items()} == {0: 0, 1: 0, 2: 0}
    assert consumer.offsets_for_times({tp: base + total * 1000 for tp in tps}, timeout_ms=REQUEST_TIMEOUT_MS) == {
        tp: None for tp in tps}

    # A group that never joins commits with generation -1 and no member id.
    consumer.commit({tps[0]: OffsetAndMetadata(4, "four", -1), tps[1]: OffsetAndMetadata(10, "", -1)},
                    timeout_ms=REQUEST_TIMEOUT_MS)
    assert consumer.committed(tps[0], metadata=True, timeout_ms=REQUEST_TIMEOUT_MS)[:2] == (4, "four")
    assert consumer.committed(tps[1], timeout_ms=REQUEST_TIMEOUT_MS) == 10
    assert consumer.committed(tps[2], timeout_ms=REQUEST_TIMEOUT_MS) is None
    fetched = kp_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: (o.offset, o.metadata) for tp, o in fetched.items()} == {0: (4, "four"), 1: (10, "")}
    described = kp_admin.describe_groups([group])[group]
    assert (described["error"], described["group_state"], described["protocol_type"], described["members"]) == (
        None, "Empty", "", [])


def test_max_timestamp_offset_of_a_gzip_batch(kp_admin, kp_clients, kp_topic):
    """ListOffsets -3 names the record with the largest timestamp, also inside a compressed batch:
    Kafka 4.x decompresses the batch to find it (RecordBatch.offsetOfMaxTimestamp)."""
    topic, base, total = kp_topic(), base_ms(), 12
    producer = kp_clients(KafkaProducer, acks="all", compression_type="gzip", linger_ms=1000)
    produce(producer, topic, range(total), base)  # one batch of 4 records per partition
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    answered = kp_admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP for tp in tps})
    newest = {p: max(range(p, total, PARTITIONS)) for p in range(PARTITIONS)}
    assert {tp.partition: (o.offset, o.timestamp) for tp, o in answered.items()} == {
        p: (i // PARTITIONS, base + i * 1000) for p, i in newest.items()}


# --------------------------------------------------------------------------
# Groups


def test_group_subscribe_commit_and_resume(kp_admin, kp_clients, kp_topic):
    topic, base, total = kp_topic(), base_ms(), 30
    group = f"{topic}-group"
    produce(kp_clients(KafkaProducer, acks="all"), topic, range(total), base)

    member = kp_clients(KafkaConsumer, group_id=group, auto_offset_reset="earliest",
                        session_timeout_ms=10000, heartbeat_interval_ms=500)
    member.subscribe([topic])
    check_records(consume_exactly(member, total), topic, range(total), base)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    assert member.assignment() == set(tps)
    member.commit(timeout_ms=REQUEST_TIMEOUT_MS)
    counts = counts_below(total)
    assert {tp.partition: member.committed(tp, timeout_ms=REQUEST_TIMEOUT_MS) for tp in tps} == counts

    listed = {g["group_id"]: g for g in kp_admin.list_groups()}
    assert {k: listed[group][k] for k in ("group_state", "protocol_type", "group_type")} == {
        "group_state": "Stable", "protocol_type": "consumer", "group_type": "classic"}
    assert [g["group_id"] for g in kp_admin.list_groups(states_filter=["Stable"]) if g["group_id"] == group] == [group]
    assert [g for g in kp_admin.list_groups(states_filter=["Empty"]) if g["group_id"] == group] == []

    described = kp_admin.describe_groups([group])[group]
    assert (described["error"], described["group_state"], described["protocol_type"], described["protocol_data"]) == (
        None, "Stable", "consumer", "range")  # kafka-python's first assignor
    [m] = described["members"]
    assert (m["client_id"], m["client_host"], m["group_instance_id"]) == (CLIENT_ID, "/127.0.0.1", None)
    assert m["member_id"].startswith(CLIENT_ID + "-")  # KIP-394: client id, dash, uuid
    assert m["member_metadata"]["topics"] == [topic]
    assert m["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1, 2]}]

    fetched = kp_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: (o.offset, o.metadata) for tp, o in fetched.items()} == {
        p: (n, "") for p, n in counts.items()}

    member.close(timeout_ms=5000)  # LeaveGroup
    described = wait_for_group(kp_admin, group, "Empty")
    assert (described["protocol_type"], described["members"]) == ("consumer", [])

    # A second member resumes at the commit and reads only the 3 new records.
    produce(kp_clients(KafkaProducer, acks="all"), topic, range(total, total + PARTITIONS), base)
    second = kp_clients(KafkaConsumer, group_id=group, auto_offset_reset="none",
                        session_timeout_ms=10000, heartbeat_interval_ms=500)
    second.subscribe([topic])
    check_records(consume_exactly(second, PARTITIONS), topic, range(total, total + PARTITIONS), base)
    second.commit({tp: OffsetAndMetadata(counts[tp.partition] + 1, "resumed", -1) for tp in tps},
                  timeout_ms=REQUEST_TIMEOUT_MS)
    fetched = kp_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: (o.offset, o.metadata) for tp, o in fetched.items()} == {
        p: (n + 1, "resumed") for p, n in counts.items()}
    second.close(timeout_ms=5000)
    wait_for_group(kp_admin, group, "Empty")

    assert kp_admin.delete_groups([group]) == {group: "OK"}
    assert group not in {g["group_id"] for g in kp_admin.list_groups()}
