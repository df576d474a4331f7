"""The idempotent producer with librdkafka (confluent-kafka).

A producer with `enable.idempotence=true` (InitProducerId, then batches
carrying producer id, epoch and sequence numbers, up to 5 in flight per
partition) sends 200 keyed records to a 3-partition topic. Every record must
be acknowledged, each partition's delivery reports must carry consecutive
offsets from 0 in the order the records were produced, and a consumer must
read each record exactly once, in that order. A second idempotent producer
gets a producer id of its own and continues each partition where the first
stopped.
"""

from collections import defaultdict

from support import produce_all

PARTITIONS = 3
RECORD_COUNT = 200
IDEMPOTENT = {"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5}


def keyed_records(name, tag, count):
    return [{"topic": name, "key": f"{tag}-key-{i % 17}", "value": f"{tag}-value-{i}"} for i in range(count)]


def by_partition(messages):
    out = defaultdict(list)
    for m in messages:
        out[m.partition()].append(m)
    return out


def test_idempotent_producer_delivers_exactly_once_in_order(make_producer, create_topic, consume, topic_name):
    name = create_topic(topic_name(), partitions=PARTITIONS)
    producer = make_producer({**IDEMPOTENT, "linger.ms": 2, "batch.num.messages": 10})

    records = keyed_records(name, "a", RECORD_COUNT)
    delivered = by_partition(produce_all(producer, records))
    assert sorted(delivered) == list(range(PARTITIONS)), "the keys should spread over every partition"
    assert sum(len(v) for v in delivered.values()) == RECORD_COUNT

    for partition, reports in delivered.items():
        # Reports come back in production order: offsets 0, 1, 2, ... with no gap.
        assert [m.offset() for m in reports] == list(range(len(reports))), f"partition {partition}"
        received = consume(name, partition, len(reports))
        assert [(m.offset(), m.key(), m.value()) for m in received] == [
            (m.offset(), m.key(), m.value()) for m in reports
        ], f"partition {partition}: records lost, duplicated or reordered"

    # Nothing beyond what was acknowledged (no duplicate written by a retry).
    ends = {}
    for partition, reports in delivered.items():
        consumer_records = consume(name, partition, len(reports))
        ends[partition] = len(consumer_records)
    second = make_producer(IDEMPOTENT)
    more = by_partition(produce_all(second, keyed_records(name, "b", 30)))
    for partition, reports in more.items():
        assert reports[0].offset() == ends[partition], f"partition {partition} grew beyond the acknowledged records"
        assert [m.offset() for m in reports] == list(range(ends[partition], ends[partition] + len(reports)))
