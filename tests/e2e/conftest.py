"""Fixtures for the Kafgres end-to-end suite.

The suite drives a broker that `./kafgres start` (run from the repo root)
left running, with real clients: confluent-kafka (librdkafka), Debian's kcat,
psql, and raw sockets (kafka_wire.py). It learns where everything is from the
`.kafgres/env` file the launcher writes (KAFGRES_ENV_FILE overrides the path)
and stops at once, with a message saying what to do, if that file is missing
or the broker does not answer. Tests must run as root: they restart the
cluster through the launcher and kill -9 the broker worker, which runs as the
postgres user.

Conventions every test follows:
- a fresh topic name per test (`topic_name`), so tests never share data;
- every wait has a deadline, so a broken broker fails a test instead of
  hanging the suite;
- the `make_consumer` fixture is for `assign()`: confluent-kafka refuses to
  build a Consumer without a `group.id`, so a throwaway one is set; nothing
  commits with it. Group tests (test_groups.py) pass their own group settings.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from typing import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire
from support import (
    CONSUMER_DEFAULTS,
    ENV_FILE,
    PRODUCER_DEFAULTS,
    REPO_ROOT,
    REQUIRED_ENV_KEYS,
    Kafgres,
    Psql,
    read_env_file,
    wait_for_topic_metadata,
)

# How long the session waits at start for the broker to answer ApiVersions.
BROKER_READY_TIMEOUT_S = 20.0


@pytest.fixture(scope="session")
def kafgres() -> Kafgres:
    if os.geteuid() != 0:
        pytest.exit("the Kafgres e2e suite must run as root (it restarts the cluster and kill -9s the worker)", 2)
    if not ENV_FILE.is_file():
        pytest.exit(f"{ENV_FILE} not found: the broker is not running. Run `./kafgres start` in {REPO_ROOT} first.", 2)
    env = read_env_file(ENV_FILE)
    missing = [k for k in REQUIRED_ENV_KEYS if not env.get(k)]
    if missing:
        pytest.exit(f"{ENV_FILE} lacks {', '.join(missing)}: rerun `./kafgres start` in {REPO_ROOT}.", 2)
    cluster = Kafgres(env)
    if not kafka_wire.wait_until_broker_answers(cluster.bootstrap, BROKER_READY_TIMEOUT_S):
        pytest.exit(
            f"no ApiVersions answer from {cluster.bootstrap} within {BROKER_READY_TIMEOUT_S:.0f}s: "
            f"is the broker up? Run `./kafgres start` in {REPO_ROOT} (server log: {cluster.pg_log}).",
            2,
        )
    return cluster


@pytest.fixture(scope="session")
def bootstrap(kafgres: Kafgres) -> str:
    return kafgres.bootstrap


@pytest.fixture(scope="session")
def psql(kafgres: Kafgres) -> Psql:
    return Psql(kafgres)


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def topic_name(request) -> Callable[[str], str]:
    """topic_name(tag='t') -> 'e2e-<test>-<tag>-<random hex>', unique per call."""
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_")).strip("-")[:60]

    def make(tag: str = "t") -> str:
        return f"e2e-{test}-{tag}-{uuid.uuid4().hex[:10]}"

    return make


@pytest.fixture
def create_topic(admin: AdminClient) -> Callable[..., str]:
    """create_topic(name, partitions=1): CreateTopics, then wait until Metadata shows it ready."""

    def create(name: str, partitions: int = 1, timeout_s: float = 15.0) -> str:
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)],
            operation_timeout=timeout_s,
            request_timeout=timeout_s,
        )
        futures[name].result(timeout=timeout_s + 5)
        wait_for_topic_metadata(admin, name, partitions)
        return name

    return create


@pytest.fixture
def make_producer(bootstrap: str):
    """make_producer(config=None) -> Producer with PRODUCER_DEFAULTS plus `config`."""
    producers: list[Producer] = []

    def make(config: dict[str, object] | None = None) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS, **(config or {})})
        producers.append(p)
        return p

    yield make
    for p in producers:
        p.flush(5)


@pytest.fixture
def make_consumer(bootstrap: str):
    """make_consumer(config=None) -> Consumer for assign()-only use; closed at teardown."""
    consumers: list[Consumer] = []

    def make(config: dict[str, object] | None = None) -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"kafgres-e2e-unused-{uuid.uuid4().hex[:8]}",
                **CONSUMER_DEFAULTS,
                **(config or {}),
            }
        )
        consumers.append(c)
        return c

    yield make
    for c in consumers:
        try:
            c.close()
        except RuntimeError:
            pass  # already closed


@pytest.fixture
def consume(make_consumer) -> Callable[..., list[Message]]:
    """consume(topic, partition, count, start_offset=OFFSET_BEGINNING, timeout_s=20, config=None).

    Assigns the one partition at `start_offset` and polls until `count`
    records arrived or the deadline passed; fails the test (quoting the
    client's errors) if fewer arrived. Returns exactly `count` messages, in
    the order fetched.
    """

    def consume_partition(
        topic: str,
        partition: int,
        count: int,
        start_offset: int = OFFSET_BEGINNING,
        timeout_s: float = 20.0,
        config: dict[str, object] | None = None,
    ) -> list[Message]:
        consumer = make_consumer(config)
        consumer.assign([TopicPartition(topic, partition, start_offset)])
        received: list[Message] = []
        errors: list[str] = []
        deadline = time.monotonic() + timeout_s
        try:
            while len(received) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                msg = consumer.poll(min(0.5, remaining))
                if msg is None:
                    continue
                if msg.error() is not None:
                    errors.append(str(msg.error()))
                    if msg.error().fatal():
                        break
                    continue
                assert (msg.topic(), msg.partition()) == (topic, partition), "record from an unassigned partition"
                received.append(msg)
        finally:
            consumer.close()
        assert len(received) == count, (
            f"got {len(received)} of {count} records from {topic}[{partition}] "
            f"starting at {start_offset} within {timeout_s:.0f}s; client errors: {errors[-10:]}"
        )
        return received

    return consume_partition


@pytest.fixture
def kcat(bootstrap: str) -> Callable[..., subprocess.CompletedProcess]:
    """kcat(*args, input=None, timeout_s=40): runs `kcat -b BOOTSTRAP ARGS`; fails on a non-zero exit."""

    def run(*args: str, input: str | None = None, timeout_s: float = 40.0) -> subprocess.CompletedProcess:
        cmd = ["kcat", "-b", bootstrap, *args]
        try:
            result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s; stderr: {e.stderr!r}")
        assert result.returncode == 0, (
            f"`{shlex.join(cmd)}` exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        return result

    return run


@pytest.fixture
def pg_connect(kafgres: Kafgres):
    """pg_connect(autocommit=False, **settings) -> a psycopg 3 connection to the cluster; closed at teardown.

    `settings` become session GUCs (e.g. synchronous_commit='off'). Used by
    the SQL API tests (test_sql_*.py), which need transactions that stay
    open across steps and several sessions at once.
    """
    import psycopg  # only the SQL API tests need it; imported here so the other tests do not
    from psycopg import sql

    connections: list = []

    def connect(autocommit: bool = False, **settings: str):
        conn = psycopg.connect(
            host=kafgres.env["PGHOST"],
            port=kafgres.env["PGPORT"],
            user=kafgres.env["PGUSER"],
            dbname=kafgres.env["PGDATABASE"],
            autocommit=autocommit,
            connect_timeout=10,
        )
        connections.append(conn)
        with conn.cursor() as cur:
            # Every statement is bounded: a hung function fails the test instead of the suite.
            cur.execute("SET statement_timeout = '60s'")
            for name, value in settings.items():
                cur.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        if not autocommit:
            conn.commit()
        return conn

    yield connect
    for conn in connections:
        conn.close()
