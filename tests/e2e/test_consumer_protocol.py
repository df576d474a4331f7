"""The consumer group protocol of KIP-848 (`group.protocol=consumer`), where the
broker computes the assignment, with real clients:

- librdkafka: two members split a 6-partition topic 3/3; when one closes the
  other takes all six; a new member resumes after the committed offsets.
- The Java client (kafka-clients 4.1, tests/java's `consumer-protocol`
  scenario): three members join one by one, each join revokes exactly what
  moves; one leaves; every record is read once with OffsetCommit v9 carrying
  the member epoch; the Admin client describes the group through
  ConsumerGroupDescribe.
- kafka-consumer-groups on a consumer-protocol group: --describe (offsets,
  --members with epochs and assignments, --state), --list --type, --delete
  refused while a member is in and accepted once it left.

Members learn of a new assignment at their next heartbeat, so a rebalance
takes up to `kafgres.group_consumer_heartbeat_interval_ms` (5 s, as Kafka's
default); the deadlines below allow several.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from support import produce_all
from test_java_client import java_build, ok, probe, run_java, table  # noqa: F401 (java_build is a fixture)

PARTITIONS = 6
REBALANCE_TIMEOUT_S = 30.0


def member(bootstrap: str, group: str, **config) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **config,
    })


def partitions(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(consumers: list[Consumer], done, what: str, records: list | None = None) -> None:
    deadline = time.monotonic() + REBALANCE_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"not within {REBALANCE_TIMEOUT_S:.0f} s: {what}; " + ", ".join(
            f"{sorted(partitions(c))}" for c in consumers)
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                if records is not None:
                    records.append((msg.partition(), msg.offset()))
                c.commit(message=msg, asynchronous=False)


def test_librdkafka_members_split_take_over_and_resume(bootstrap, create_topic, make_producer, topic_name):
    topic = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    produce_all(make_producer(), [dict(topic=topic, partition=p, value=b"first") for p in range(PARTITIONS)])

    a, b = member(bootstrap, group), member(bootstrap, group)
    records: list[tuple[int, int]] = []
    try:
        a.subscribe([topic])
        poll_until([a], lambda: partitions(a) == set(range(PARTITIONS)), "a owns all", records)
        b.subscribe([topic])
        poll_until([a, b], lambda: len(partitions(a)) == 3 and len(partitions(b)) == 3, "3 each", records)
        assert partitions(a).isdisjoint(partitions(b))
        poll_until([a, b], lambda: len(set(records)) >= PARTITIONS, "the first records", records)
        b.close()
        poll_until([a], lambda: partitions(a) == set(range(PARTITIONS)), "a takes b's partitions", records)
    finally:
        a.close()
    assert sorted(set(records)) == [(p, 0) for p in range(PARTITIONS)]
    assert len(records) == len(set(records)), f"a record was read twice: {records}"

    produce_all(make_producer(), [dict(topic=topic, partition=p, value=b"second") for p in range(PARTITIONS)])
    c = member(bootstrap, group)
    resumed: list[tuple[int, int]] = []
    try:
        c.subscribe([topic])
        poll_until([c], lambda: len(resumed) >= PARTITIONS, "the second records", resumed)
    finally:
        c.close()
    assert sorted(resumed) == [(p, 1) for p in range(PARTITIONS)], "resumed after the committed offsets"


def test_java_consumer_protocol(java_build, bootstrap, topic_name):  # noqa: F811
    assert probe("consumer-protocol", bootstrap, topic_name("java")) == [
        "a alone: owns 6 partitions",
        "b joins: a revoked exactly what b owns (3), kept 3",
        "c joins: 2 partitions each, lost 0",
        "described: type=Consumer state=Stable members=3 assignor=uniform",
        "described assignments cover 6 partitions",
        "first records: 30 read, 30 distinct",
        "b leaves: a and c own 3 each",
        "d resumes after the commits: 30 records, 30 of the second batch",
        "after close: state=Empty members=0",
    ]


def test_consumer_groups_cli_on_a_consumer_protocol_group(
    java_build, bootstrap, admin, create_topic, make_producer, topic_name  # noqa: F811
):
    topic = create_topic(topic_name(), partitions=3)
    group = topic_name("group")
    produce_all(make_producer(), [dict(topic=topic, partition=0, value=b"v") for _ in range(5)])
    consumer = member(bootstrap, group)
    consumer.subscribe([topic])
    poll_until([consumer], lambda: len(partitions(consumer)) == 3, "one member owns all")
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)

    tool = ("kafka-consumer-groups", "--bootstrap-server", bootstrap)
    described = table(ok(run_java(*tool, "--describe", "--group", group)))
    assert {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in described} == {
        0: ("4", "5", "1"), 1: ("-", "0", "-"), 2: ("-", "0", "-")}
    [member_id] = {r["CONSUMER-ID"] for r in described}
    assert len(member_id) == 22, f"librdkafka makes a base64 uuid member id (KIP-1082): {member_id}"
    verbose = table(ok(run_java(*tool, "--describe", "--group", group, "--members", "--verbose")))
    assert verbose == [{
        "GROUP": group, "CONSUMER-ID": member_id, "HOST": "/127.0.0.1", "CLIENT-ID": "rdkafka",
        "#PARTITIONS": "3", "CURRENT-EPOCH": "1", "CURRENT-ASSIGNMENT": f"{topic}:0,1,2",
        "TARGET-EPOCH": "1", "TARGET-ASSIGNMENT": f"{topic}:0,1,2"}]
    [state] = table(ok(run_java(*tool, "--describe", "--group", group, "--state")))
    assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == ("uniform", "Stable", "1")
    listed = table(ok(run_java(*tool, "--list", "--type", "consumer")))
    assert {"GROUP": group, "TYPE": "Consumer"} in listed
    refused = run_java(*tool, "--delete", "--group", group)
    assert "GroupNotEmptyException" in refused.stdout + refused.stderr

    consumer.close()
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert (str(description.type), str(description.state), len(description.members)) == (
        "ConsumerGroupType.CONSUMER", "ConsumerGroupState.EMPTY", 0)
    deleted = ok(run_java(*tool, "--delete", "--group", group))
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
