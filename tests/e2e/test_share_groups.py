"""Share groups (KIP-932) with the Java KafkaShareConsumer (kafka-clients 4.1,
tests/java's `share-group` scenario): the group's `share.auto.offset.reset`
set to earliest with the Admin client and described as a group config; two
members read every record of a 2-partition topic once; a member in explicit
acknowledgement mode releases a record and gets it again with delivery count
2; once all closed, ShareGroupDescribe shows the group Empty.

The broker's own tests (crates/broker/tests/share_groups.rs) cover the
protocol's edges: lock timeouts, delivery limits, errors, restarts.
"""

from __future__ import annotations

from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)


def test_java_share_consumers(java_build, bootstrap, topic_name):  # noqa: F811
    assert probe("share-group", bootstrap, topic_name("share")) == [
        "group config share.auto.offset.reset=earliest (DYNAMIC_GROUP_CONFIG)",
        "two members read 20 records, 20 distinct",
        "released again-0 came back, delivery count 2",
        "after close: state=Empty members=0",
    ]
