"""Topics and records survive a clean restart of the Postgres cluster.

After `./kafgres restart` (pg_ctl restart, then wait for the Kafka port) the
topic has the same id and partitions, every acknowledged record is readable at
the offset its delivery report gave, and new records continue at the next
offset of each partition.
"""

from confluent_kafka import TopicPartition

from support import produce_all, wait_for_topic_metadata

PARTITIONS = 2
RECORDS_PER_PARTITION = 10


def test_topic_and_records_survive_restart(
    kafgres, admin, psql, make_producer, make_consumer, create_topic, topic_name, consume
):
    name = create_topic(topic_name(), partitions=PARTITIONS)
    topic_id_before = psql.value("select topic_id from kafgres.topics where name = :'name'", name=name)

    records = [
        dict(topic=name, partition=p, key=f"{p}-{i}".encode(), value=f"before restart {p}/{i}".encode())
        for p in range(PARTITIONS)
        for i in range(RECORDS_PER_PARTITION)
    ]
    delivered = produce_all(make_producer(), records)
    for p in range(PARTITIONS):
        offsets = [m.offset() for m in delivered if m.partition() == p]
        assert offsets == list(range(RECORDS_PER_PARTITION))

    kafgres.launcher("restart")

    # Same partitions, each with a leader (retries while the client reconnects).
    wait_for_topic_metadata(admin, name, PARTITIONS)
    assert psql.rows(
        "select topic_id, partition_count from kafgres.topics where name = :'name'", name=name
    ) == [[topic_id_before, str(PARTITIONS)]]

    for p in range(PARTITIONS):
        received = consume(name, p, RECORDS_PER_PARTITION)
        assert [(m.offset(), m.key(), m.value()) for m in received] == [
            (i, f"{p}-{i}".encode(), f"before restart {p}/{i}".encode()) for i in range(RECORDS_PER_PARTITION)
        ]

    after = produce_all(
        make_producer(),
        [dict(topic=name, partition=p, value=f"after restart {p}".encode()) for p in range(PARTITIONS)],
    )
    assert [(m.partition(), m.offset()) for m in after] == [(p, RECORDS_PER_PARTITION) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        [msg] = consume(name, p, 1, start_offset=RECORDS_PER_PARTITION)
        assert (msg.offset(), msg.value()) == (RECORDS_PER_PARTITION, f"after restart {p}".encode())

    watermarks = make_consumer()
    for p in range(PARTITIONS):
        assert watermarks.get_watermark_offsets(TopicPartition(name, p), timeout=10) == (0, RECORDS_PER_PARTITION + 1)
