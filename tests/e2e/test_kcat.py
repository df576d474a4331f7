"""kcat (Debian's 1.7.1 on librdkafka 2.0.2, an older client than confluent-kafka's) against the broker.

Covers metadata listing as JSON (`-L -J`), producing keyed lines with a header
to an explicit partition (`-P -K: -H -p`), consuming them back with an exact
format string (`-C -e -f`, kcat's non-group consumer), starting at an offset,
and producing to an unknown topic, which Metadata auto-creates with one
partition as Kafka does by default.
"""

import json

from support import wait_for_topic_metadata

# kcat's default message.timeout.ms is 5 minutes; fail fast instead.
PRODUCE_OPTS = ["-X", "message.timeout.ms=20000"]
FORMAT = "%p|%o|%k|%s|%h\\n"  # kcat expands \n itself


def test_metadata_list_json_shows_topic(kcat, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=2)

    listing = json.loads(kcat("-L", "-J").stdout)

    assert listing["query"]["topic"] == "*"
    assert listing["brokers"], "no brokers listed"
    broker_ids = {b["id"] for b in listing["brokers"]}
    [topic] = [t for t in listing["topics"] if t["topic"] == name]
    assert "error" not in topic, topic
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1]
    for p in topic["partitions"]:
        assert "error" not in p, p
        assert p["leader"] in broker_ids


def test_produce_and_consume_with_kcat(kcat, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=2)

    kcat("-P", "-K:", "-H", "h1=v1", "-t", name, "-p", "0", *PRODUCE_OPTS, input="k1:v1\nk2:value two\nk3:a:b\n")

    # All partitions, from the beginning, exit at the end: partition 1 stays
    # empty, so the output is exactly partition 0's three records.
    out = kcat("-C", "-q", "-e", "-o", "beginning", "-t", name, "-f", FORMAT).stdout
    assert out == "0|0|k1|v1|h1=v1\n0|1|k2|value two|h1=v1\n0|2|k3|a:b|h1=v1\n"

    # Starting at an absolute offset on one partition.
    out = kcat("-C", "-q", "-e", "-o", "1", "-p", "0", "-t", name, "-f", FORMAT).stdout
    assert out == "0|1|k2|value two|h1=v1\n0|2|k3|a:b|h1=v1\n"

    # More records continue at the next offset.
    kcat("-P", "-K:", "-t", name, "-p", "0", *PRODUCE_OPTS, input="k4:v4\n")
    out = kcat("-C", "-q", "-e", "-o", "3", "-p", "0", "-t", name, "-f", FORMAT).stdout
    assert out == "0|3|k4|v4|\n"


def test_kcat_produce_auto_creates_topic(kcat, admin, psql, topic_name):
    name = topic_name("auto")
    assert name not in admin.list_topics(timeout=10).topics

    # librdkafka's producer asks Metadata for the unknown topic with
    # allow_auto_topic_creation=true and retries until it has a leader.
    kcat("-P", "-t", name, *PRODUCE_OPTS, input="first\n")

    wait_for_topic_metadata(admin, name, partitions=1)
    assert psql.rows("select partition_count from kafgres.topics where name = :'name'", name=name) == [["1"]]
    out = kcat("-C", "-q", "-e", "-o", "beginning", "-t", name, "-f", "%p|%o|%s\\n").stdout
    assert out == "0|0|first\n"
