"""Client telemetry (KIP-714) with the Java client 4.4, which pushes metrics to a broker that offers them.

With `kafgres.client_telemetry_metrics` empty (the default) ApiVersions does not list
GetTelemetrySubscriptions (71) and PushTelemetry (72), as a Kafka broker without a telemetry reporter.
Set (here to the Java client's own prefixes) and reloaded, the keys are
advertised; the Java clients of tests/java's `produce-consume-plain` subscribe, and its consumer (alive
for seconds) pushes, the last push when it closes: `kafgres.client_metrics` shows its metrics, only those
asked for. Its producer closes some 50 ms after its subscription came, before its first push is due, and
the 4.4 producer then skips its terminating push (its telemetry log: PUSH_NEEDED -> TERMINATING_PUSH_NEEDED
-> TERMINATED), so no producer metric is expected. Reset, the keys go again.
"""

from __future__ import annotations

import time

import kafka_wire
from test_java_client import java_build, probe  # noqa: F401 (java_build is a fixture)

KEY_GET_TELEMETRY_SUBSCRIPTIONS = 71
KEY_PUSH_TELEMETRY = 72
PREFIXES = "org.apache.kafka.producer.,org.apache.kafka.consumer."
DEADLINE_S = 30.0


def advertised(bootstrap: str) -> set[int]:
    return set(kafka_wire.api_versions(bootstrap).apis) & {KEY_GET_TELEMETRY_SUBSCRIPTIONS, KEY_PUSH_TELEMETRY}


def wait_until(what: str, predicate) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {DEADLINE_S:.0f}s"
        time.sleep(0.2)


def set_telemetry(psql, metrics: str | None, interval_ms: int | None) -> None:
    statements = []
    for name, value in (("client_telemetry_metrics", metrics), ("client_telemetry_push_interval_ms", interval_ms)):
        statements.append(f"ALTER SYSTEM RESET kafgres.{name}" if value is None
                          else f"ALTER SYSTEM SET kafgres.{name} = '{value}'")
    psql.rows(";\n".join([*statements, "SELECT pg_reload_conf()"]) + ";")


def test_the_java_client_pushes_its_metrics_when_offered(java_build, bootstrap, psql, topic_name):  # noqa: F811
    assert advertised(bootstrap) == set(), "telemetry is offered before the test turned it on"
    try:
        # A push interval the run outlives: the consumer's one push is its terminating one, which no interval
        # holds back, and its metrics are kept for three intervals after it.
        set_telemetry(psql, PREFIXES, 20000)
        wait_until("the telemetry APIs advertised", lambda: advertised(bootstrap) == {71, 72})
        name = topic_name("telemetry")
        probe("produce-consume-plain", bootstrap, name)

        def pushed(prefix: str) -> int:
            """Metrics starting with `prefix` that this run's clients (their ids hold `name`) pushed."""
            return int(psql.value("SELECT count(*) FROM kafgres.client_metrics WHERE metric LIKE :'p' "
                                  "AND strpos(client_id, :'n') > 0", p=prefix + "%", n=name))

        wait_until("consumer metrics pushed", lambda: pushed("org.apache.kafka.consumer.") > 0)
        # Only what was asked for is kept.
        assert pushed("") == pushed("org.apache.kafka.producer.") + pushed("org.apache.kafka.consumer."), (
            psql.rows("SELECT DISTINCT metric FROM kafgres.client_metrics ORDER BY 1 LIMIT 20"))
        assert pushed("org.apache.kafka.consumer.connection.count") == 1, "the consumer's connection count"
        clients = psql.rows("SELECT DISTINCT client_id, host(address) FROM kafgres.client_metrics "
                            "WHERE strpos(client_id, :'n') > 0", n=name)
        assert clients == [[f"consumer-{name}-group-1", "127.0.0.1"]], clients
    finally:
        set_telemetry(psql, None, None)
    wait_until("the telemetry APIs no longer advertised", lambda: advertised(bootstrap) == set())
