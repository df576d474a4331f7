"""Consumer groups with librdkafka's classic protocol.

Two consumers subscribed in one group split a 6-partition topic; when one
closes, the other takes every partition; committed offsets are stored in
`kafgres.consumer_offsets`, survive a restart, and a new member of the group
resumes right after them.
"""

import time

from confluent_kafka import TopicPartition

from support import produce_all

PARTITIONS = 6


def group_consumer(make_consumer, group: str, **extra):
    config = {
        "group.id": group,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    config.update(extra)
    return make_consumer(config)


def poll_until(consumers, done, timeout_s: float):
    """Polls every consumer until done() holds; returns records per consumer."""
    received = {id(c): [] for c in consumers}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and not msg.error():
                received[id(c)].append(msg)
        if done(received):
            return received
    raise AssertionError(f"timed out; received {[len(v) for v in received.values()]}, assignments {[c.assignment() for c in consumers]}")


def test_two_consumers_split_then_one_takes_over(make_producer, make_consumer, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=PARTITIONS)
    group = topic_name("group")
    a = group_consumer(make_consumer, group)
    b = group_consumer(make_consumer, group)
    a.subscribe([name])
    b.subscribe([name])

    def both_assigned(_):
        return len(a.assignment()) + len(b.assignment()) == PARTITIONS and a.assignment() and b.assignment()

    poll_until([a, b], both_assigned, 30)
    assigned_a = {tp.partition for tp in a.assignment()}
    assigned_b = {tp.partition for tp in b.assignment()}
    assert assigned_a.isdisjoint(assigned_b)
    assert assigned_a | assigned_b == set(range(PARTITIONS))
    assert len(assigned_a) == len(assigned_b) == PARTITIONS // 2

    produce_all(make_producer(), [dict(topic=name, partition=p, value=b"v%d" % p) for p in range(PARTITIONS)])
    got = poll_until([a, b], lambda r: sum(len(v) for v in r.values()) == PARTITIONS, 30)
    assert {m.partition() for m in got[id(a)]} == assigned_a
    assert {m.partition() for m in got[id(b)]} == assigned_b

    b.close()
    poll_until([a], lambda _: len(a.assignment()) == PARTITIONS, 30)
    a.close()


def test_committed_offsets_are_stored_and_resumed_after_restart(
    kafgres, psql, make_producer, make_consumer, create_topic, topic_name
):
    name = create_topic(topic_name(), partitions=1)
    group = topic_name("group")
    produce_all(make_producer(), [dict(topic=name, partition=0, value=b"r%d" % i) for i in range(10)])

    first = group_consumer(make_consumer, group)
    first.subscribe([name])
    got = poll_until([first], lambda r: len(r[id(first)]) >= 4, 30)[id(first)]
    fourth = got[3]
    first.commit(offsets=[TopicPartition(name, 0, fourth.offset() + 1)], asynchronous=False)
    assert psql.rows(
        "select committed_offset from kafgres.consumer_offsets where group_id = :'g' and topic = :'t' and partition = 0",
        g=group,
        t=name,
    ) == [["4"]]
    first.close()

    kafgres.launcher("restart")

    second = group_consumer(make_consumer, group)
    committed = second.committed([TopicPartition(name, 0)], timeout=20)
    assert committed[0].offset == 4
    second.subscribe([name])
    resumed = poll_until([second], lambda r: len(r[id(second)]) >= 6, 40)[id(second)]
    assert [m.offset() for m in resumed[:6]] == list(range(4, 10))
    second.close()
