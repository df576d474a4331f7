"""The ACL matrix (issue 20): every API a client can call, as principals with different ACLs.

Runs against the secured pair (secured.py): Apache Kafka 4.4.0 with
StandardAuthorizer and Kafgres with `kafgres.authorizer = 'acl'`, both with
SASL/SCRAM-SHA-256 and `allow.everyone.if.no.acl.found=false`. Each
principal of `GRANTS` gets resources of its own (a topic `<p-t>` with two
partitions and three records in partition 0, a topic `<p-new>` to create, one
`<p-auto>` to auto-create, one `<p-missing>` that never exists, a classic
group `<p-g>` with a committed offset, a group `<p-cg>` for the consumer
protocol, a transactional id `<p-tx>` initialised by the super user) and the
ACLs of its row, then sends every request below on one connection of its
own, in this order, and the transcript records each answer's error codes per
topic, partition, group and transactional id, which topics, groups and
transactional ids it lists, and the authorized operations (KIP-430) where an
API returns them. Requests go through kafka-python's codecs at fixed
versions (kafka_raw.Session), so no client retries or hides an error.

The rows: the super user (Kafka's `super.users`, a Postgres superuser in
Kafgres); one with no ACL (everything hidden or refused); one per operation
(DESCRIBE, READ, WRITE (+ IDEMPOTENT_WRITE on the cluster), CREATE on the
topics, CREATE on the cluster, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS:
the exact ACL an API needs, or not); ALL by LITERAL names; ALL on the cluster
only; ALL by a PREFIXED
name; ALL with DENY bindings that override it; ALL for another host (does
not apply); ALL on the `*` wildcard names.
"""

from __future__ import annotations

import time

import kafka.errors
from kafka.protocol.admin.acl import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.admin.configs import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeTopicPartitionsRequest,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.memory_records import MemoryRecordsBuilder

import kafka_raw
from framework import Context, scenario
from secured import SUPERUSER, kafka_python_config

SETUP_TIMEOUT_S = 60.0
OTHER_HOST = "10.1.2.3"
CLUSTER_NAME = "kafka-cluster"
NOT_REQUESTED = -(2 ** 31)

# Kafka's enums (org.apache.kafka.common.acl / resource).
OPERATIONS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE",
              9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
              13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}
OPERATION_CODES = {v: k for k, v in OPERATIONS.items()}
RESOURCE_TYPES = {1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
PATTERNS = {1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
PERMISSIONS = {1: "ANY", 2: "DENY", 3: "ALLOW"}
DENY, ALLOW = 2, 3
# DescribeConfigs / AlterConfigs resource types.
CONFIG_TOPIC, CONFIG_BROKER = 2, 4


def allow(resource: str, operation: str, host: str = "*") -> tuple[str, str, int, str]:
    return resource, operation, ALLOW, host


def deny(resource: str, operation: str) -> tuple[str, str, int, str]:
    return resource, operation, DENY, "*"


# Each principal's ACLs: (resources, operation, permission, host). Resources (see `bindings`): topic = <p-t>,
# new = <p-new>, auto = <p-auto>, group = <p-g> and <p-cg>, txn = <p-tx>, cluster = kafka-cluster,
# prefix = every topic, group and transactional id starting with `<p->` (PREFIXED), wildcard = `*` (LITERAL).
ALL_RESOURCES = ("topic", "new", "auto", "group", "txn", "cluster")
GRANTS: dict[str, list[tuple[str, str, int, str]]] = {
    "acl_wildcard": [allow("wildcard", "ALL")],
    SUPERUSER: [],
    "acl_nobody": [],
    "acl_describe": [allow(r, "DESCRIBE") for r in ("topic", "group", "txn", "cluster")],
    "acl_read": [allow("topic", "READ"), allow("group", "READ")],
    "acl_write": [allow("topic", "WRITE"), allow("txn", "WRITE"), allow("cluster", "IDEMPOTENT_WRITE")],
    "acl_create": [allow(r, "CREATE") for r in ("topic", "new", "auto")],
    "acl_create_cluster": [allow("cluster", "CREATE"), allow("auto", "DESCRIBE")],
    "acl_delete": [allow("topic", "DELETE"), allow("group", "DELETE")],
    "acl_alter": [allow("topic", "ALTER"), allow("cluster", "ALTER")],
    "acl_describe_configs": [allow("topic", "DESCRIBE_CONFIGS"), allow("cluster", "DESCRIBE_CONFIGS")],
    "acl_alter_configs": [allow("topic", "ALTER_CONFIGS"), allow("cluster", "ALTER_CONFIGS")],
    "acl_all": [allow(r, "ALL") for r in ALL_RESOURCES],
    "acl_cluster": [allow("cluster", "ALL")],
    "acl_prefixed": [allow("prefix", "ALL"), allow("cluster", "ALL")],
    "acl_denied": [allow("prefix", "ALL"), allow("cluster", "ALL"), deny("topic", "WRITE"), deny("group", "READ"),
                   deny("txn", "DESCRIBE"), deny("new", "ALL"), deny("cluster", "DESCRIBE")],
    "acl_other_host": [allow(r, "ALL", host=OTHER_HOST) for r in ALL_RESOURCES],
}


def err(code: int) -> str:
    return f"{kafka.errors.for_code(code).message}({code})"


def ops_text(value) -> str:
    """KIP-430 authorized operations: an int32 bit field (or kafka-python's decoded set) as sorted names."""
    if value is None:  # kafka-python's decoding of the int32 minimum
        return "not-requested"
    if isinstance(value, int):
        if value == NOT_REQUESTED:
            return "not-requested"
        codes = [bit for bit in range(32) if value & (1 << bit)]
    else:
        codes = [OPERATION_CODES[v] if isinstance(v, str) else int(v) for v in value]
    return "[" + ",".join(sorted(OPERATIONS.get(c, str(c)) for c in codes)) + "]"


class Resources:
    """One principal's names."""

    def __init__(self, ctx: Context, user: str):
        self.user = user
        tag = user.removeprefix("acl_").replace("_", "-")
        self.topic = ctx.name(f"{tag}-t")
        self.new = ctx.name(f"{tag}-new")
        self.auto = ctx.name(f"{tag}-auto")
        self.missing = ctx.name(f"{tag}-missing")
        self.group = ctx.name(f"{tag}-g", kind="group")
        self.consumer_group = ctx.name(f"{tag}-cg", kind="group")
        self.txn = ctx.name(f"{tag}-tx", kind="transactional id")
        self.prefix = self.topic.removesuffix("-t") + "-"
        self.auto_answer: int | None = None  # the error code of the auto-creating Metadata request
        ctx.norm.register(self.prefix, f"<{tag}->")

    def bindings(self) -> list[tuple[int, str, int, str, str, int, int]]:
        """(resource type, name, pattern, principal, host, operation, permission) for GRANTS[user]."""
        names = {
            "topic": [(TOPIC, self.topic, LITERAL)],
            "new": [(TOPIC, self.new, LITERAL)],
            "auto": [(TOPIC, self.auto, LITERAL)],
            "group": [(GROUP, self.group, LITERAL), (GROUP, self.consumer_group, LITERAL)],
            "txn": [(TRANSACTIONAL_ID, self.txn, LITERAL)],
            "cluster": [(CLUSTER, CLUSTER_NAME, LITERAL)],
            "prefix": [(t, self.prefix, PREFIXED) for t in (TOPIC, GROUP, TRANSACTIONAL_ID)],
            "wildcard": [(t, "*", LITERAL) for t in (TOPIC, GROUP, TRANSACTIONAL_ID)],
        }
        return [(rtype, name, pattern, f"User:{self.user}", host, OPERATION_CODES[op], permission)
                for resource, op, permission, host in GRANTS[self.user]
                for rtype, name, pattern in names[resource]]


def binding_text(b: tuple) -> str:
    rtype, name, pattern, principal, host, op, permission = b
    return (f"{PERMISSIONS[permission]} {principal} {OPERATIONS[op]} {RESOURCE_TYPES[rtype]}:{PATTERNS[pattern]}:{name}"
            f" host={host}")


def records(count: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        builder.append(timestamp=1_600_000_000_000 + i, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[])
    builder.close()
    return bytes(builder.buffer())


def retry(send, ok, what: str, timeout_s: float = SETUP_TIMEOUT_S):
    """Sends until `ok(answer)` (a coordinator loading, metadata propagating), within a deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = send()
        if ok(answer):
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still {answer} after {timeout_s:.0f}s")
        time.sleep(0.2)


def setup(ctx: Context, admin: kafka_raw.Session, everyone: list[Resources]) -> dict[str, tuple[int, int]]:
    """The principals' topics, records, committed offsets, transactional ids and ACLs, as the super user.

    Nothing here is transcribed but failures. Returns each transactional id's producer id and epoch.
    """
    from confluent_kafka.admin import NewTopic

    futures = ctx.admin.create_topics([NewTopic(r.topic, 2, 1) for r in everyone], request_timeout=30)
    for f in futures.values():
        f.result(timeout=40)
    for r in everyone:
        ctx.wait_topic(r.topic, 2)
    retry(lambda: admin.send(kafka_raw.request(FindCoordinatorRequest, 4, key_type=0,
                                               coordinator_keys=[everyone[0].group])),
          lambda a: a.coordinators[0].error_code == 0, "group coordinator")
    retry(lambda: admin.send(kafka_raw.request(FindCoordinatorRequest, 4, key_type=1,
                                               coordinator_keys=[everyone[0].txn])),
          lambda a: a.coordinators[0].error_code == 0, "transaction coordinator")
    producers: dict[str, tuple[int, int]] = {}
    for r in everyone:
        answer = admin.send(kafka_raw.request(ProduceRequest, 9, transactional_id=None, acks=-1, timeout_ms=10000,
                                              topic_data=[{"name": r.topic, "partition_data": [
                                                  {"index": 0, "records": records(3)}]}]))
        code = answer.responses[0].partition_responses[0].error_code
        if code:
            ctx.out(f"setup: produce to {r.topic}: {err(code)}")
        answer = admin.send(kafka_raw.request(
            OffsetCommitRequest, 8, group_id=r.group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=[{"name": r.topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]))
        code = answer.topics[0].partitions[0].error_code
        if code:
            ctx.out(f"setup: commit to {r.group}: {err(code)}")
        answer = retry(lambda: admin.send(kafka_raw.request(InitProducerIdRequest, 4, transactional_id=r.txn,
                                                            transaction_timeout_ms=60000, producer_id=-1,
                                                            producer_epoch=-1)),
                       lambda a: a.error_code not in (14, 15, 16, 51), f"InitProducerId {r.txn}")
        if answer.error_code:
            ctx.out(f"setup: InitProducerId {r.txn}: {err(answer.error_code)}")
        producers[r.user] = (answer.producer_id, answer.producer_epoch)
    wanted = [b for r in everyone for b in r.bindings()]
    answer = admin.send(kafka_raw.request(CreateAclsRequest, 3, creations=[
        {"resource_type": b[0], "resource_name": b[1], "resource_pattern_type": b[2], "principal": b[3],
         "host": b[4], "operation": b[5], "permission_type": b[6]} for b in wanted]))
    for b, result in zip(wanted, answer.results):
        if result.error_code:
            ctx.out(f"setup: CreateAcls {binding_text(b)}: {err(result.error_code)} {result.error_message}")

    # Kafka's authorizer learns of new ACLs from the metadata log, a moment after CreateAcls answers:
    # wait until DescribeAcls (the broker's authorizer) shows them all.
    def described() -> set:
        a = admin.send(kafka_raw.request(DescribeAclsRequest, 3, resource_type_filter=ANY, resource_name_filter=None,
                                         pattern_type_filter=ANY, principal_filter=None, host_filter=None,
                                         operation=1, permission_type=1))
        return {(res.resource_type, res.resource_name, res.pattern_type, acl.principal, acl.host, acl.operation,
                 acl.permission_type) for res in a.resources for acl in res.acls}

    retry(described, lambda got: set(wanted) <= got, "the ACLs to apply")
    return producers


class Battery:
    """Every request, as one principal, on its own resources; writes one line per answer."""

    def __init__(self, ctx: Context, r: Resources, session: kafka_raw.Session, node: int,
                 producer: tuple[int, int]):
        self.ctx, self.r, self.s, self.node = ctx, r, session, node
        self.pid, self.epoch = producer
        self.run_prefix = r.topic.split("-", 1)[0] + "-"  # cf<run>-: this run's names, not other scenarios'

    def out(self, api: str, text: str) -> None:
        self.ctx.out(f"  {api}: {text}")

    def ours(self, name: str | None) -> bool:
        return bool(name) and name.startswith(self.run_prefix)

    def send(self, cls, version: int, **fields):
        return self.s.send(kafka_raw.request(cls, version, **fields))

    # --- topics -----------------------------------------------------------------------

    def metadata(self) -> None:
        r = self.r
        a = self.send(MetadataRequest, 12, topics=[{"name": r.topic}, {"name": r.missing}],
                      allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        for t in a.topics:
            self.out(f"Metadata {t.name}", f"{err(t.error_code)} partitions={len(t.partitions)} "
                                          f"ops={ops_text(t.authorized_operations)}")
        a = self.send(MetadataRequest, 12, topics=None, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=True)
        listed = sorted((t.name, t.error_code, ops_text(t.authorized_operations)) for t in a.topics
                        if self.ours(t.name))
        self.out("Metadata all topics", " ".join(f"{n}:{err(c)}:{o}" for n, c, o in listed) or "none")
        a = self.send(MetadataRequest, 12, topics=[{"name": r.auto}], allow_auto_topic_creation=True,
                      include_topic_authorized_operations=False)
        r.auto_answer = a.topics[0].error_code
        self.out(f"Metadata auto-create {r.auto}", err(r.auto_answer))

    def describe_topic_partitions(self) -> None:
        r = self.r
        a = self.send(DescribeTopicPartitionsRequest, 0, topics=[{"name": r.topic}, {"name": r.missing}],
                      response_partition_limit=2000, cursor=None)
        for t in sorted(a.topics, key=lambda t: t.name or ""):
            self.out(f"DescribeTopicPartitions {t.name}", f"{err(t.error_code)} partitions={len(t.partitions)} "
                                                         f"ops={ops_text(t.topic_authorized_operations)}")

    def list_offsets(self) -> None:
        a = self.send(ListOffsetsRequest, 7, replica_id=-1, isolation_level=0, topics=[{"name": self.r.topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in (0, 1)]}])
        for t in a.topics:
            self.out(f"ListOffsets {t.name}", " ".join(f"p{p.partition_index}:{err(p.error_code)}@{p.offset}"
                                                       for p in sorted(t.partitions, key=lambda p: p.partition_index)))

    def offset_for_leader_epoch(self, epoch: int) -> None:
        a = self.send(OffsetForLeaderEpochRequest, 4, replica_id=-1, topics=[{"topic": self.r.topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}])
        for t in a.topics:
            self.out(f"OffsetForLeaderEpoch {t.topic}", " ".join(
                f"p{p.partition}:{err(p.error_code)} end={p.end_offset}" for p in t.partitions))

    def fetch(self) -> None:
        a = self.send(FetchRequest, 12, cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=0,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[{"topic": self.r.topic, "partitions": [
                          {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                           "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in (0, 1)]}],
                      forgotten_topics_data=[], rack_id="")
        parts = [f"p{p.partition_index}:{err(p.error_code)} hw={p.high_watermark} records={bool(p.records)}"
                 for t in a.responses for p in sorted(t.partitions, key=lambda p: p.partition_index)]
        self.out(f"Fetch {self.r.topic}", f"{err(a.error_code)} " + " ".join(parts))

    def describe_producers(self) -> None:
        a = self.send(DescribeProducersRequest, 0, topics=[{"name": self.r.topic, "partition_indexes": [0]}])
        for t in a.topics:
            self.out(f"DescribeProducers {t.name}", " ".join(
                f"p{p.partition_index}:{err(p.error_code)} producers={len(p.active_producers)}" for p in t.partitions))

    def describe_configs(self) -> None:
        a = self.send(DescribeConfigsRequest, 4, resources=[
            {"resource_type": CONFIG_TOPIC, "resource_name": self.r.topic, "configuration_keys": ["cleanup.policy"]},
            {"resource_type": CONFIG_BROKER, "resource_name": str(self.node), "configuration_keys": ["num.partitions"]},
        ], include_synonyms=False, include_documentation=False)
        # By resource: Kafka answers the resources it may describe first (a list keyed by resource).
        for res in sorted(a.results, key=lambda res: res.resource_type):
            kind = "topic" if res.resource_type == CONFIG_TOPIC else "broker"
            values = ",".join(f"{c.name}={c.value}" for c in res.configs)
            self.out(f"DescribeConfigs {kind}", f"{err(res.error_code)} [{values}]")

    def alter_configs(self) -> None:
        a = self.send(IncrementalAlterConfigsRequest, 1, resources=[
            {"resource_type": CONFIG_TOPIC, "resource_name": self.r.topic,
             "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}]},
            {"resource_type": CONFIG_BROKER, "resource_name": str(self.node),
             "configs": [{"name": "log.retention.ms", "config_operation": 1, "value": None}]},
        ], validate_only=True)
        for res in sorted(a.responses, key=lambda res: res.resource_type):
            kind = "topic" if res.resource_type == CONFIG_TOPIC else "broker"
            self.out(f"IncrementalAlterConfigs {kind} (validate only)", err(res.error_code))
        a = self.send(AlterConfigsRequest, 2, resources=[
            {"resource_type": CONFIG_TOPIC, "resource_name": self.r.topic,
             "configs": [{"name": "retention.ms", "value": "7200000"}]}], validate_only=False)
        for res in a.responses:
            self.out("AlterConfigs topic", err(res.error_code))

    def create_partitions(self) -> None:
        a = self.send(CreatePartitionsRequest, 3, topics=[{"name": self.r.topic, "count": 3, "assignments": None}],
                      timeout_ms=10000, validate_only=False)
        for t in a.results:
            self.out(f"CreatePartitions {t.name}", err(t.error_code))

    def create_topics(self) -> None:
        r = self.r
        a = self.send(CreateTopicsRequest, 7, topics=[
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for name in (r.new, r.topic)], timeout_ms=10000, validate_only=False)
        # By name: Kafka answers the topics it may not create after the others, Kafgres in the request's order
        # (the results are a collection keyed by name; no client sees the order).
        for t in sorted(a.topics, key=lambda t: t.name):
            configs = "None" if t.configs is None else f"{len(t.configs) > 0}"
            self.out(f"CreateTopics {t.name}", f"{err(t.error_code)} partitions={t.num_partitions} "
                                              f"replication={t.replication_factor} id={self.ctx.norm.topic_id(t.topic_id)} "
                                              f"configs={configs} config_error={err(t.topic_config_error_code)}")

    def produce(self) -> None:
        r = self.r
        a = self.send(ProduceRequest, 9, transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
            {"name": name, "partition_data": [{"index": 0, "records": records(1)}]} for name in (r.topic, r.missing)])
        for t in sorted(a.responses, key=lambda t: t.name):
            self.out(f"Produce {t.name}", " ".join(f"p{p.index}:{err(p.error_code)}" for p in t.partition_responses))

    def delete_records(self) -> None:
        a = self.send(DeleteRecordsRequest, 2, topics=[{"name": self.r.topic, "partitions": [
            {"partition_index": 0, "offset": 1}]}], timeout_ms=10000)
        for t in a.topics:
            self.out(f"DeleteRecords {t.name}", " ".join(
                f"p{p.partition_index}:{err(p.error_code)} low={p.low_watermark}" for p in t.partitions))

    def delete_topics(self) -> None:
        r = self.r
        a = self.send(DeleteTopicsRequest, 6, topics=[{"name": n, "topic_id": None} for n in (r.topic, r.missing)],
                      timeout_ms=10000)
        for t in sorted(a.responses, key=lambda t: t.name or ""):
            self.out(f"DeleteTopics {t.name}", err(t.error_code))

    # --- groups -----------------------------------------------------------------------

    def find_coordinator(self) -> None:
        for key_type, key in ((0, self.r.group), (1, self.r.txn)):
            a = self.send(FindCoordinatorRequest, 4, key_type=key_type, coordinator_keys=[key])
            for c in a.coordinators:
                self.out(f"FindCoordinator {'group' if key_type == 0 else 'transaction'} {c.key}",
                         f"{err(c.error_code)} node={self.ctx.norm.node(c.node_id)}")

    def offset_fetch(self) -> None:
        for topics in ([{"name": self.r.topic, "partition_indexes": [0]}], None):
            a = self.send(OffsetFetchRequest, 8, groups=[{"group_id": self.r.group, "topics": topics}],
                          require_stable=False)
            for g in a.groups:
                parts = [f"{t.name}:p{p.partition_index}:{err(p.error_code)}@{p.committed_offset}"
                         for t in g.topics for p in t.partitions]
                self.out(f"OffsetFetch {g.group_id} {'named' if topics else 'all'} topics",
                         f"{err(g.error_code)} {' '.join(parts) or 'none'}")

    def offset_commit(self) -> None:
        a = self.send(OffsetCommitRequest, 8, group_id=self.r.group, generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, topics=[{"name": self.r.topic, "partitions": [
                          {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                           "committed_metadata": ""}]}])
        for t in a.topics:
            self.out(f"OffsetCommit {self.r.group} {t.name}", " ".join(
                f"p{p.partition_index}:{err(p.error_code)}" for p in t.partitions))

    def offset_delete(self) -> None:
        a = self.send(OffsetDeleteRequest, 0, group_id=self.r.group, topics=[{"name": self.r.topic, "partitions": [
            {"partition_index": 0}]}])
        parts = [f"{t.name}:p{p.partition_index}:{err(p.error_code)}" for t in a.topics for p in t.partitions]
        self.out(f"OffsetDelete {self.r.group}", f"{err(a.error_code)} {' '.join(parts) or 'none'}")

    def describe_groups(self) -> None:
        a = self.send(DescribeGroupsRequest, 5, groups=[self.r.group], include_authorized_operations=True)
        for g in a.groups:
            self.out(f"DescribeGroups {g.group_id}", f"{err(g.error_code)} state={g.group_state!r} "
                                                    f"ops={ops_text(g.authorized_operations)}")

    def list_groups(self) -> None:
        a = self.send(ListGroupsRequest, 4, states_filter=[])
        listed = sorted(g.group_id for g in a.groups if self.ours(g.group_id))
        self.out("ListGroups", f"{err(a.error_code)} {' '.join(listed) or 'none'}")

    def classic_group(self) -> None:
        group = self.r.group
        a = self.send(JoinGroupRequest, 5, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                      member_id="", group_instance_id=None, protocol_type="consumer",
                      protocols=[{"name": "range", "metadata": b""}])
        self.out(f"JoinGroup {group}", err(a.error_code))
        a = self.send(SyncGroupRequest, 3, group_id=group, generation_id=1, member_id="bogus",
                      group_instance_id=None, assignments=[])
        self.out(f"SyncGroup {group} (unknown member)", err(a.error_code))
        a = self.send(HeartbeatRequest, 3, group_id=group, generation_id=1, member_id="bogus", group_instance_id=None)
        self.out(f"Heartbeat {group} (unknown member)", err(a.error_code))
        a = self.send(LeaveGroupRequest, 3, group_id=group, members=[{"member_id": "bogus",
                                                                      "group_instance_id": None}])
        self.out(f"LeaveGroup {group} (unknown member)",
                 f"{err(a.error_code)} members={[err(m.error_code) for m in a.members]}")

    def consumer_group(self) -> None:
        group = self.r.consumer_group
        a = self.send(kafka_raw.ConsumerGroupHeartbeatRequest, 0, group_id=group, member_id="", member_epoch=0,
                      rebalance_timeout_ms=30000, subscribed_topic_names=[self.r.topic], server_assignor=None,
                      topic_partitions=[])
        self.out(f"ConsumerGroupHeartbeat {group} (join)", f"{err(a.error_code)} joined={a.member_epoch > 0}")
        member, epoch = a.member_id, a.member_epoch
        a = self.send(kafka_raw.ConsumerGroupDescribeRequest, 0, group_ids=[group], include_authorized_operations=True)
        for g in a.groups:
            self.out(f"ConsumerGroupDescribe {g.group_id}", f"{err(g.error_code)} state={g.group_state!r} "
                                                           f"members={len(g.members)} "
                                                           f"ops={ops_text(g.authorized_operations)}")
        if epoch > 0:
            a = self.send(kafka_raw.ConsumerGroupHeartbeatRequest, 0, group_id=group, member_id=member,
                          member_epoch=-1)
            self.out(f"ConsumerGroupHeartbeat {group} (leave)", err(a.error_code))

    def delete_groups(self) -> None:
        a = self.send(DeleteGroupsRequest, 2, groups_names=[self.r.group])
        for g in a.results:
            self.out(f"DeleteGroups {g.group_id}", err(g.error_code))

    # --- transactions ----------------------------------------------------------------

    def transactions(self) -> None:
        r = self.r
        a = self.send(InitProducerIdRequest, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                      producer_epoch=-1)
        self.out("InitProducerId idempotent", f"{err(a.error_code)} producer={a.producer_id >= 0}")
        a = self.send(InitProducerIdRequest, 4, transactional_id=r.txn, transaction_timeout_ms=60000,
                      producer_id=-1, producer_epoch=-1)
        self.out(f"InitProducerId {r.txn}", f"{err(a.error_code)} epoch={a.producer_epoch}")
        if a.error_code == 0:
            self.pid, self.epoch = a.producer_id, a.producer_epoch
        ids = {"transactional_id": r.txn, "producer_id": self.pid, "producer_epoch": self.epoch}
        a = self.send(AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id=r.txn,
                      v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=self.epoch,
                      v3_and_below_topics=[{"name": r.topic, "partitions": [0]}])
        self.out(f"AddPartitionsToTxn {r.txn}", " ".join(
            f"{t.name}:p{p.partition_index}:{err(p.partition_error_code)}"
            for t in a.results_by_topic_v3_and_below for p in t.results_by_partition))
        a = self.send(AddOffsetsToTxnRequest, 3, group_id=r.group, **ids)
        self.out(f"AddOffsetsToTxn {r.txn} {r.group}", err(a.error_code))
        a = self.send(TxnOffsetCommitRequest, 3, group_id=r.group, generation_id=-1, member_id="",
                      group_instance_id=None, topics=[{"name": r.topic, "partitions": [
                          {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                           "committed_metadata": ""}]}], **ids)
        self.out(f"TxnOffsetCommit {r.txn} {r.group}", " ".join(
            f"{t.name}:p{p.partition_index}:{err(p.error_code)}" for t in a.topics for p in t.partitions))
        a = self.send(DescribeTransactionsRequest, 0, transactional_ids=[r.txn])
        for t in a.transaction_states:
            self.out(f"DescribeTransactions {t.transactional_id}", f"{err(t.error_code)} state={t.transaction_state!r}")
        a = self.send(ListTransactionsRequest, 0, state_filters=[], producer_id_filters=[])
        listed = sorted(f"{t.transactional_id}:{t.transaction_state}" for t in a.transaction_states
                        if self.ours(t.transactional_id))
        self.out("ListTransactions", f"{err(a.error_code)} {' '.join(listed) or 'none'}")
        a = self.send(EndTxnRequest, 3, committed=False, **ids)
        self.out(f"EndTxn {r.txn} (abort)", err(a.error_code))

    # --- the cluster ------------------------------------------------------------------

    def describe_cluster(self) -> None:
        a = self.send(DescribeClusterRequest, 0, include_cluster_authorized_operations=True)
        self.out("DescribeCluster", f"{err(a.error_code)} brokers={len(a.brokers)} "
                                    f"ops={ops_text(a.authorized_operations)}")

    def describe_log_dirs(self) -> None:
        a = self.send(DescribeLogDirsRequest, 4, topics=[{"topic": self.r.topic, "partitions": [0, 1]}])
        shown = sorted(f"{t.name}:{sorted(p.partition_index for p in t.partitions)}"
                       for d in a.results for t in d.topics if self.ours(t.name))
        self.out("DescribeLogDirs", f"{err(a.error_code)} dirs={len(a.results)} {' '.join(shown) or 'none'}")

    def acls(self) -> None:
        r = self.r
        a = self.send(DescribeAclsRequest, 3, resource_type_filter=TOPIC, resource_name_filter=r.topic,
                      pattern_type_filter=MATCH, principal_filter=None, host_filter=None, operation=1,
                      permission_type=1)
        bindings = sorted(binding_text((res.resource_type, res.resource_name, res.pattern_type, acl.principal,
                                        acl.host, acl.operation, acl.permission_type))
                          for res in a.resources for acl in res.acls)
        self.out(f"DescribeAcls {r.topic} (match)", f"{err(a.error_code)} [{'; '.join(bindings)}]")
        binding = {"resource_type": TOPIC, "resource_name": r.topic, "resource_pattern_type": LITERAL,
                   "principal": "User:acl_nobody", "host": "*", "operation": OPERATION_CODES["DESCRIBE"],
                   "permission_type": ALLOW}
        a = self.send(CreateAclsRequest, 3, creations=[binding])
        self.out("CreateAcls", " ".join(err(x.error_code) for x in a.results))
        a = self.send(DeleteAclsRequest, 3, filters=[{
            "resource_type_filter": TOPIC, "resource_name_filter": r.topic, "pattern_type_filter": LITERAL,
            "principal_filter": "User:acl_nobody", "host_filter": "*", "operation": OPERATION_CODES["DESCRIBE"],
            "permission_type": ALLOW}])
        self.out("DeleteAcls", " ".join(f"{err(x.error_code)} matching={len(x.matching_acls)}"
                                        for x in a.filter_results))

    def client_quotas(self) -> None:
        a = self.send(DescribeClientQuotasRequest, 1, components=[{"entity_type": "user", "match_type": 0,
                                                                  "match": self.r.user}], strict=False)
        self.out("DescribeClientQuotas", f"{err(a.error_code)} entries={len(a.entries or [])}")
        a = self.send(AlterClientQuotasRequest, 1, entries=[{
            "entity": [{"entity_type": "user", "entity_name": self.r.user}],
            "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}], validate_only=True)
        self.out("AlterClientQuotas (validate only)", " ".join(err(e.error_code) for e in a.entries))

    def run(self, epoch: int) -> None:
        # Reads first, then what changes state; what deletes last.
        self.metadata()
        self.describe_topic_partitions()
        self.list_offsets()
        self.offset_for_leader_epoch(epoch)
        self.fetch()
        self.describe_producers()
        self.describe_configs()
        self.find_coordinator()
        self.offset_fetch()
        self.describe_groups()
        self.list_groups()
        self.describe_cluster()
        self.describe_log_dirs()
        self.acls()
        self.client_quotas()
        self.offset_commit()
        self.classic_group()
        self.consumer_group()
        self.transactions()
        self.produce()
        self.alter_configs()
        self.create_partitions()
        self.create_topics()
        self.delete_records()
        self.offset_delete()
        self.delete_groups()
        self.delete_topics()


@scenario(secured=True)
def scenario_acl_matrix(ctx: Context) -> None:
    """Every API x principals allowed (LITERAL, PREFIXED, wildcard), denied, without ACLs, on another host."""
    everyone = [Resources(ctx, user) for user in GRANTS]
    admin = kafka_raw.Session(ctx.bootstrap, kafka_python_config(SUPERUSER))
    try:
        producers = setup(ctx, admin, everyone)
        epoch = admin.send(kafka_raw.request(MetadataRequest, 12, topics=[{"name": everyone[0].topic}],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False)).topics[0].partitions[0]
        epoch = epoch.leader_epoch
        for r in everyone:
            ctx.out(f"principal {r.user}:", "; ".join(binding_text(b) for b in r.bindings()) or
                    ("super user" if r.user == SUPERUSER else "no ACL"))
            session = kafka_raw.Session(ctx.bootstrap, kafka_python_config(r.user))
            try:
                Battery(ctx, r, session, ctx.norm.node_id, producers[r.user]).run(epoch)
            finally:
                session.close()
        # Whether each auto-created topic exists in the end (Kafka creates it asynchronously: wait for those
        # Kafgres or Kafka said they would create, briefly).
        deadline = time.monotonic() + 15
        while True:
            listed = {t.name for t in admin.send(kafka_raw.request(
                MetadataRequest, 12, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)).topics}
            expected = {r.auto for r in everyone if r.auto_answer != 29}
            if expected <= listed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        ctx.out("auto-created topics:", " ".join(sorted(r.auto for r in everyone if r.auto in listed)) or "none")
    finally:
        admin.close()
