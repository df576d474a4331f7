"""The Prometheus endpoint (`kafgres.metrics_port`, docs/operations.md).

`./kafgres start` turns it on at 127.0.0.1:9190 (KAFGRES_METRICS_URL in the
env file). Each scrape is parsed with the Prometheus project's own Python
parser (prometheus_client), which rejects a malformed exposition, and its
values are checked against what this test did on a topic of its own:
records produced by librdkafka and sent from SQL, their bytes, each
partition's offsets, a consumer group's committed offsets and lag, and the
requests counted per API. Other tests share the cluster, so broker-wide
counters are checked to move by at least what this test did.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from support import produce_all

SCRAPE_TIMEOUT_S = 10.0


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples: dict[tuple[str, frozenset], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, f"{key} twice"
            samples[key] = s.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} is not in the scrape"
    return samples[key]


def wait_for(url: str, name: str, labels: dict[str, str], expected: float, timeout_s: float = 30.0):
    """Scrapes until `name{labels}` reads `expected` (records sent from SQL arrive after their commit)."""
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape(url)
        seen = samples.get((name, frozenset(labels.items())))
        if seen == expected or time.monotonic() > deadline:
            assert seen == expected, f"{name}{labels} = {seen}, expected {expected}"
            return samples
        time.sleep(0.1)


@pytest.fixture(scope="module")
def metrics_url(kafgres) -> str:
    url = kafgres.env.get("KAFGRES_METRICS_URL")
    assert url, "KAFGRES_METRICS_URL is missing from the env file: run ./kafgres start"
    return url


def test_a_scrape_matches_what_was_produced_sent_and_committed(
    metrics_url, bootstrap, create_topic, topic_name, make_producer, pg_connect
):
    before = scrape(metrics_url)
    topic = create_topic(topic_name("scraped"), partitions=3)
    producer = make_producer()
    per_partition = {0: 7, 1: 3, 2: 0}
    records = [dict(topic=topic, partition=p, value=f"v{p}-{i}".encode()) for p, n in per_partition.items()
               for i in range(n)]
    produce_all(producer, records)
    conn = pg_connect()
    for i in range(5):
        conn.execute("select kafgres.send(%s, %s::bytea, partition => 2)", (topic, f"sql-{i}".encode()))
    conn.commit()
    per_partition[2] = 5

    group = f"scraped-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 3)], asynchronous=False)
    finally:
        consumer.close()

    samples = wait_for(metrics_url, "kafka_server_brokertopicmetrics_messagesin_total", {"topic": topic}, 15.0)
    for p, n in per_partition.items():
        assert value(samples, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) == n
        assert value(samples, "kafka_log_log_logstartoffset", topic=topic, partition=str(p)) == 0
        assert value(samples, "kafka_topic_partition_current_offset", topic=topic, partition=str(p)) == n
    assert value(samples, "kafka_log_log_size", topic=topic, partition="1") > 0
    assert value(samples, "kafka_log_log_size", topic=topic, partition="2") > 0
    bytes_in = value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in == sum(value(samples, "kafka_log_log_size", topic=topic, partition=str(p)) for p in per_partition)
    lags = {p: value(samples, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition=str(p))
            for p in (0, 1)}
    assert lags == {0: 3, 1: 0}
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition="0") == 4

    def moved(name: str, **labels: str) -> float:
        return value(samples, name, **labels) - before.get((name, frozenset(labels.items())), 0.0)

    assert moved("kafka_server_brokertopicmetrics_messagesin_total") >= 15
    assert moved("kafgres_sql_bridge_records_total") >= 5
    assert value(samples, "kafgres_sql_bridge_state", state="running") == 1
    produce_requests = sum(v for (name, labels), v in samples.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and dict(labels)["request"] == "Produce")
    assert produce_requests - sum(v for (name, labels), v in before.items()
                                  if name == "kafka_network_requestmetrics_requests_total"
                                  and dict(labels)["request"] == "Produce") >= 1
    assert moved("kafka_network_requestmetrics_errors_total", request="OffsetCommit", error="NONE") >= 2
    assert value(samples, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert moved("kafgres_request_duration_seconds_count", request="Produce") >= 1


def test_paths_other_than_metrics_are_not_found(metrics_url):
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(metrics_url.removesuffix("/metrics") + "/", timeout=SCRAPE_TIMEOUT_S)
    assert refused.value.code == 404


def test_the_grafana_dashboard_queries_only_metrics_the_endpoint_serves(kafgres, metrics_url):
    import json
    import re

    dashboard = json.loads((kafgres.root / "docs" / "grafana" / "kafgres-dashboard.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\b(?:kafka|kafgres)_[a-z0-9_]+", target["expr"])}
    queried |= set(re.findall(r"\b(?:kafka|kafgres)_[a-z0-9_]+",
                              " ".join(v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query")))
    with urllib.request.urlopen(metrics_url, timeout=SCRAPE_TIMEOUT_S) as response:
        text = response.read().decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    series = families | {f + suffix for f in families for suffix in ("_bucket", "_sum", "_count")}
    assert queried, "the dashboard queries nothing"
    assert queried <= series, f"the dashboard queries metrics the endpoint does not serve: {sorted(queried - series)}"
