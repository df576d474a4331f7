"""Scenarios of classic consumer groups (see framework.py).

Member ids are random (`<client.id>-<uuid>`) and the range assignor orders
members by id, so which member gets which partitions is not deterministic:
transcripts show the multiset of assignments, and members by client id.
"""

from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription

from framework import ADMIN_TIMEOUT_S, RETAIN_FOREVER, WAIT_TIMEOUT_S, Context, error_text, scenario

T = ADMIN_TIMEOUT_S
GROUP_DEFAULTS = {
    "partition.assignment.strategy": "range",
    "session.timeout.ms": 10000,
    "heartbeat.interval.ms": 500,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "enable.auto.offset.store": True,  # commit() without offsets commits what was consumed
}


def group_consumer(ctx: Context, group: str, client_id: str, config: dict | None = None):
    return ctx.consumer({"group.id": group, "client.id": client_id, **GROUP_DEFAULTS, **(config or {})})


def poll_until(consumers: list, done, timeout_s: float = WAIT_TIMEOUT_S) -> list:
    """Polls every consumer in turn until done(records) or the deadline; returns the records."""
    records: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done(records):
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                records.append(msg)
    return records


def assignments(consumers: list) -> list[list[int]]:
    return sorted(sorted(tp.partition for tp in c.assignment()) for c in consumers)


def wait_assigned(consumers: list, total: int, timeout_s: float = WAIT_TIMEOUT_S) -> list:
    """Polls until every consumer has partitions and they add up to `total`; returns records read meanwhile."""
    def done(_records) -> bool:
        parts = assignments(consumers)
        return all(parts) and sum(len(p) for p in parts) == total

    return poll_until(consumers, done, timeout_s)


def describe_group(ctx: Context, group: str) -> None:
    try:
        d: ConsumerGroupDescription = ctx.admin.describe_consumer_groups(
            [group], request_timeout=T)[group].result(timeout=T + 5)
    except KafkaException as e:
        ctx.out(f"describe {group}:", error_text(e))
        return
    ctx.out(f"describe {d.group_id}: state={d.state.name} type={d.type.name} simple={d.is_simple_consumer_group} "
            f"assignor={d.partition_assignor!r} coordinator={ctx.norm.node(d.coordinator.id if d.coordinator else None)}")
    members = sorted(d.members, key=lambda m: (m.client_id, sorted(tp.partition for tp in m.assignment.topic_partitions)))
    for m in members:
        parts = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        ctx.out(f"  member {m.member_id} client_id={m.client_id} host={m.host} "
                f"instance={m.group_instance_id} partitions={len(parts)}")
    ctx.out(f"  assignments: {sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in members)}")


def committed(ctx: Context, group: str, topic: str, partitions: int) -> None:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    try:
        result = ctx.admin.list_consumer_group_offsets([request], request_timeout=T)[group].result(timeout=T + 5)
    except KafkaException as e:
        ctx.out(f"committed {group}:", error_text(e))
        return
    ctx.out(f"committed {group}:", [(tp.partition, tp.offset, tp.metadata,
                                     error_text(tp.error, message=False) if tp.error else None)
                                    for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)])


def fill(ctx: Context, topic: str, partitions: int, per_partition: int) -> None:
    ctx.produce(topic, [{"partition": p, "key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode(),
                         "timestamp": 1_700_000_000_000 + i}
                        for p in range(partitions) for i in range(per_partition)], quiet=True)


def records_text(records: list) -> list[str]:
    return sorted(f"p{m.partition()}@{m.offset()}" for m in records)


@scenario
def scenario_group_join_split(ctx: Context) -> None:
    """Two members split four partitions, both consume, one leaves and the other takes all; describe at each step.

    Records are produced only once the membership is settled, so which
    records each member reads does not depend on how fast a rebalance is.
    """
    topic = ctx.create_topic(ctx.name("t"), 4, RETAIN_FOREVER)
    group = ctx.name("g", kind="group")
    a = group_consumer(ctx, group, "member-a")
    a.subscribe([topic])
    wait_assigned([a], 4)
    ctx.out("one member:", assignments([a]))
    b = group_consumer(ctx, group, "member-b")
    b.subscribe([topic])
    wait_assigned([a, b], 4)
    ctx.out("two members:", assignments([a, b]))
    describe_group(ctx, group)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--members", sort=True)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--state")
    fill(ctx, topic, 4, 1)
    by_member = {id(a): [], id(b): []}
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while sum(map(len, by_member.values())) < 4 and time.monotonic() < deadline:
        for c in (a, b):
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                by_member[id(c)].append(f"p{msg.partition()}@{msg.offset()}")
    ctx.out("read by each member:", sorted(sorted(r) for r in by_member.values()))
    for c in (a, b):
        c.commit(asynchronous=False)
    committed(ctx, group, topic, 4)
    b.close()
    wait_assigned([a], 4)
    ctx.out("after member-b left:", assignments([a]))
    fill(ctx, topic, 4, 1)
    rest = poll_until([a], lambda r: len(r) >= 4, timeout_s=15)
    ctx.out("member-a read after the rebalance:", records_text(rest))
    a.commit(asynchronous=False)
    describe_group(ctx, group)
    committed(ctx, group, topic, 4)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, sort=True)
    a.close()
    describe_group(ctx, group)


@scenario
def scenario_group_commit_resume(ctx: Context) -> None:
    """Commit specific offsets with metadata, leave, and resume from them in a new member."""
    topic = ctx.create_topic(ctx.name("t"), 2, RETAIN_FOREVER)
    group = ctx.name("g", kind="group")
    fill(ctx, topic, 2, 3)
    first = group_consumer(ctx, group, "first")
    first.subscribe([topic])
    got = poll_until([first], lambda r: len(r) >= 6)
    ctx.out("first read:", records_text(got))
    first.commit(offsets=[TopicPartition(topic, 0, 2, metadata="meta-0"), TopicPartition(topic, 1, 1)],
                 asynchronous=False)
    ctx.out("first committed:", [(tp.partition, tp.offset) for tp in first.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)])
    first.close()
    describe_group(ctx, group)
    committed(ctx, group, topic, 2)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, sort=True)
    second = group_consumer(ctx, group, "second")
    second.subscribe([topic])
    resumed = poll_until([second], lambda r: len(r) >= 3)
    ctx.out("second read:", sorted(f"p{m.partition()}@{m.offset()} {m.value()!r}" for m in resumed))
    second.commit(asynchronous=False)
    committed(ctx, group, topic, 2)
    stale = TopicPartition(topic, 5, 1)
    try:
        second.commit(offsets=[stale], asynchronous=False)
        ctx.out("commit to a partition that does not exist: ok")
    except KafkaException as e:
        ctx.out("commit to a partition that does not exist:", error_text(e, message=False))
    second.close()


@scenario
def scenario_group_admin(ctx: Context) -> None:
    """List, describe and delete groups and their offsets, with the refusals for active and unknown groups."""
    topic = ctx.create_topic(ctx.name("t"), 2, RETAIN_FOREVER)
    other = ctx.create_topic(ctx.name("other"), 1, RETAIN_FOREVER)
    group, unknown = ctx.name("g", kind="group"), ctx.name("nogroup", kind="group")
    fill(ctx, topic, 2, 2)
    fill(ctx, other, 1, 2)
    c = group_consumer(ctx, group, "admin-member")
    c.subscribe([topic])
    wait_assigned([c], 2)
    c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 2), TopicPartition(other, 0, 1)],
             asynchronous=False)

    def listed() -> None:
        result = ctx.admin.list_consumer_groups(request_timeout=T).result(timeout=T + 5)
        mine = sorted((g.group_id, g.state.name, g.type.name, g.is_simple_consumer_group)
                      for g in result.valid if g.group_id in (group, unknown))
        ctx.out("listed:", mine, "errors:", [error_text(e) for e in result.errors])

    listed()
    describe_group(ctx, unknown)
    for label, groups in (("delete active", [group]), ("delete unknown", [unknown])):
        for g, f in ctx.admin.delete_consumer_groups(groups, request_timeout=T).items():
            try:
                f.result(timeout=T + 5)
                ctx.out(f"{label} {g}: ok")
            except KafkaException as e:
                ctx.out(f"{label} {g}:", error_text(e, message=False))
    ctx.cli("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", topic, sort=True)
    ctx.cli("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", other, sort=True)
    committed(ctx, group, other, 1)
    def alter_offsets(label: str) -> None:
        alter = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
        try:
            r = ctx.admin.alter_consumer_group_offsets([alter], request_timeout=T)[group].result(timeout=T + 5)
            ctx.out(f"{label}:", [(tp.partition, tp.offset, error_text(tp.error, message=False) if tp.error else None)
                                  for tp in r.topic_partitions])
        except KafkaException as e:
            ctx.out(f"{label}:", error_text(e, message=False))

    alter_offsets("alter offsets of an active group")
    c.close()
    listed()
    alter_offsets("alter offsets of an empty group")
    committed(ctx, group, topic, 2)
    ctx.cli("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", f"{topic}:1", sort=True)
    committed(ctx, group, topic, 2)
    ctx.cli("kafka-consumer-groups", "--delete", "--group", group)
    ctx.cli("kafka-consumer-groups", "--delete", "--group", unknown)
    describe_group(ctx, group)
    listed()


@scenario
def scenario_group_reset_offsets(ctx: Context) -> None:
    """kafka-consumer-groups --reset-offsets in each mode, dry run and executed, refused while members are active."""
    topic = ctx.create_topic(ctx.name("t"), 2, RETAIN_FOREVER)
    group = ctx.name("g", kind="group")
    ctx.produce(topic, [{"partition": p, "value": f"v{p}-{i}".encode(), "timestamp": 1_700_000_000_000 + 1000 * i}
                        for p in range(2) for i in range(5)], quiet=True)
    c = group_consumer(ctx, group, "resetter")
    c.subscribe([topic])
    wait_assigned([c], 2)
    c.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 2)], asynchronous=False)
    base = ("kafka-consumer-groups", "--group", group, "--reset-offsets")
    ctx.cli(*base, "--topic", topic, "--to-earliest", "--execute", sort=True)
    c.close()
    ctx.cli(*base, "--topic", topic, "--to-earliest", "--dry-run", sort=True)
    committed(ctx, group, topic, 2)
    ctx.cli(*base, "--topic", topic, "--to-earliest", "--execute", sort=True)
    ctx.cli(*base, "--topic", topic, "--to-latest", "--execute", sort=True)
    ctx.cli(*base, "--topic", f"{topic}:0", "--to-offset", "2", "--execute", sort=True)
    ctx.cli(*base, "--topic", topic, "--shift-by", "-1", "--execute", sort=True)
    ctx.cli(*base, "--topic", topic, "--to-offset", "99", "--execute", sort=True)
    ctx.cli(*base, "--topic", topic, "--to-datetime", "2023-11-14T22:13:22.000", "--execute", sort=True)
    ctx.cli(*base, "--all-topics", "--to-earliest", "--dry-run", sort=True)
    committed(ctx, group, topic, 2)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--offsets", sort=True)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--state")
    ctx.cli("kafka-consumer-groups", "--describe", "--group", ctx.name("nogroup", kind="group"))


@scenario
def scenario_group_protocol(ctx: Context) -> None:
    """The classic group requests by hand (kafka-python's codec): each error a member can get."""
    import kafka_groups

    group = ctx.name("g", kind="group")
    topic = ctx.create_topic(ctx.name("t"), 1)
    for line in kafka_groups.walk(ctx.bootstrap, group, topic, ctx.norm):
        ctx.out(line)


@scenario
def scenario_static_membership(ctx: Context) -> None:
    """Static members (group.instance.id): described with their instance id, kept across a restart."""
    topic = ctx.create_topic(ctx.name("t"), 2, RETAIN_FOREVER)
    group = ctx.name("g", kind="group")
    fill(ctx, topic, 2, 1)
    static = {"group.instance.id": "instance-1", "session.timeout.ms": 30000}
    a = group_consumer(ctx, group, "static-a", static)
    a.subscribe([topic])
    wait_assigned([a], 2)
    describe_group(ctx, group)
    a.close()  # a static member does not leave the group on close
    describe_group(ctx, group)
    again = group_consumer(ctx, group, "static-a2", static)
    again.subscribe([topic])
    wait_assigned([again], 2)
    ctx.out("rejoined:", assignments([again]))
    describe_group(ctx, group)
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--members", "--verbose", sort=True)
    again.close()
    ctx.cli("kafka-consumer-groups", "--delete", "--group", group)


@scenario
def scenario_consumer_protocol(ctx: Context) -> None:
    """KIP-848 (`group.protocol=consumer`): the broker assigns; two members split four partitions, one leaves.

    Which partitions each member gets is the assignor's choice (Kafka's and
    Kafgres's `uniform` give the same guarantees, not necessarily the same
    partitions), so members' shares are shown as counts.
    """
    topic = ctx.create_topic(ctx.name("t"), 4, RETAIN_FOREVER)
    group = ctx.name("g", kind="group")
    config = {"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "enable.auto.offset.store": True}
    a = ctx.consumer({**config, "client.id": "member-a"})
    a.subscribe([topic])
    wait_assigned([a], 4)
    ctx.out("one member:", assignments([a]))
    b = ctx.consumer({**config, "client.id": "member-b"})
    b.subscribe([topic])
    wait_assigned([a, b], 4)
    ctx.out("two members, shares:", sorted(len(p) for p in assignments([a, b])))
    describe_consumer_protocol(ctx, group)
    fill(ctx, topic, 4, 1)
    read = poll_until([a, b], lambda r: len(r) >= 4)
    ctx.out("read by the two:", records_text(read))
    for c in (a, b):
        c.commit(asynchronous=False)
    committed(ctx, group, topic, 4)
    b.close()
    wait_assigned([a], 4)
    ctx.out("after member-b left:", assignments([a]))
    ctx.cli("kafka-consumer-groups", "--describe", "--group", group, "--state")
    a.close()
    describe_consumer_protocol(ctx, group)
    listed = ctx.cli("kafka-consumer-groups", "--list", "--type", "consumer", "--state", "Empty", show=False)
    ctx.out("listed (consumer, Empty):", [line for line in listed if line.startswith(group + " ")])


def describe_consumer_protocol(ctx: Context, group: str) -> None:
    d: ConsumerGroupDescription = ctx.admin.describe_consumer_groups(
        [group], request_timeout=T)[group].result(timeout=T + 5)
    shares = sorted(len(m.assignment.topic_partitions) for m in d.members)
    ctx.out(f"describe {d.group_id}: state={d.state.name} type={d.type.name} assignor={d.partition_assignor!r} "
            f"members={len(d.members)} shares={shares} clients={sorted(m.client_id for m in d.members)}")
