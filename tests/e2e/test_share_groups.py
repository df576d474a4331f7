"""Share groups (KIP-932, queues for Kafka) with the Java KafkaShareConsumer
(kafka-clients 4.4, which speaks ShareFetch and ShareAcknowledge v2, tests/java's
`share-group` scenario; its steps were run against Apache Kafka 4.1.1 with
share.version 1 and printed these lines, before the describe-config source
and the after-close lines were added, which are not checked against Kafka
yet):

- the group config share.auto.offset.reset=earliest is set with the Admin
  client (IncrementalAlterConfigs on a GROUP resource) and described as a
  dynamic group config;
- two consumers in implicit acknowledgement mode split 40 records of a
  two-partition topic: each record is delivered once, to one of them; the
  Admin client describes the group (ShareGroupDescribe) as Stable with two
  members;
- a consumer in explicit mode accepts one new record, releases another (it
  comes back with delivery count 2 and is accepted) and rejects the third
  (never delivered again);
- once every consumer closed, the group is Empty.

The broker's own tests (crates/broker/tests/share_groups.rs) cover the
protocol's edges: lock timeouts, delivery limits, errors, restarts.
"""

from __future__ import annotations

from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)


def test_java_share_consumers_split_a_queue_and_acknowledge(java_build, bootstrap, topic_name):  # noqa: F811
    assert probe("share-group", bootstrap, topic_name("share")) == [
        "group config share.auto.offset.reset=earliest (DYNAMIC_GROUP_CONFIG)",
        "described: state=Stable members=2",
        "implicit: 40 records delivered, 40 distinct, 0 delivered twice",
        "explicit: deliveries (value#delivery count) [x-0#1, x-1#1, x-1#2, x-2#1]",
        "explicit: after accept, release then accept, and reject: 0 more delivered []",
        "after close: state=Empty members=0",
    ]
