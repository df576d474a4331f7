"""The broker's own time per request, as SQL sees it (`kafgres.request_latency`).

Real clients produce and long-poll against the worker; the histograms of the
Produce span and of the woken-Fetch span must grow by the requests made,
agree with the counters of `kafgres.broker_metrics` that sum the same spans,
and use the power-of-two bounds the view documents.
"""

import threading
import time

from confluent_kafka import TopicPartition
from support import poll_record

SENDS = 5
FETCH_WAIT_MS = 5000
DEADLINE_S = 20.0

SPANS_SQL = """
SELECT (SELECT value FROM kafgres.broker_metrics WHERE name = 'produce_answered'),
       (SELECT sum(requests) FROM kafgres.request_latency WHERE span = 'produce'),
       (SELECT value FROM kafgres.broker_metrics WHERE name = 'fetch_woken'),
       (SELECT sum(requests) FROM kafgres.request_latency WHERE span = 'fetch_woken')
"""


def spans(psql) -> tuple[int, int, int, int]:
    [row] = psql.rows(SPANS_SQL)
    return tuple(int(v) for v in row)


def test_request_latency_counts_produces_and_woken_fetches(psql, make_producer, make_consumer, create_topic,
                                                           topic_name):
    name = create_topic(topic_name(), partitions=1)
    before = spans(psql)
    assert before[0] == before[1] and before[2] == before[3], f"counters and histograms disagree at rest: {before}"

    consumer = make_consumer({"fetch.wait.max.ms": FETCH_WAIT_MS, "fetch.min.bytes": 1})
    received = []
    errors = []

    def poll_at_log_end():
        consumer.assign([TopicPartition(name, 0, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while not received and time.monotonic() < deadline:
            msg = poll_record(consumer, 0.1, errors)
            if msg is not None:
                received.append(msg)

    thread = threading.Thread(target=poll_at_log_end, name="long-poll-consumer", daemon=True)
    thread.start()
    time.sleep(1.0)  # the consumer parks a Fetch at the empty log's end
    producer = make_producer({"linger.ms": 0, "acks": "all"})
    for i in range(SENDS):
        producer.produce(name, value=f"r{i}".encode(), partition=0)
        assert producer.flush(15) == 0, "a record was not acknowledged within 15 s"
    thread.join(DEADLINE_S)
    assert received, f"the parked consumer received nothing; client errors: {errors}"

    # A span is counted after its answer is written: the client may see the
    # answer first, so wait (bounded) for the broker to record it.
    deadline = time.monotonic() + 10
    while True:
        after = spans(psql)
        grown = (after[1] - before[1], after[3] - before[3])
        if (grown[0] >= SENDS and grown[1] >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert grown[0] >= SENDS, f"produce histogram grew by {grown[0]}, {SENDS} produces were acknowledged"
    assert grown[1] >= 1, "no woken fetch in the histogram though a parked consumer got the first record"
    assert after[0] == after[1] and after[2] == after[3], f"counters and histograms disagree: {after}"

    rows = psql.rows("SELECT span, below_micros, requests FROM kafgres.request_latency ORDER BY span, "
                     "below_micros NULLS LAST")
    for span in ("fetch_woken", "produce"):
        bounds = [r[1] for r in rows if r[0] == span]
        assert bounds == [str(1 << i) for i in range(23)] + [""], f"{span} bounds: {bounds}"
