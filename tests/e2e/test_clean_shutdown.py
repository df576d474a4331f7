"""A fast shutdown stops the broker cleanly.

`pg_ctl restart -m fast` sends the worker SIGTERM. The worker must stop
accepting, flush every partition and exit by itself (exit code 0, so the
postmaster does not treat it as a crash), with no error in the server log,
while clients are connected and a consumer is long-polling.
"""

import re
import threading

from support import produce_all


def test_fast_shutdown_with_connected_clients_is_clean(
    kafgres, psql, make_producer, make_consumer, create_topic, topic_name
):
    name = create_topic(topic_name(), partitions=1)
    produce_all(make_producer({"acks": "all"}), [dict(topic=name, partition=0, value=b"x")])

    # A consumer long-polls at the log end while the server stops.
    from confluent_kafka import TopicPartition

    consumer = make_consumer({"fetch.wait.max.ms": 5000})
    consumer.assign([TopicPartition(name, 0, 1)])
    stop = threading.Event()

    def poll_until_stopped():
        while not stop.is_set():
            consumer.poll(0.2)

    poller = threading.Thread(target=poll_until_stopped, daemon=True)
    poller.start()
    old_pid = psql.broker_pid()
    log_offset = kafgres.pg_log_size()
    try:
        kafgres.launcher("restart")
    finally:
        stop.set()
        poller.join(timeout=10)
    log = kafgres.pg_log_since(log_offset)

    shutdown = log[: log.index("database system is shut down")]
    assert f"[{old_pid}] LOG:  kafgres: shutting down the broker" in shutdown
    assert f"[{old_pid}] LOG:  kafgres: broker stopped" in shutdown
    # Stopped by itself, not killed by the postmaster, and nothing went wrong.
    assert not re.search(
        r'background worker "kafgres broker" \(PID \d+\) (was terminated by signal|exited with exit code [1-9])', shutdown
    ), shutdown
    assert not re.search(r"\b(ERROR|PANIC|FATAL):.*kafgres", shutdown), shutdown
    assert "did not stop" not in shutdown
    # And it is back.
    assert psql.broker_pid() != old_pid
