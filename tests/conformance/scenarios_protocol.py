"""Scenarios of the protocol: admin, produce, fetch, offsets, errors (see framework.py)."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException, OFFSET_BEGINNING, OFFSET_END, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

import kafka_raw
from framework import ADMIN_TIMEOUT_S, RETAIN_FOREVER, WAIT_TIMEOUT_S, Context, error_text, scenario

T = ADMIN_TIMEOUT_S


def _results(ctx: Context, label: str, futures: dict) -> None:
    """Writes `label key: ok` or `label key: ERROR(code) 'message'` for each future, in key order."""
    for key in sorted(futures, key=str):
        try:
            futures[key].result(timeout=T + 5)
            ctx.out(f"{label} {key}: ok")
        except KafkaException as e:
            ctx.out(f"{label} {key}:", error_text(e))


def _source(source: int) -> str:
    return ConfigSource(source).name


def _describe_topic_configs(ctx: Context, topic: str, only: set[str] | None = None) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = ctx.admin.describe_configs([resource], request_timeout=T)[resource].result(timeout=T + 5)
    for name in sorted(entries):
        if only is not None and name not in only:
            continue
        e = entries[name]
        synonyms = ",".join(f"{s.name}={s.value}/{_source(s.source)}" for s in e.synonyms.values())
        ctx.out(f"config {name}={e.value} source={_source(e.source)} read_only={e.is_read_only} "
                f"default={e.is_default} sensitive={e.is_sensitive} synonyms=[{synonyms}]")


def _await_topic_configs(ctx: Context, topic: str, expected: dict[str, str | None]) -> None:
    """Waits until DescribeConfigs shows `expected` (None: back at its default). Kafka applies a config
    change through its metadata log, so a describe right after the answer may still show the old value;
    Kafgres applies it before answering. Writes nothing: the transcript shows the describe that follows."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        entries = ctx.admin.describe_configs([resource], request_timeout=T)[resource].result(timeout=T + 5)
        if all((entries[n].is_default if v is None else entries[n].value == v) for n, v in expected.items()):
            return
        time.sleep(0.1)


def _describe_topic(ctx: Context, topic: str) -> None:
    desc = ctx.admin.describe_topics(
        __import__("confluent_kafka").TopicCollection([topic]), request_timeout=T
    )[topic].result(timeout=T + 5)
    ctx.out(f"topic {desc.name} id={ctx.norm.topic_id(desc.topic_id)} internal={desc.is_internal} "
            f"partitions={len(desc.partitions)}")
    for p in desc.partitions:
        ctx.out(f"  partition {p.id} leader={ctx.norm.node(p.leader.id if p.leader else None)} "
                f"replicas={[ctx.norm.node(r.id) for r in p.replicas]} isr={[ctx.norm.node(r.id) for r in p.isr]}")


@scenario
def scenario_create_topics(ctx: Context) -> None:
    """CreateTopics: success, defaults, validate-only and every refusal a client can provoke."""
    ok, dup, zero, rf2, badcfg, badval, dflt, check = (ctx.name(t) for t in
                                                         ("ok", "dup", "zero", "rf2", "badcfg", "badval", "dflt", "check"))
    bad_name = ctx.name("bad") + "!"
    long_name = "x" * 250
    topics = [
        NewTopic(ok, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopic(dup, 1, 1),
        NewTopic(zero, 0, 1),
        NewTopic(rf2, 1, 2),
        NewTopic(badcfg, 1, 1, config={"no.such.config": "1"}),
        NewTopic(dflt, -1, -1),
        NewTopic(bad_name, 1, 1),
        NewTopic(long_name, 1, 1),
    ]
    _results(ctx, "create", ctx.admin.create_topics(topics, request_timeout=T, operation_timeout=T))
    ctx.wait_topic(ok, 3)
    ctx.wait_topic(dflt, 1)
    _results(ctx, "create again", ctx.admin.create_topics([NewTopic(dup, 2, 1)], request_timeout=T))
    _results(ctx, "validate-only", ctx.admin.create_topics([NewTopic(check, 2, 1)], request_timeout=T,
                                                           validate_only=True))
    _results(ctx, "validate-only existing", ctx.admin.create_topics([NewTopic(ok, 2, 1)], request_timeout=T,
                                                                    validate_only=True))
    md = ctx.admin.list_topics(timeout=10).topics
    for name in (ok, dup, dflt, check, zero, rf2, badcfg, badval):
        t = md.get(name)
        ctx.out(f"listed {name}:", "absent" if t is None else f"{len(t.partitions)} partitions")
    _describe_topic(ctx, ok)
    _describe_topic(ctx, dflt)
    _describe_topic_configs(ctx, ok, only={"retention.ms", "cleanup.policy"})


@scenario
def scenario_topic_configs(ctx: Context) -> None:
    """DescribeConfigs of a topic: every config with value, source, flags and synonyms."""
    topic = ctx.create_topic(ctx.name("t"), 1, {"retention.ms": "3600000", "max.message.bytes": "50000",
                                                "cleanup.policy": "compact,delete"})
    _describe_topic_configs(ctx, topic)
    unknown = ConfigResource(ConfigResource.Type.TOPIC, ctx.name("unknown"))
    try:
        ctx.admin.describe_configs([unknown], request_timeout=T)[unknown].result(timeout=T + 5)
        ctx.out("describe unknown topic: ok")
    except KafkaException as e:
        ctx.out("describe unknown topic:", error_text(e))
    ctx.cli("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)


@scenario
def scenario_alter_configs(ctx: Context) -> None:
    """IncrementalAlterConfigs and AlterConfigs on a topic: set, delete, append, subtract and refusals."""
    topic = ctx.create_topic(ctx.name("t"), 1, {"retention.ms": "3600000"})
    shown = {"retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes", "min.insync.replicas"}

    def incremental(label: str, *entries: ConfigEntry, name: str = topic) -> None:
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=list(entries))
        _results(ctx, label, {name: ctx.admin.incremental_alter_configs([res], request_timeout=T)[res]})

    def op(name, value, kind):
        return ConfigEntry(name, value, incremental_operation=kind)

    S, D, A, SUB = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                    AlterConfigOpType.SUBTRACT)
    incremental("set", op("retention.ms", "7200000", S), op("segment.bytes", "1048576", S))
    incremental("append", op("cleanup.policy", "compact", A))
    incremental("subtract", op("cleanup.policy", "delete", SUB))
    incremental("delete", op("segment.bytes", None, D))
    _await_topic_configs(ctx, topic, {"retention.ms": "7200000", "cleanup.policy": "compact", "segment.bytes": None})
    _describe_topic_configs(ctx, topic, only=shown)
    incremental("unknown name", op("no.such.config", "1", S))
    incremental("not a number", op("retention.ms", "abc", S))
    incremental("out of range", op("min.insync.replicas", "0", S))
    incremental("bad enum", op("cleanup.policy", "sometimes", S))
    incremental("append to non-list", op("retention.ms", "5", A))
    incremental("unknown topic", op("retention.ms", "5", S), name=ctx.name("unknown"))
    _describe_topic_configs(ctx, topic, only=shown)
    legacy = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"max.message.bytes": "20000"})
    _results(ctx, "alter (replaces all)", {topic: ctx.admin.alter_configs([legacy], request_timeout=T)[legacy]})
    _await_topic_configs(ctx, topic, {"max.message.bytes": "20000", "retention.ms": None, "cleanup.policy": None})
    _describe_topic_configs(ctx, topic, only=shown)
    ctx.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]")
    ctx.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--delete-config", "max.message.bytes")
    _await_topic_configs(ctx, topic, {"retention.ms": "60000", "cleanup.policy": "compact,delete",
                                      "max.message.bytes": None})
    ctx.cli("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
    ctx.cli("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "retention.ms=abc")


@scenario
def scenario_broker_configs(ctx: Context) -> None:
    """DescribeConfigs of the broker (the settings Kafgres has) and altering one."""
    names = ["auto.create.topics.enable", "group.initial.rebalance.delay.ms", "log.segment.bytes",
             "message.max.bytes", "num.partitions", "socket.request.max.bytes"]
    node = str(ctx.norm.node_id)
    res = ConfigResource(ConfigResource.Type.BROKER, node)
    entries = ctx.admin.describe_configs([res], request_timeout=T)[res].result(timeout=T + 5)
    for name in names:
        e = entries.get(name)
        if e is None:
            ctx.out(f"broker config {name}: absent")
            continue
        ctx.out(f"broker config {name}: {e.value} sensitive={e.is_sensitive}")
        ctx.out(f"broker config {name}: source={_source(e.source)}")
        ctx.out(f"broker config {name}: read_only={e.is_read_only}")
    alter = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    _results(ctx, "alter broker log.retention.ms", {"<node>": ctx.admin.incremental_alter_configs(
        [alter], request_timeout=T)[alter]})
    static = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("auto.create.topics.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    _results(ctx, "alter broker auto.create.topics.enable", {"<node>": ctx.admin.incremental_alter_configs(
        [static], request_timeout=T)[static]})
    # Put the cluster default back where it was accepted (the reference broker is thrown away anyway).
    back = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    try:
        ctx.admin.incremental_alter_configs([back], request_timeout=T)[back].result(timeout=T + 5)
    except KafkaException:
        pass


@scenario
def scenario_partitions_and_delete(ctx: Context) -> None:
    """CreatePartitions and DeleteTopics, with their refusals, and a topic re-created after deletion."""
    topic = ctx.create_topic(ctx.name("t"), 1)
    unknown = ctx.name("unknown")
    ctx.produce(topic, [{"value": b"before", "partition": 0}])
    _results(ctx, "grow to 3 (validate only)", ctx.admin.create_partitions([NewPartitions(topic, 3)],
                                                                           request_timeout=T, validate_only=True))
    _results(ctx, "grow to 3", ctx.admin.create_partitions([NewPartitions(topic, 3)], request_timeout=T))
    ctx.wait_topic(topic, 3)
    _results(ctx, "shrink to 2", ctx.admin.create_partitions([NewPartitions(topic, 2)], request_timeout=T))
    _results(ctx, "same count 3", ctx.admin.create_partitions([NewPartitions(topic, 3)], request_timeout=T))
    _results(ctx, "grow unknown", ctx.admin.create_partitions([NewPartitions(unknown, 3)], request_timeout=T))
    _describe_topic(ctx, topic)
    ctx.produce(topic, [{"value": b"new", "partition": 2}])
    _results(ctx, "delete", ctx.admin.delete_topics([topic], request_timeout=T, operation_timeout=T))
    _results(ctx, "delete unknown", ctx.admin.delete_topics([unknown], request_timeout=T))
    deadline = time.monotonic() + 30
    while topic in ctx.admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    ctx.out("listed after delete:", topic in ctx.admin.list_topics(timeout=5).topics)
    # Re-creating the name can race the deletion's cleanup on Kafka: retry TOPIC_ALREADY_EXISTS for a while.
    deadline = time.monotonic() + 30
    while True:
        try:
            ctx.admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=T)[topic].result(timeout=T + 5)
            break
        except KafkaException as e:
            if time.monotonic() > deadline:
                ctx.out("re-create:", error_text(e))
                return
            time.sleep(0.5)
    ctx.wait_topic(topic, 1)
    ctx.produce(topic, [{"value": b"after", "partition": 0}])
    ctx.consume(topic, 0, OFFSET_BEGINNING, 1)


@scenario
def scenario_topics_cli(ctx: Context) -> None:
    """kafka-topics: create, describe, alter, list, delete and their error messages."""
    topic = ctx.name("t")
    ctx.cli("kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
            "--config", "retention.ms=3600000")
    ctx.wait_topic(topic, 2)
    ctx.cli("kafka-topics", "--create", "--topic", topic, "--partitions", "2")
    ctx.cli("kafka-topics", "--describe", "--topic", topic)
    ctx.cli("kafka-topics", "--alter", "--topic", topic, "--partitions", "3")
    ctx.wait_topic(topic, 3)
    ctx.cli("kafka-topics", "--alter", "--topic", topic, "--partitions", "1")
    ctx.cli("kafka-topics", "--list", "--topic", topic)
    ctx.cli("kafka-topics", "--describe", "--topic", topic)
    ctx.cli("kafka-topics", "--delete", "--topic", topic)
    deadline = time.monotonic() + 30
    while topic in ctx.admin.list_topics(timeout=5).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    ctx.cli("kafka-topics", "--describe", "--topic", topic)


@scenario
def scenario_produce_consume(ctx: Context) -> None:
    """Produce keys, values, headers, null and empty fields and timestamps; fetch them back by offset."""
    topic = ctx.create_topic(ctx.name("t"), 3, RETAIN_FOREVER)
    records = [
        {"partition": 0, "key": b"k0", "value": b"v0", "timestamp": 1_700_000_000_000},
        {"partition": 0, "key": None, "value": b"no key", "timestamp": 1_700_000_000_001},
        {"partition": 0, "key": b"k2", "value": None, "timestamp": 1_700_000_000_002},
        {"partition": 0, "key": b"", "value": b"", "timestamp": 1_700_000_000_003,
         "headers": [("h1", b"a"), ("h1", b"b"), ("empty", b""), ("null", None)]},
        {"partition": 1, "key": b"k4", "value": b"x" * 1000, "timestamp": 1_600_000_000_000},
    ]
    ctx.produce(topic, records)
    # librdkafka's default partitioner (consistent_random: CRC32 of the key) is the client's choice:
    # the same keys land in the same partitions on any broker.
    ctx.produce(topic, [{"key": f"key-{i}".encode(), "value": f"by key {i}".encode(),
                         "timestamp": 1_700_000_001_000 + i} for i in range(6)])
    marks = {}
    for p in range(3):
        low, high = ctx.consumer().get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        marks[p] = (low, high)
        ctx.out(f"p{p} watermarks {low}..{high}")
    for p in range(3):
        ctx.consume(topic, p, OFFSET_BEGINNING, marks[p][1])
    ctx.consume(topic, 0, 2, marks[0][1] - 2)
    ctx.consume(topic, 0, OFFSET_END, 0)


@scenario
def scenario_compression(ctx: Context) -> None:
    """Batches in every codec librdkafka has, fetched back in order with consecutive offsets."""
    topic = ctx.create_topic(ctx.name("t"), 1, RETAIN_FOREVER)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        ctx.out(f"codec {codec}")
        ctx.produce(topic, [{"partition": 0, "key": f"{codec}-{i}".encode(), "value": (codec * 50).encode(),
                             "timestamp": 1_700_000_000_000 + i} for i in range(5)],
                    config={"compression.codec": codec, "linger.ms": 50}, quiet=True)
    ctx.consume(topic, 0, OFFSET_BEGINNING, 25,
                show=lambda m: f"p{m.partition()}@{m.offset()} key={m.key()!r} len={len(m.value())}")
    ctx.consume(topic, 0, 7, 18, show=lambda m: f"from 7: @{m.offset()} key={m.key()!r}")


@scenario
def scenario_produce_errors(ctx: Context) -> None:
    """Produce refusals: record too large, timestamp too new, LogAppendTime, acks=0 and acks=1."""
    small = ctx.create_topic(ctx.name("small"), 1, {"max.message.bytes": "1000"})
    ctx.produce(small, [{"partition": 0, "value": b"x" * 2000}], config={"linger.ms": 0})
    ctx.produce(small, [{"partition": 0, "value": b"fits"}], config={"linger.ms": 0})
    strict = ctx.create_topic(ctx.name("strict"), 1, {"message.timestamp.after.max.ms": "60000"})
    future = int(time.time() * 1000) + 3_600_000
    ctx.produce(strict, [{"partition": 0, "value": b"future", "timestamp": future}], config={"linger.ms": 0})
    ctx.produce(strict, [{"partition": 0, "value": b"old", "timestamp": 1000}], config={"linger.ms": 0})
    append = ctx.create_topic(ctx.name("append"), 1, {"message.timestamp.type": "LogAppendTime"})
    ctx.produce(append, [{"partition": 0, "value": b"stamped", "timestamp": 1000}])
    ctx.consume(append, 0, OFFSET_BEGINNING, 1)
    acks = ctx.create_topic(ctx.name("acks"), 1)
    ctx.produce(acks, [{"partition": 0, "value": b"acks0"}], config={"acks": 0})
    ctx.produce(acks, [{"partition": 0, "value": b"acks1"}], config={"acks": 1})
    ctx.produce(acks, [{"partition": 0, "value": b"idempotent"}], config={"enable.idempotence": True})
    ctx.consume(acks, 0, OFFSET_BEGINNING, 3, show=lambda m: f"@{m.offset()} {m.value()!r}")


@scenario
def scenario_list_offsets(ctx: Context) -> None:
    """ListOffsets (earliest, latest, max timestamp, by timestamp) before and after DeleteRecords."""
    topic = ctx.create_topic(ctx.name("t"), 2, RETAIN_FOREVER)
    ctx.produce(topic, [{"partition": 0, "value": f"r{i}".encode(), "timestamp": ts}
                        for i, ts in enumerate([1000, 3000, 2000, 4000, 4000, 5000])], config={"linger.ms": 0})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    specs = [("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
             ("max-timestamp", OffsetSpec.max_timestamp()), ("ts 2500", OffsetSpec.for_timestamp(2500)),
             ("ts 4000", OffsetSpec.for_timestamp(4000)), ("ts 9999", OffsetSpec.for_timestamp(9999))]

    def list_all(label: str) -> None:
        for name, spec in specs:
            for tp in (tp0, tp1):
                try:
                    r = ctx.admin.list_offsets({tp: spec}, request_timeout=T)[tp].result(timeout=T + 5)
                    ctx.out(f"{label} p{tp.partition} {name}: offset={r.offset} ts={r.timestamp}")
                except KafkaException as e:
                    ctx.out(f"{label} p{tp.partition} {name}:", error_text(e))

    list_all("before")
    for before in (TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 0)):
        try:
            r = ctx.admin.delete_records([before], request_timeout=T)[before].result(timeout=T + 5)
            ctx.out(f"delete records p{before.partition} before {before.offset}: low watermark {r.low_watermark}")
        except KafkaException as e:
            ctx.out(f"delete records p{before.partition} before {before.offset}:", error_text(e))
    past = TopicPartition(topic, 0, 99)
    try:
        ctx.admin.delete_records([past], request_timeout=T)[past].result(timeout=T + 5)
        ctx.out("delete records before 99: ok")
    except KafkaException as e:
        ctx.out("delete records before 99:", error_text(e))
    list_all("after")
    ctx.out("watermarks p0", ctx.consumer().get_watermark_offsets(tp0, timeout=10))
    ctx.cli("kafka-get-offsets", "--topic", topic, "--time", "-1", sort=True)
    ctx.cli("kafka-get-offsets", "--topic", topic, "--time", "-2", sort=True)
    ctx.cli("kafka-get-offsets", "--topic", topic, "--time", "-3", sort=True)
    ctx.cli("kafka-get-offsets", "--topic", topic, "--time", "2500", sort=True)
    ctx.cli("kafka-get-offsets", "--topic-partitions", f"{topic}:0", "--time", "earliest")


@scenario
def scenario_fetch_positions(ctx: Context) -> None:
    """Fetch from inside a batch, past the end, below the log start, with each auto.offset.reset."""
    topic = ctx.create_topic(ctx.name("t"), 1, RETAIN_FOREVER)
    ctx.produce(topic, [{"partition": 0, "value": f"r{i}".encode(), "timestamp": 1_700_000_000_000 + i}
                        for i in range(6)], config={"linger.ms": 100}, quiet=True)
    tp = TopicPartition(topic, 0, 3)
    ctx.admin.delete_records([tp], request_timeout=T)[tp].result(timeout=T + 5)
    show = lambda m: f"@{m.offset()} {m.value()!r}"  # noqa: E731
    ctx.out("from 4 (inside the batch):")
    ctx.consume(topic, 0, 4, 2, show=show)
    ctx.out("from 1 (below the log start), reset=error:")
    ctx.consume(topic, 0, 1, 0, show=show)
    ctx.out("from 1, reset=earliest:")
    ctx.consume(topic, 0, 1, 3, show=show, config={"auto.offset.reset": "earliest"})
    ctx.out("from 1, reset=latest:")
    ctx.consume(topic, 0, 1, 0, show=show, config={"auto.offset.reset": "latest"})
    ctx.out("from 10 (past the end), reset=error:")
    ctx.consume(topic, 0, 10, 0, show=show)
    ctx.out("from 10, reset=earliest:")
    ctx.consume(topic, 0, 10, 3, show=show, config={"auto.offset.reset": "earliest"})
    ctx.out("from 6 (the end), reset=error:")
    ctx.consume(topic, 0, 6, 0, show=show)


@scenario
def scenario_metadata(ctx: Context) -> None:
    """Metadata: unknown topics with and without auto-creation, the cluster, kafka-python's view."""
    topic = ctx.create_topic(ctx.name("t"), 2)
    unknown, auto = ctx.name("unknown"), ctx.name("auto")
    def show(t) -> str:
        partitions = sorted(t.partitions, key=lambda p: p.partition_index)
        parts = ", ".join(f"p{p.partition_index} err={p.error_code} leader={ctx.norm.node(p.leader_id)} "
                          f"replicas={[ctx.norm.node(r) for r in p.replica_nodes]} "
                          f"isr={[ctx.norm.node(r) for r in p.isr_nodes]} offline={p.offline_replicas}"
                          for p in partitions)
        # Leader epochs last, so the intended difference on them (the broker's term) leaves the rest compared.
        epochs = [p.leader_epoch for p in partitions]
        return (f"{t.name} error={t.error_code} id={ctx.norm.topic_id(t.topic_id)} internal={t.is_internal} "
                f"[{parts}] epochs={epochs}")

    for answer in kafka_raw.metadata(ctx.bootstrap, [topic, unknown], allow_auto_create=False):
        ctx.out("metadata v12 no auto-create:", show(answer))
    cluster = ctx.admin.describe_cluster(request_timeout=T).result(timeout=T + 5)
    ctx.out(f"cluster id={ctx.norm.cluster_id(cluster.cluster_id)} controller={ctx.norm.node(cluster.controller.id)} "
            f"nodes={[(ctx.norm.node(n.id), f'{n.host}:{n.port}') for n in cluster.nodes]}")
    # The first answer for an auto-created topic (intended difference: Kafgres answers it at once).
    ctx.out("metadata v12 auto-create, first answer:",
            show(kafka_raw.metadata(ctx.bootstrap, [auto], allow_auto_create=True)[0]))
    ctx.wait_topic(auto, 1)
    ctx.out("metadata v12 auto-create, once created:",
            show(kafka_raw.metadata(ctx.bootstrap, [auto], allow_auto_create=True)[0]))
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        ctx.out("kafka-python partitions_for_topic:", sorted(c.partitions_for_topic(topic) or []))
        parts = [KTP(topic, 0), KTP(topic, 1)]
        ctx.out("kafka-python beginning_offsets:", sorted((p.partition, o) for p, o in c.beginning_offsets(parts).items()))
        ctx.out("kafka-python end_offsets:", sorted((p.partition, o) for p, o in c.end_offsets(parts).items()))
    finally:
        c.close()


@scenario
def scenario_kafka_python_clients(ctx: Context) -> None:
    """kafka-python's producer (gzip, keys, headers) and assign consumer, and its admin client's errors."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.admin import NewTopic as KNewTopic

    topic = ctx.name("t")
    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([KNewTopic(topic, 2, 1, topic_configs=RETAIN_FOREVER)])
        ctx.out("kafka-python create: ok")
        try:
            admin.create_topics([KNewTopic(topic, 2, 1)])
            ctx.out("kafka-python create again: ok")
        except Exception as e:  # noqa: BLE001  (the error class is what is compared)
            ctx.out("kafka-python create again:", type(e).__name__)
        ctx.wait_topic(topic, 2)
        described = admin.describe_topics([topic])
        for t in described:
            ctx.out(f"kafka-python describe {t['name']} error={t['error_code']} internal={t['is_internal']} "
                    f"partitions={sorted(p['partition_index'] for p in t['partitions'])} "
                    f"authorized_operations={t.get('authorized_operations')}")
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=ctx.bootstrap, compression_type="gzip", acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                                 headers=[("n", str(i).encode())], timestamp_ms=1_700_000_000_000 + i)
                   for i in range(6)]
        for i, f in enumerate(futures):
            md = f.get(timeout=20)
            ctx.out(f"kafka-python produced #{i} p{md.partition}@{md.offset}")
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=ctx.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        consumer.assign([KTP(topic, 0), KTP(topic, 1)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        for r in sorted(got, key=lambda r: (r.partition, r.offset)):
            ctx.out(f"kafka-python fetched p{r.partition}@{r.offset} key={r.key!r} value={r.value!r} "
                    f"headers={list(r.headers)!r} ts={r.timestamp} type={r.timestamp_type}")
    finally:
        consumer.close()


@scenario
def scenario_api_versions(ctx: Context) -> None:
    """ApiVersions: the version ranges of the APIs Kafgres serves, on both brokers."""
    apis = kafka_raw.api_versions(ctx.bootstrap)
    for key in sorted(kafka_raw.SERVED_API_KEYS):
        low, high = apis.get(key, (None, None))
        ctx.out(f"api {key} {kafka_raw.API_NAMES[key]}:", f"{low}..{high}" if low is not None else "not served")
    ctx.out("other apis:", sorted(set(apis) - kafka_raw.SERVED_API_KEYS))


@scenario
def scenario_acls_without_an_authorizer(ctx: Context) -> None:
    """The ACL APIs on a broker without an authorizer (both run without one): SECURITY_DISABLED, as
    MirrorMaker 2's ACL sync expects."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    topic = ctx.name("acl")
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    _results(ctx, "create acl", {"binding": ctx.admin.create_acls([binding], request_timeout=T)[binding]})
    _results(ctx, "describe acls", {"every": ctx.admin.describe_acls(every, request_timeout=T)})
    _results(ctx, "delete acls", {"every": ctx.admin.delete_acls([every], request_timeout=T)[every]})


@scenario
def scenario_transactions(ctx: Context) -> None:
    """A transactional producer: init, commit, abort; read_committed sees only the commit."""
    from confluent_kafka import Producer

    topic = ctx.create_topic(ctx.name("t"), 1)
    txn = ctx.name("txn", kind="txn")
    p = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": txn, "transaction.timeout.ms": 10000,
                  "message.timeout.ms": 10000})
    try:
        p.init_transactions(8)
        ctx.out("init_transactions: ok")
    except KafkaException as e:
        ctx.out("init_transactions:", error_text(e, message=False))
        return
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.abort_transaction(10)
    ctx.out("transactions: committed and aborted")
    ctx.consume(topic, 0, OFFSET_BEGINNING, 1, config={"isolation.level": "read_committed"},
                show=lambda m: f"read_committed @{m.offset()} {m.value()!r}")


@scenario
def scenario_java_transactions(ctx: Context) -> None:
    """Exactly-once consume-transform-produce with the Java client 4.4 (tests/java's probe, `transactions`),
    which both brokers serve at transaction version 2 (KIP-890: no AddPartitionsToTxn, the epoch bumped at
    each end), where librdkafka's producer above stays at version 1: an aborted transaction, each poll's
    output and offsets in one transaction, a fenced old producer, what read_committed and read_uncommitted
    readers see and the group's committed offsets."""
    name = ctx.name("eos")
    for tag in ("eos-in", "eos-out"):
        ctx.name(tag)
    ctx.name("eos-group", kind="group")
    ctx.name("eos-tx", kind="txn")
    ctx.cli("kafgres-probe", "transactions", name, timeout_s=150.0)


@scenario
def scenario_console_tools(ctx: Context) -> None:
    """kafka-console-producer (keys, acks=all, gzip) and kafka-console-consumer (from the beginning,
    keys, partitions, offsets, headers; read_committed), as a shell user would run them."""
    topic = ctx.create_topic(ctx.name("t"), 2)
    ctx.cli("kafka-console-producer", "--topic", topic, "--producer-property", "acks=all",
            "--compression-codec", "gzip", "--property", "parse.key=true", "--property", "key.separator=:",
            stdin="k1:first\nk2:second\nk1:third\n")
    ctx.cli("kafka-console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "3",
            "--timeout-ms", "20000", "--isolation-level", "read_committed",
            "--property", "print.key=true", "--property", "print.partition=true",
            "--property", "print.offset=true", "--property", "print.headers=true", sort=True)
    ctx.cli("kafka-console-consumer", "--topic", topic, "--partition", "1", "--offset", "1",
            "--max-messages", "1", "--timeout-ms", "20000", "--property", "print.key=true")
