"""Topic creation and an exact produce/consume round trip with confluent-kafka.

Covers CreateTopics (success, TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION
for names Kafka refuses), Metadata (the topic and its partitions), the SQL
catalog row, and that every record comes back byte for byte: key, value,
headers (order and duplicate keys preserved, null header values), null keys,
empty and null values, binary and large payloads, the partition chosen
explicitly or by the default partitioner, offsets 0..n-1 per partition, and
CreateTime timestamps. ListOffsets earliest/latest must match the counts.
"""

import random
import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from support import produce_all

PARTITIONS = 3
# A fixed CreateTime in the past (2023-11-14T22:13:20Z), so a broker that
# overwrote client timestamps with its own clock would be caught.
BASE_TIMESTAMP_MS = 1_700_000_000_000


def create_error(admin, name, partitions=1):
    """The KafkaError CreateTopics returned for `name`, or None on success."""
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)], operation_timeout=10, request_timeout=10
    )
    try:
        futures[name].result(timeout=20)
    except KafkaException as e:
        return e.args[0]
    return None


def test_create_topic_lists_and_catalogs_it(admin, psql, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=PARTITIONS)

    md = admin.list_topics(timeout=10)
    topic = md.topics[name]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2]
    for p in topic.partitions.values():
        assert p.error is None
        assert p.leader in md.brokers

    rows = psql.rows("select partition_count from kafgres.topics where name = :'name'", name=name)
    assert rows == [[str(PARTITIONS)]]


def test_create_existing_topic_fails_with_topic_already_exists(admin, psql, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=PARTITIONS)

    err = create_error(admin, name, partitions=5)
    assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS, err

    # The failed attempt changed nothing.
    assert psql.rows("select partition_count from kafgres.topics where name = :'name'", name=name) == [["3"]]
    assert sorted(admin.list_topics(timeout=10).topics[name].partitions) == [0, 1, 2]


@pytest.mark.parametrize(
    "name",
    ["bad name!", "a" * 250, "."],
    ids=["space-and-bang", "250-chars", "dot"],
)
def test_invalid_topic_names_are_refused(admin, psql, name):
    err = create_error(admin, name)
    assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION, err  # INVALID_TOPIC_EXCEPTION (17)
    assert psql.rows("select count(*) from kafgres.topics where name = :'name'", name=name) == [["0"]]
    assert name not in admin.list_topics(timeout=10).topics


def record_shapes():
    """Records that exercise every field of the record format, without partition or topic."""
    rng = random.Random(1234)
    return [
        dict(key=b"plain", value=b"hello"),
        dict(
            key=b"dup-headers",
            value=b"v",
            headers=[("h", b"1"), ("h", b"2"), ("other", b""), ("h", b"3")],
        ),
        dict(key=b"empty-value", value=b""),
        dict(key=None, value=b"null key"),
        dict(key=b"", value=b"empty key"),
        dict(key=b"null-value", value=None),
        dict(key=bytes(range(256)), value=bytes(range(255, -1, -1)) * 4, headers=[("bin", bytes([0, 255, 10, 13]))]),
        dict(key=b"null-header-value", value=b"x", headers=[("nullh", None), ("after", b"y")]),
        dict(key="ключ".encode(), value="значение ✓".encode(), headers=[("ü", "ö".encode())]),
        dict(key=b"large", value=rng.randbytes(150_000)),
    ]


def expected_headers(headers):
    """What a consumer reports for `headers` as produced: None when there were none."""
    if not headers:
        return None
    return [(k, v) for k, v in headers]


def test_produce_and_consume_exact_records(make_producer, create_topic, topic_name, consume, make_consumer):
    name = create_topic(topic_name(), partitions=PARTITIONS)

    records = []
    # Each partition explicitly gets every shape; every other record carries its own timestamp.
    for partition in range(PARTITIONS):
        for shape in record_shapes():
            records.append(dict(topic=name, partition=partition, **shape))
    # Then records placed by librdkafka's default partitioner (consistent_random):
    # a repeated key must land on the same partition.
    for key in [b"dp-a", b"dp-b", b"dp-c", b"dp-a", None]:
        records.append(dict(topic=name, key=key, value=b"placed by the partitioner"))
    for i, record in enumerate(records):
        if i % 2 == 0:
            record["timestamp"] = BASE_TIMESTAMP_MS + i

    # One request in flight at a time so that, even if librdkafka retried,
    # records keep their send order within a partition.
    producer = make_producer({"max.in.flight.requests.per.connection": 1})
    sent_from_ms = int(time.time() * 1000)
    delivered = produce_all(producer, records)
    sent_until_ms = int(time.time() * 1000)
    assert len(delivered) == len(records) == 3 * 10 + 5

    by_partition = {p: [] for p in range(PARTITIONS)}
    for record, report in zip(records, delivered):
        assert report.topic() == name
        if "partition" in record:
            assert report.partition() == record["partition"]
        by_partition[report.partition()].append((record, report))

    dp_a = [report.partition() for record, report in zip(records, delivered) if record.get("key") == b"dp-a"]
    assert len(dp_a) == 2 and dp_a[0] == dp_a[1], "the default partitioner split one key over partitions"

    for partition, sent in by_partition.items():
        # Delivery reports give offsets 0..n-1 in send order.
        assert [report.offset() for _, report in sent] == list(range(len(sent)))

        received = consume(name, partition, len(sent))
        for offset, ((record, _), msg) in enumerate(zip(sent, received)):
            where = f"{name}[{partition}]@{offset}"
            assert msg.partition() == partition, where
            assert msg.offset() == offset, where
            assert msg.key() == record.get("key"), where
            assert msg.value() == record.get("value"), where
            assert msg.headers() == expected_headers(record.get("headers")), where
            ts_type, ts = msg.timestamp()
            assert ts_type == TIMESTAMP_CREATE_TIME, where
            if "timestamp" in record:
                assert ts == record["timestamp"], where
            else:
                # librdkafka stamps the produce() call time.
                assert sent_from_ms - 1000 <= ts <= sent_until_ms + 1000, where

        # ListOffsets earliest/latest agree with what was written.
        consumer = make_consumer()
        low, high = consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=10)
        assert (low, high) == (0, len(sent)), f"watermarks of {name}[{partition}]"
