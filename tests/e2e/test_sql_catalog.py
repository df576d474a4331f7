"""The SQL catalog `kafgres.topics` agrees with what Kafka clients see.

A topic created over Kafka (CreateTopics, or auto-created by Metadata) has one
row with its partition count, a recent created_at, and a non-zero topic_id
equal to the topic id Metadata carries. The id is compared twice: through
confluent-kafka's describe_topics (librdkafka reads it from Metadata v10+) and
through a raw Metadata v12 request, which checks the broker's bytes directly.
A Metadata request that may not auto-create leaves no row behind.
"""

import uuid

from confluent_kafka import TopicCollection

import kafka_wire
from support import wait_for_topic_metadata

UINT64_MASK = (1 << 64) - 1


def uuid_from_kafka(kafka_uuid) -> uuid.UUID:
    """confluent_kafka.Uuid (two signed 64-bit halves, like Java's) -> uuid.UUID."""
    msb = kafka_uuid.get_most_significant_bits() & UINT64_MASK
    lsb = kafka_uuid.get_least_significant_bits() & UINT64_MASK
    return uuid.UUID(int=(msb << 64) | lsb)


def catalog_row(psql, name):
    """(partition_count, topic_id, created recently) of the one catalog row for `name`."""
    rows = psql.rows(
        "select partition_count, topic_id,"
        " created_at between now() - interval '10 minutes' and now()"
        " from kafgres.topics where name = :'name'",
        name=name,
    )
    assert len(rows) == 1, f"expected one kafgres.topics row for {name}, got {rows}"
    count, topic_id, recent = rows[0]
    return int(count), uuid.UUID(topic_id), recent == "t"


def test_created_topics_match_catalog(admin, psql, bootstrap, create_topic, topic_name):
    partitions_by_name = {
        create_topic(topic_name("one"), partitions=1): 1,
        create_topic(topic_name("four"), partitions=4): 4,
    }

    ids = {}
    for name, partitions in partitions_by_name.items():
        count, topic_id, recent = catalog_row(psql, name)
        assert count == partitions
        assert topic_id != kafka_wire.ZERO_UUID
        assert recent, f"created_at of {name} is not within the last 10 minutes"
        ids[name] = topic_id
    assert len(set(ids.values())) == len(ids), "two topics share a topic_id"

    # Through the client: DescribeTopics is a Metadata request that returns topic ids.
    futures = admin.describe_topics(TopicCollection(list(partitions_by_name)), request_timeout=15)
    for name, future in futures.items():
        description = future.result(timeout=20)
        assert description.name == name
        assert uuid_from_kafka(description.topic_id) == ids[name]
        assert sorted(p.id for p in description.partitions) == list(range(partitions_by_name[name]))

    # On the wire: Metadata v12 by name.
    md = kafka_wire.metadata_v12(bootstrap, list(partitions_by_name), allow_auto_topic_creation=False)
    assert md.controller_id in md.brokers
    for name, partitions in partitions_by_name.items():
        topic = md.topics[name]
        assert topic.error_code == kafka_wire.ERROR_NONE
        assert topic.topic_id == ids[name]
        assert not topic.is_internal
        assert sorted(p.partition_index for p in topic.partitions) == list(range(partitions))
        for p in topic.partitions:
            assert p.error_code == kafka_wire.ERROR_NONE
            assert p.leader_id in md.brokers
            assert p.replica_nodes == p.isr_nodes == [p.leader_id]


def test_metadata_auto_creation_is_cataloged(admin, psql, bootstrap, topic_name):
    name = topic_name("auto")

    first = kafka_wire.metadata_v12(bootstrap, [name], allow_auto_topic_creation=True)
    # The creating request may already list the topic, or answer as Kafka
    # does while creation is under way (Kafka 4.0 answers
    # UNKNOWN_TOPIC_OR_PARTITION, older versions LEADER_NOT_AVAILABLE);
    # either way the topic exists from then on.
    assert first.topics[name].error_code in (
        kafka_wire.ERROR_NONE,
        kafka_wire.ERROR_UNKNOWN_TOPIC_OR_PARTITION,
        kafka_wire.ERROR_LEADER_NOT_AVAILABLE,
    ), first.topics[name]

    wait_for_topic_metadata(admin, name, partitions=1)
    count, topic_id, recent = catalog_row(psql, name)
    assert (count, recent) == (1, True)

    again = kafka_wire.metadata_v12(bootstrap, [name], allow_auto_topic_creation=False)
    topic = again.topics[name]
    assert topic.error_code == kafka_wire.ERROR_NONE
    assert topic.topic_id == topic_id
    assert [p.partition_index for p in topic.partitions] == [0]


def test_metadata_without_auto_creation_creates_nothing(psql, bootstrap, topic_name):
    name = topic_name("absent")

    md = kafka_wire.metadata_v12(bootstrap, [name], allow_auto_topic_creation=False)

    assert md.topics[name].error_code == kafka_wire.ERROR_UNKNOWN_TOPIC_OR_PARTITION
    assert md.topics[name].partitions == []
    assert psql.rows("select count(*) from kafgres.topics where name = :'name'", name=name) == [["0"]]
