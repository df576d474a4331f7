"""Requests no client library exposes as sent, through tests/e2e/kafka_wire.py.

ApiVersions (the advertised version ranges) and Metadata v12 with an explicit
`allow_auto_topic_creation` (clients hide the first answer for an
auto-created topic behind their retries).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import kafka_wire  # noqa: E402

# The APIs Kafgres serves (crates/broker/src/api/mod.rs, docs/conformance.md's table).
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups",
    43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
    57: "UpdateFeatures", 74: "ListConfigResources", 47: "OffsetDelete", 48: "DescribeClientQuotas", 49: "AlterClientQuotas",
    60: "DescribeCluster", 61: "DescribeProducers", 65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe",
    78: "ShareFetch", 79: "ShareAcknowledge", 90: "DescribeShareGroupOffsets",
}
SERVED_API_KEYS = frozenset(API_NAMES)


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) from an ApiVersions v3 answer."""
    response = kafka_wire.api_versions(bootstrap, version=3)
    if response.error_code != 0:
        raise RuntimeError(f"ApiVersions v3 answered error {response.error_code}")
    return response.apis


def metadata(bootstrap: str, topics: list[str], allow_auto_create: bool) -> list[kafka_wire.MetadataTopic]:
    """The topics of one Metadata v12 answer, in the order asked."""
    response = kafka_wire.metadata_v12(bootstrap, topics, allow_auto_topic_creation=allow_auto_create)
    return [response.topics[name] for name in topics if name in response.topics]


# --------------------------------------------------------------------------
# Any request, as any user: kafka-python's codecs over one connection (scenarios_acls.py).

from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.schemas.fields.struct import StructField  # noqa: E402
from kafka.protocol.schemas.fields.struct_array import StructArrayField  # noqa: E402

import kafka_schemas  # noqa: E402


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=kafka_schemas):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=kafka_schemas):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=kafka_schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=kafka_schemas):
    pass


def _field_value(field, value):
    if isinstance(field, StructArrayField) and isinstance(value, list):
        return [_struct(field.data_class, field.fields, v) if isinstance(v, dict) else v for v in value]
    if isinstance(field, StructField) and isinstance(value, dict):
        return _struct(field.data_class, field.fields, value)
    return value


def _struct(data_class, fields, values: dict, **extra):
    return data_class(**extra, **{k: _field_value(fields[k], v) for k, v in values.items()})


def request(cls, version: int, **fields):
    """`cls` (a kafka-python ApiMessage request class) at `version`; nested structs may be given as dicts."""
    return _struct(cls, cls._struct.fields, fields, version=version)


class Session:
    """One authenticated connection to the (single) broker: `send(request)` returns the decoded response.

    `config` is kafka-python's (security_protocol, sasl_*); every call has a deadline.
    """

    TIMEOUT_MS = 20_000

    def __init__(self, bootstrap: str, config: dict):
        from kafka import KafkaAdminClient

        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=self.TIMEOUT_MS, **config)
        self.manager = self.admin._manager
        brokers = self.manager.cluster.brokers()
        self.node = next(iter(brokers)).node_id if brokers else 0

    def send(self, req):
        async def _send():
            return await self.manager.send(req, node_id=self.node, request_timeout_ms=self.TIMEOUT_MS)

        return self.manager.run(_send)

    def close(self) -> None:
        self.admin.close()
