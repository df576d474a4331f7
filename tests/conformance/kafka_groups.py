"""The classic group protocol by hand, with kafka-python's request codec.

Clients retry or hide most group errors, so `walk` sends the requests one by
one (fixed versions: JoinGroup 5, SyncGroup 3, Heartbeat 3, LeaveGroup 3,
OffsetCommit 7, OffsetFetch 7, FindCoordinator 3) through one connection to
the broker and returns one line per answer: the error code and the fields
that a correct broker fills the same way.
"""

from __future__ import annotations

import struct
import time

from kafka import KafkaAdminClient
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from normalize import Normalizer

COORDINATOR_WAIT_S = 30


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data (Kafka decodes it for the "consumer" type)."""
    return struct.pack(">h", 0) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions, no user data."""
    return (struct.pack(">h", 0) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def walk(bootstrap: str, group: str, topic: str, norm: Normalizer) -> list[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    manager = admin._manager  # kafka-python's connection manager: sends one request, returns its answer
    node = manager.cluster.brokers().pop().node_id if manager.cluster.brokers() else 0
    lines: list[str] = []

    async def _send(request):
        return await manager.send(request, node_id=node)

    def send(request):
        return manager.run(_send, request)

    try:
        # Kafka creates __consumer_offsets on the first FindCoordinator and answers
        # COORDINATOR_NOT_AVAILABLE until it is loaded: wait for a coordinator (not transcribed).
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            r = send(FindCoordinatorRequest(key=group, key_type=0, version=3))
            if r.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        lines.append(f"FindCoordinator group: error={r.error_code} node={norm.node(r.node_id)} "
                     f"host={r.host} port_is_bootstrap={bootstrap.endswith(':' + str(r.port))}")

        def join(member_id: str, protocols=("range",), protocol_type="consumer"):
            return send(JoinGroupRequest(
                group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
                group_instance_id=None, protocol_type=protocol_type,
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=p, metadata=subscription(topic))
                           for p in protocols], version=5))

        def heartbeat(generation: int, member_id: str) -> int:
            return send(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                         group_instance_id=None, version=3)).error_code

        def sync(generation: int, member_id: str, assignments: list[tuple[str, bytes]]):
            return send(SyncGroupRequest(
                group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                             for m, a in assignments], version=3))

        def commit(generation: int, member_id: str, offset: int) -> str:
            Topic = OffsetCommitRequest.OffsetCommitRequestTopic
            r = send(OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                group_instance_id=None,
                topics=[Topic(name=topic, partitions=[Topic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="m")])], version=7))
            return str([(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics])

        def fetch() -> str:
            r = send(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=[0, 1])], require_stable=False, version=7))
            return (f"error={r.error_code} " + str([(t.name, [(p.partition_index, p.committed_offset,
                                                             p.metadata, p.error_code) for p in t.partitions])
                                                   for t in r.topics]))

        lines.append(f"Heartbeat, no such group: error={heartbeat(1, 'nobody')}")
        lines.append(f"OffsetFetch, no such group: {fetch()}")
        r = join("", protocol_type="")
        lines.append(f"JoinGroup, empty protocol type: error={r.error_code}")
        r = join("")
        member = r.member_id
        lines.append(f"JoinGroup, no member id: error={r.error_code} generation={r.generation_id} "
                     f"member_id={norm.line(member)} members={len(r.members)}")
        r = join(member)
        generation = r.generation_id
        lines.append(f"JoinGroup: error={r.error_code} generation={generation} protocol={r.protocol_type}/"
                     f"{r.protocol_name} leader_is_me={r.leader == member} member_is_me={r.member_id == member} "
                     f"members={[(m.member_id == member, bytes(m.metadata) == subscription(topic)) for m in r.members]}")
        r = join("unknown-member-1")
        lines.append(f"JoinGroup, unknown member id: error={r.error_code} generation={r.generation_id}")
        r = sync(generation + 1, member, [])
        lines.append(f"SyncGroup, wrong generation: error={r.error_code}")
        r = sync(generation, "unknown-member-1", [])
        lines.append(f"SyncGroup, unknown member: error={r.error_code}")
        r = sync(generation, member, [(member, assignment(topic, [0]))])
        lines.append(f"SyncGroup: error={r.error_code} assignment_echoed={bytes(r.assignment) == assignment(topic, [0])} "
                     f"protocol={r.protocol_type}/{r.protocol_name}")
        lines.append(f"Heartbeat: error={heartbeat(generation, member)}")
        lines.append(f"Heartbeat, wrong generation: error={heartbeat(generation + 1, member)}")
        lines.append(f"Heartbeat, unknown member: error={heartbeat(generation, 'unknown-member-1')}")
        lines.append(f"OffsetCommit: {commit(generation, member, 1)}")
        lines.append(f"OffsetCommit, wrong generation: {commit(generation + 1, member, 2)}")
        lines.append(f"OffsetCommit, unknown member: {commit(generation, 'unknown-member-1', 2)}")
        lines.append(f"OffsetCommit, no generation (simple commit) to an active group: {commit(-1, '', 2)}")
        lines.append(f"OffsetFetch: {fetch()}")
        r = send(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=None)
            for m in (member, "unknown-member-1")], version=3))
        lines.append(f"LeaveGroup: error={r.error_code} members={[(m.member_id == member, m.error_code) for m in r.members]}")
        lines.append(f"Heartbeat after leaving: error={heartbeat(generation, member)}")
        lines.append(f"OffsetCommit, no generation, empty group: {commit(-1, '', 3)}")
        lines.append(f"OffsetCommit, old generation, empty group: {commit(generation, member, 4)}")
        lines.append(f"OffsetFetch: {fetch()}")
    finally:
        admin.close()
    return lines
