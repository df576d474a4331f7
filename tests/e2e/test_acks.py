"""Produce with each acks setting (0, 1, all), idempotence off.

For every mode the records must all arrive, exactly and in order, at offsets
0..n-1, and ListOffsets earliest/latest (what `get_watermark_offsets` asks
for) must be 0 and n. With acks=1 and acks=all the delivery reports carry the
offsets; with acks=0 the broker sends no response, so the client cannot know
them and the records are checked on the consumer side only.
"""

import pytest
from confluent_kafka import TopicPartition

from support import produce_all

RECORD_COUNT = 25


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_mode_delivers_exactly(acks, make_producer, make_consumer, create_topic, topic_name, consume):
    name = create_topic(topic_name(f"acks{acks}"), partitions=1)
    values = [f"acks={acks} record {i} ".encode() * (i + 1) for i in range(RECORD_COUNT)]

    producer = make_producer({"acks": acks, "enable.idempotence": False})
    delivered = produce_all(
        producer, [dict(topic=name, partition=0, key=str(i).encode(), value=v) for i, v in enumerate(values)]
    )

    # acks=0 gets no ProduceResponse, so its delivery reports carry no real
    # offset (librdkafka counts up from OFFSET_INVALID); only 1 and all know them.
    if acks != "0":
        assert [m.offset() for m in delivered] == list(range(RECORD_COUNT))

    # With acks=0 the records may still be on their way to disk when flush()
    # returns; `consume` waits (bounded) until all are visible.
    received = consume(name, 0, RECORD_COUNT)
    assert [m.offset() for m in received] == list(range(RECORD_COUNT))
    assert [m.key() for m in received] == [str(i).encode() for i in range(RECORD_COUNT)]
    assert [m.value() for m in received] == values

    low, high = make_consumer().get_watermark_offsets(TopicPartition(name, 0), timeout=10)
    assert (low, high) == (0, RECORD_COUNT)
