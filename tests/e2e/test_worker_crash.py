"""A kill -9 of the broker worker loses nothing acknowledged.

Records produced with acks=all are acknowledged only once durable. SIGKILL
the 'kafgres broker' background worker: the postmaster sees a crashed child,
resets the cluster and starts a new worker. Within a bounded time the Kafka
port answers again from a new worker process, every acknowledged record is
readable at its offset, the same producer keeps working at the next offset,
and the server log shows the kill but no PANIC.
"""

import os
import signal
import time

import kafka_wire
from support import PsqlError, produce_all, wait_for_topic_metadata

RECORD_COUNT = 30
RECOVERY_TIMEOUT_S = 30.0
LOG_WAIT_S = 10.0


def wait_for_new_worker(kafgres, psql, old_pid: int) -> int:
    """Waits until the Kafka port answers ApiVersions and one worker with a new pid is running."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    state = "not checked yet"
    while time.monotonic() < deadline:
        try:
            pids = psql.broker_pids(timeout_s=5)
        except PsqlError as e:  # the postmaster is resetting or recovering
            state = f"psql: {e}"
            time.sleep(0.3)
            continue
        answers = kafka_wire.broker_answers(kafgres.bootstrap)
        if len(pids) == 1 and pids[0] != old_pid and answers:
            return pids[0]
        state = f"worker pids {pids}, Kafka port answers: {answers}"
        time.sleep(0.3)
    raise AssertionError(f"broker not back {RECOVERY_TIMEOUT_S:.0f}s after kill -9 of pid {old_pid}: {state}")


def test_acked_records_survive_worker_kill(kafgres, admin, psql, make_producer, create_topic, topic_name, consume):
    name = create_topic(topic_name(), partitions=1)
    log_offset = kafgres.pg_log_size()

    producer = make_producer({"acks": "all"})
    values = [f"acked before the crash {i}".encode() for i in range(RECORD_COUNT)]
    delivered = produce_all(producer, [dict(topic=name, partition=0, value=v) for v in values])
    assert [m.offset() for m in delivered] == list(range(RECORD_COUNT))

    old_pid = psql.broker_pid()
    os.kill(old_pid, signal.SIGKILL)
    new_pid = wait_for_new_worker(kafgres, psql, old_pid)
    assert new_pid != old_pid

    wait_for_topic_metadata(admin, name, partitions=1)
    received = consume(name, 0, RECORD_COUNT)
    assert [(m.offset(), m.value()) for m in received] == list(enumerate(values))

    # The producer from before the crash reconnects and continues at the next offset.
    after = produce_all(producer, [dict(topic=name, partition=0, value=b"after the crash")])
    assert after[0].offset() == RECORD_COUNT
    [msg] = consume(name, 0, 1, start_offset=RECORD_COUNT)
    assert (msg.offset(), msg.value()) == (RECORD_COUNT, b"after the crash")

    # The postmaster logged the kill (so this really was a crash and a reset),
    # and nothing in the cluster escalated to PANIC.
    expected = f"(PID {old_pid}) was terminated by signal 9"
    deadline = time.monotonic() + LOG_WAIT_S
    log = kafgres.pg_log_since(log_offset)
    while expected not in log and time.monotonic() < deadline:
        time.sleep(0.2)
        log = kafgres.pg_log_since(log_offset)
    assert expected in log, f"server log {kafgres.pg_log} does not report the kill: no {expected!r}"
    panics = [line for line in log.splitlines() if "PANIC" in line]
    assert not panics, "PANIC in the server log after the kill:\n" + "\n".join(panics[:20])
