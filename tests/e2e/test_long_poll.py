"""Fetch long-polling: woken by an append, and otherwise held for max_wait_ms.

A consumer waits at the end of an empty partition with fetch.wait.max.ms=5000,
so each Fetch it sends may sit at the broker for up to 5 s. A record produced
meanwhile must reach it promptly: the broker has to answer the pending Fetch
when the record becomes visible, not when the wait times out. Conversely, a
raw Fetch with nothing to return is held for its max_wait_ms and then
answered empty, without error.
"""

import threading
import time

from confluent_kafka import TopicPartition

import kafka_wire
from support import poll_record

FETCH_WAIT_MS = 5000
# Generous on purpose: this is a behaviour check, not a latency target. The
# bound is well under FETCH_WAIT_MS, so it only fails when the append does not
# wake the pending Fetch and the record waits for the fetch timeout instead.
DELIVERY_TO_RECEIPT_S_MAX = 2.5
PRODUCE_AFTER_S = 1.0
TEST_DEADLINE_S = 20.0


def test_append_wakes_pending_fetch(make_consumer, make_producer, create_topic, topic_name):
    name = create_topic(topic_name(), partitions=1)
    consumer = make_consumer({"fetch.wait.max.ms": FETCH_WAIT_MS, "fetch.min.bytes": 1})
    polling = threading.Event()
    stop = threading.Event()
    received = []  # (monotonic time, message)
    errors = []

    def poll_loop():
        # The partition is empty, so offset 0 is its end.
        consumer.assign([TopicPartition(name, 0, 0)])
        polling.set()
        deadline = time.monotonic() + TEST_DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            msg = poll_record(consumer, 0.1, errors)
            if msg is not None:
                received.append((time.monotonic(), msg))
                return

    thread = threading.Thread(target=poll_loop, name="long-poll-consumer", daemon=True)
    thread.start()
    try:
        assert polling.wait(10), "consumer thread did not start"
        # Let the consumer connect and park a Fetch at the broker.
        time.sleep(PRODUCE_AFTER_S)

        producer = make_producer({"linger.ms": 0})
        delivered_at = []

        def on_delivery(err, msg):
            delivered_at.append((time.monotonic(), err, msg))

        producer.produce(name, key=b"k", value=b"wake up", partition=0, on_delivery=on_delivery)
        assert producer.flush(15) == 0, "record not acknowledged within 15 s"
        [(delivery_time, err, report)] = delivered_at
        assert err is None, err
        assert report.offset() == 0

        thread.join(TEST_DEADLINE_S)
    finally:
        stop.set()
        thread.join(5)

    assert received, f"consumer received nothing within {TEST_DEADLINE_S:.0f}s; client errors: {errors}"
    [(receipt_time, msg)] = received
    assert (msg.offset(), msg.key(), msg.value()) == (0, b"k", b"wake up")
    delay_s = receipt_time - delivery_time
    assert delay_s < DELIVERY_TO_RECEIPT_S_MAX, (
        f"record reached the consumer {delay_s:.2f}s after its delivery report: "
        f"the pending Fetch was not woken by the append (fetch.wait.max.ms={FETCH_WAIT_MS})"
    )


def test_fetch_on_empty_partition_waits_max_wait(bootstrap, create_topic, topic_name):
    """The other half of long polling, on the wire: with nothing to return, a
    Fetch with min_bytes=1 is held for its max_wait_ms, then answered empty
    without error (not answered at once, which would make clients spin)."""
    name = create_topic(topic_name(), partitions=1)
    max_wait_ms = 1000
    with kafka_wire.connect(bootstrap, timeout_s=10) as sock:
        # Apache Kafka may answer NOT_LEADER_OR_FOLLOWER for a moment after
        # creating a topic; wait (bounded) until a zero-wait Fetch succeeds.
        deadline = time.monotonic() + 10
        while True:
            sock.sendall(kafka_wire.fetch_v4_request(30, name, 0, fetch_offset=0, max_wait_ms=0))
            ready = kafka_wire.parse_fetch_v4_response(kafka_wire.read_response(sock)).partitions[(name, 0)]
            if ready.error_code == kafka_wire.ERROR_NONE or time.monotonic() > deadline:
                break
            time.sleep(0.1)

        started = time.monotonic()
        sock.sendall(kafka_wire.fetch_v4_request(31, name, 0, fetch_offset=0, max_wait_ms=max_wait_ms))
        response = kafka_wire.parse_fetch_v4_response(kafka_wire.read_response(sock))
        elapsed_s = time.monotonic() - started
    assert response.correlation_id == 31
    partition = response.partitions[(name, 0)]
    assert (partition.error_code, partition.high_watermark) == (kafka_wire.ERROR_NONE, 0)
    assert not partition.records, "records from an empty partition"
    # Lower bound a little under max_wait for timer granularity; the upper bound only catches a hang.
    assert 0.8 * max_wait_ms / 1000 <= elapsed_s < max_wait_ms / 1000 + 3, f"empty Fetch answered after {elapsed_s:.2f}s"
