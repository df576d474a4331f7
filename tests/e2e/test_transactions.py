"""Kafka transactions with real clients.

- librdkafka (confluent-kafka): a flushed transaction that aborts and one that
  commits; read_committed readers see only the committed records, in order,
  read_uncommitted readers see both; the last stable offset holds
  read_committed readers back while a transaction is open; exactly-once
  consume-transform-produce with send_offsets_to_transaction (the group's
  offsets become visible only at commit); a second producer with the same
  transactional.id fences the first.
- The Java client (kafka-clients 4.1, tests/java's `transactions` scenario):
  the same consume-transform-produce loop with sendOffsetsToTransaction,
  an aborted transaction, and fencing, in transaction version 2 (KIP-890
  part 2: no AddPartitionsToTxn or AddOffsetsToTxn, the epoch bumped at every
  end), which ApiVersions finalizes.
- Transactions survive a restart of the broker: a transactional id keeps its
  producer id, and its epoch moves on.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from support import produce_all
from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)

TIMEOUT_S = 30


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[int, str]]:
    """Every record of `topic` a reader at `isolation` sees, as (partition, value), until each partition's end."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"e2e-txn-reader-{uuid.uuid4().hex[:8]}",
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen, at_end = [], set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} ({isolation}): only partitions {at_end} ended"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            seen.append((msg.partition(), msg.value().decode()))
        return seen
    finally:
        consumer.close()


def test_librdkafka_commit_abort_and_read_committed(bootstrap, create_topic, topic_name):
    topic = create_topic(topic_name(), partitions=2)
    producer = transactional(bootstrap, topic_name("tx"))
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)

    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    producer.flush(TIMEOUT_S)
    # Open and flushed: read_committed readers stop before it.
    assert read_all(bootstrap, topic, 2, "read_committed") == []
    producer.commit_transaction(TIMEOUT_S)

    committed = read_all(bootstrap, topic, 2, "read_committed")
    assert sorted(committed) == sorted((i % 2, f"committed-{i}") for i in range(6))
    for p in (0, 1):
        values = [v for q, v in committed if q == p]
        assert values == sorted(values, key=lambda v: int(v.split("-")[1])), "in order per partition"
    uncommitted = read_all(bootstrap, topic, 2, "read_uncommitted")
    assert sorted(v for _, v in uncommitted) == sorted([f"aborted-{i}" for i in range(4)]
                                                       + [f"committed-{i}" for i in range(6)])


def test_librdkafka_exactly_once_consume_transform_produce(bootstrap, create_topic, make_producer, topic_name):
    source = create_topic(topic_name("in"), partitions=2)
    sink = create_topic(topic_name("out"), partitions=2)
    group = topic_name("group")
    produce_all(make_producer(), [dict(topic=source, partition=i % 2, value=b"v%d" % i) for i in range(10)])

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    producer = transactional(bootstrap, topic_name("tx"))
    processed = 0
    try:
        consumer.subscribe([source])
        deadline = time.monotonic() + TIMEOUT_S
        while processed < 10:
            assert time.monotonic() < deadline, f"processed {processed} of 10"
            msgs = [m for m in consumer.consume(10, 0.5) if m.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, value=m.value().upper(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
            committed_before = {tp.partition: tp.offset for tp in consumer.committed(consumer.assignment(), 10)}
            assert all(o < 0 or o <= 5 for o in committed_before.values())
            producer.commit_transaction(TIMEOUT_S)
            processed += len(msgs)
    finally:
        consumer.close()
    assert sorted(v for _, v in read_all(bootstrap, sink, 2, "read_committed")) == sorted(
        f"V{i}" for i in range(10))
    offsets = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).committed(
        [TopicPartition(source, 0), TopicPartition(source, 1)], timeout=10)
    assert [(tp.partition, tp.offset) for tp in offsets] == [(0, 5), (1, 5)]


def test_a_second_producer_with_the_same_id_fences_the_first(bootstrap, create_topic, topic_name):
    topic = create_topic(topic_name(), partitions=1)
    transactional_id = topic_name("tx")
    old = transactional(bootstrap, transactional_id)
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    old.flush(TIMEOUT_S)
    new = transactional(bootstrap, transactional_id)  # aborts old's open transaction
    new.begin_transaction()
    new.produce(topic, value=b"live")
    new.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].fatal(), fenced.value
    assert read_all(bootstrap, topic, 1, "read_committed") == [(0, "live")]


# What the probe's `transactions` scenario prints, with the Java client 4.4 here and 4.1 in
# test_java_client_4_1.py.
EXACTLY_ONCE_LINES = [
    "input: 20 records",
    "aborted a transaction of 5 records",
    "processed 20 records, each poll's output and offsets in one committed transaction",
    # Version 2 sends no AddPartitionsToTxn: the fenced producer learns it
    # from its Produce, as InvalidProducerEpochException (Kafka 4.1.1 too).
    "the old producer after a new one with its id: InvalidProducerEpochException",
    "read_committed: 20 records, 20 distinct, 0 poison, 0 zombie",
    "read_uncommitted: 5 poison",
    "group offsets on the input: 20 in total",
]


def test_java_exactly_once(java_build, psql, bootstrap, topic_name):  # noqa: F811
    name = topic_name("java")
    assert probe("transactions", bootstrap, name) == EXACTLY_ONCE_LINES
    # kafka-clients 4.x speaks transaction version 2 to a broker that
    # finalizes it: every end bumped the epoch (the abort, each commit), and
    # the zombie killer's InitProducerId once more. Version 1 would leave 1.
    [[epoch, state]] = psql.rows(
        "SELECT producer_epoch, state FROM kafgres.transactions WHERE transactional_id = :'id'", id=f"{name}-tx")
    assert int(epoch) >= 3, (epoch, state)


def test_transactional_ids_survive_a_restart(kafgres, psql, bootstrap, create_topic, topic_name):
    topic = create_topic(topic_name(), partitions=1)
    transactional_id = topic_name("tx")
    state_sql = "SELECT producer_id, producer_epoch, state FROM kafgres.transactions WHERE transactional_id = :'id'"
    producer = transactional(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"before")
    producer.commit_transaction(TIMEOUT_S)
    del producer
    [[pid, epoch, state]] = psql.rows(state_sql, id=transactional_id)
    assert state == "CompleteCommit"

    restarted = kafgres.launcher("restart")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    producer = transactional(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"after")
    producer.commit_transaction(TIMEOUT_S)
    [[pid2, epoch2, state2]] = psql.rows(state_sql, id=transactional_id)
    assert (pid2, int(epoch2), state2) == (pid, int(epoch) + 1, "CompleteCommit")
    assert read_all(bootstrap, topic, 1, "read_committed") == [(0, "before"), (0, "after")]
