"""What bounds clients, measured on the broker's process (docs/security.md, "What bounds a client").

A throwaway cluster of its own (Postgres on 127.0.0.1:5492, Kafka on
127.0.0.1:9492) with `kafgres.request_memory_mb = 64` and
`kafgres.max_connections_per_ip = 100`:

- 20 connections each announce a 100 MB frame, try to send 20 MB of it and
  stall: without the budget the broker would hold 400 MB of their bytes (and
  have allocated 2 GB for them); with it (a frame larger than the budget
  takes all of it),
  the broker process's resident memory grows by at most the budget (plus
  32 MB of slack; the kernel's socket buffers are not the process's), a
  small request waits while the budget is spent, and requests are served
  again once they go;
- 300 idle connections from 127.0.0.1: past the first 100 they are closed,
  a client from 127.0.0.2 is still served, and once they go a producer from
  127.0.0.1 is served again.

Every wait has a deadline; the cluster is stopped and removed at the end.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire
from support import ThrowawayCluster, port_is_free, wait_for_topic_metadata

PG_PORT = 5492
KAFKA_PORT = 9492
BUDGET_MB = 64
PER_ADDRESS = 100


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("limits", PG_PORT, KAFKA_PORT)

    def broker_pid(self) -> int:
        rows = self.sql("select pid from pg_stat_activity where backend_type = 'kafgres broker'")
        assert rows, "no kafgres broker process"
        return rows[0][0]


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the limits test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a limits-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.init({
            "kafgres.request_memory_mb": str(BUDGET_MB),
            "kafgres.max_connections_per_ip": str(PER_ADDRESS),
            "kafgres.max_connections": "1000",
        })
        c.start()
        c.sql("create extension kafgres")
        c.wait_until_serving(60)
        yield c
    finally:
        c.destroy()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def connect(source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", KAFKA_PORT))
    return sock


def test_stalled_frames_hold_no_more_than_the_budget(cluster: Cluster):
    pid = cluster.broker_pid()
    before = rss_mb(pid)
    chunk = b"\0" * (1 << 20)
    stalled = []
    try:
        for _ in range(20):
            sock = connect()
            sock.sendall(struct.pack(">i", 100 << 20))
            sock.setblocking(False)
            stalled.append(sock)
        # Send up to 20 MB each; a connection the broker does not read any more fills its socket
        # buffers and takes no more (the bytes the broker would have held are refused by TCP).
        deadline = time.monotonic() + 10
        sent = [0] * len(stalled)
        while time.monotonic() < deadline and any(s < (20 << 20) for s in sent):
            progressed = False
            for i, sock in enumerate(stalled):
                if sent[i] >= 20 << 20:
                    continue
                try:
                    sent[i] += sock.send(chunk)
                    progressed = True
                except BlockingIOError:
                    pass
            if not progressed:
                time.sleep(0.05)
                if not any(_writable(s) for s in stalled):
                    break
        time.sleep(1)
        grown = rss_mb(pid) - before
        total_sent = sum(sent) / (1 << 20)
        print(f"sent {total_sent:.0f} MB over {len(stalled)} stalled frames; broker RSS grew {grown:.0f} MB "
              f"(budget {BUDGET_MB} MB)")
        # Without the budget all 400 MB would be read (and held); with it the broker stops reading, TCP
        # stops the senders, and what was sent is the budget plus the kernel's socket buffers.
        assert total_sent >= BUDGET_MB, f"only {total_sent:.0f} MB sent: the test did not press the budget"
        assert total_sent < 20 * 20, "every byte was taken: nothing held the senders back"
        assert grown < BUDGET_MB + 32, f"the broker grew {grown:.0f} MB, past the {BUDGET_MB} MB budget"
        # While the budget is spent, even a small request waits.
        with kafka_wire.connect(cluster.bootstrap) as small:
            small.sendall(kafka_wire.api_versions_request(2, 1))
            small.settimeout(0.5)
            with pytest.raises(socket.timeout):
                small.recv(4)
    finally:
        for sock in stalled:
            sock.close()
    # Once they are gone, requests are read again.
    assert kafka_wire.broker_answers(cluster.bootstrap, timeout_s=10)


def _writable(sock: socket.socket) -> bool:
    import select

    _, writable, _ = select.select([], [sock], [], 0)
    return bool(writable)


def test_one_address_cannot_take_every_connection(cluster: Cluster):
    # The topic first: the admin client's own connections come from 127.0.0.1 too.
    topic = f"e2e-limits-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    wait_for_topic_metadata(admin, topic, 1)
    del admin
    time.sleep(0.5)
    idle = []
    try:
        for _ in range(300):
            idle.append(connect())
        time.sleep(0.5)
        # The first PER_ADDRESS are open; the rest were closed by the broker on accept.
        closed = 0
        for sock in idle:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed == 300 - PER_ADDRESS, f"{closed} of 300 closed, expected {300 - PER_ADDRESS}"
        with kafka_wire.connect(cluster.bootstrap) as blocked:
            blocked.sendall(kafka_wire.api_versions_request(2, 1))
            assert kafka_wire.wait_for_close(blocked, 5)[0], "a 101st connection from 127.0.0.1 was served"
        # Another address is served.
        other = connect("127.0.0.2")
        other.sendall(kafka_wire.api_versions_request(2, 1))
        assert kafka_wire.read_response(other), "a client from 127.0.0.2 was not served"
        other.close()
    finally:
        for sock in idle:
            sock.close()
    # The slots come back: a producer from 127.0.0.1 is served again.
    deadline = time.monotonic() + 10
    while not kafka_wire.broker_answers(cluster.bootstrap, timeout_s=1):
        assert time.monotonic() < deadline, "the freed slots were not given back"
        time.sleep(0.2)
    outcome: list = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"after", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(20)
    assert outcome == [None], outcome
