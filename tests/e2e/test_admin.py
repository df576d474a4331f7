"""Topic administration through librdkafka's AdminClient.

DeleteTopics removes the topic from Metadata and from `kafgres.topics`, and a
topic created again under the same name starts empty. CreatePartitions grows a
topic: the catalog and Metadata agree, old records stay, the new partition
takes records.
"""

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewPartitions

from support import produce_all, wait_for_topic_metadata


def test_delete_topic_then_recreate_starts_empty(admin, psql, make_producer, create_topic, topic_name, consume):
    name = create_topic(topic_name(), partitions=2)
    produce_all(make_producer(), [dict(topic=name, partition=0, value=b"old %d" % i) for i in range(5)])

    admin.delete_topics([name], operation_timeout=10)[name].result(timeout=15)
    assert psql.rows("select count(*) from kafgres.topics where name = :'name'", name=name) == [["0"]]
    assert name not in admin.list_topics(timeout=10).topics

    try:
        admin.delete_topics([name], operation_timeout=10)[name].result(timeout=15)
        raise AssertionError("deleting a missing topic succeeded")
    except KafkaException as e:
        assert e.args[0].name() == "UNKNOWN_TOPIC_OR_PART"

    create_topic(name, partitions=1)
    [delivered] = produce_all(make_producer(), [dict(topic=name, partition=0, value=b"new")])
    assert delivered.offset() == 0
    [msg] = consume(name, 0, 1)
    assert (msg.offset(), msg.value()) == (0, b"new")


def test_create_partitions_grows_the_topic(admin, psql, make_producer, create_topic, topic_name, consume):
    name = create_topic(topic_name(), partitions=1)
    produce_all(make_producer(), [dict(topic=name, partition=0, value=b"kept")])

    admin.create_partitions([NewPartitions(name, 3)], operation_timeout=10)[name].result(timeout=15)
    wait_for_topic_metadata(admin, name, 3)
    assert psql.rows("select partition_count from kafgres.topics where name = :'name'", name=name) == [["3"]]

    [delivered] = produce_all(make_producer(), [dict(topic=name, partition=2, value=b"on the new partition")])
    assert (delivered.partition(), delivered.offset()) == (2, 0)
    [old] = consume(name, 0, 1)
    assert old.value() == b"kept"

    try:
        admin.create_partitions([NewPartitions(name, 2)], operation_timeout=10)[name].result(timeout=15)
        raise AssertionError("shrinking a topic succeeded")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_PARTITIONS"


def test_describe_configs_shows_overrides_and_defaults(admin, topic_name):
    from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

    name = topic_name()
    admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1, config={"retention.ms": "60000"})], operation_timeout=10
    )[name].result(timeout=15)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    assert configs["retention.ms"].value == "60000"
    assert ConfigSource(configs["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "delete"
    assert ConfigSource(configs["cleanup.policy"].source) == ConfigSource.DEFAULT_CONFIG
    assert configs["max.message.bytes"].value == "1048588"


def test_unknown_topic_config_is_refused(admin, psql, topic_name):
    from confluent_kafka.admin import NewTopic

    name = topic_name()
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=1, replication_factor=1, config={"no.such.config": "1"})], operation_timeout=10
        )[name].result(timeout=15)
        raise AssertionError("an unknown config was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_CONFIG"
    assert psql.rows("select count(*) from kafgres.topics where name = :'name'", name=name) == [["0"]]
