"""Dynamic broker configs with Kafka's kafka-configs tool (docs/configuration.md, "Dynamic broker configs").

On the suite's cluster, with kafka-configs (Kafka 4.4's `org.apache.kafka.tools.ConfigCommand`, from
tests/java's build, tests/java/bin/kafka-configs; Java 17+ and Maven needed):

- `--entity-type brokers --entity-name <node> --alter --add-config max.connections.per.ip.overrides=127.0.0.3:1`
  is stored in kafgres.broker_configs (and shown in force by kafgres.dynamic_broker_configs), `--describe`
  lists it as a DYNAMIC_BROKER_CONFIG with its synonyms, and it takes effect: a second connection from
  127.0.0.3 (a loopback address no other client uses) is closed unanswered while the first is served;
  `pg_reload_conf()` does not undo it;
- `--entity-default --alter --add-config log.message.timestamp.after.max.ms=7200000` becomes the cluster
  default: `--entity-default --describe` lists it, a topic without an override reports it as
  DYNAMIC_DEFAULT_BROKER_CONFIG, and a record stamped 90 minutes ahead (refused under Kafka's default of
  one hour) is accepted;
- `--delete-config` removes both: the rows go, a second connection from 127.0.0.3 is served and the
  90-minute-ahead record is refused again with INVALID_TIMESTAMP;
- a config Kafka cannot change dynamically (`num.partitions`) is refused with Kafka's message.

The configs chosen touch no other test: an address nobody else connects from, and a timestamp bound made
looser. Whatever happens, the test deletes both through the admin client at the end. Every wait has a
deadline.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

import kafka_wire
from test_java_client import JAVA_BIN, java_build  # noqa: F401 (java_build is a fixture)

TOOL_TIMEOUT_S = 120.0
ADMIN_TIMEOUT_S = 15.0
# A loopback address no other test or client connects from.
SOURCE = "127.0.0.3"
OVERRIDES = f"{SOURCE}:1"
AFTER_MAX_MS = 7_200_000
AHEAD_MS = 90 * 60 * 1000


@pytest.fixture(scope="module")
def config_command(java_build) -> list[str]:  # noqa: F811
    """The command line of kafka-configs (ConfigCommand, in kafka-tools 4.4) from the tests/java build."""
    return [str(JAVA_BIN / "kafka-configs")]


def kafka_configs(command: list[str], bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [*command, "--bootstrap-server", bootstrap, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env=dict(os.environ))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"kafka-configs {shlex.join(args)} did not finish within {TOOL_TIMEOUT_S:.0f}s\n{e.stderr}")


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (
        f"kafka-configs {shlex.join(result.args[-6:])} exited {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


def config_lines(stdout: str) -> list[str]:
    """--describe's config lines (`  name=value sensitive=... synonyms={...}`), blanks collapsed."""
    return [" ".join(line.split()) for line in stdout.splitlines() if line.startswith("  ")]


def connect_from(source: str, bootstrap: str) -> socket.socket | None:
    """A connection from `source` that the broker answered an ApiVersions on; None if it was closed."""
    host, port = kafka_wire.parse_address(bootstrap)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.bind((source, 0))
    sock.connect((host, port))
    try:
        if kafka_wire.send_quietly(sock, kafka_wire.api_versions_request(0, 1)) and kafka_wire.read_response(sock):
            return sock
    except (EOFError, ConnectionResetError, socket.timeout):
        pass
    sock.close()
    return None


def second_connection_served(bootstrap: str) -> bool:
    """Whether a second connection from SOURCE is served while a first one is open."""
    first = connect_from(SOURCE, bootstrap)
    assert first is not None, f"the first connection from {SOURCE} was refused"
    try:
        second = connect_from(SOURCE, bootstrap)
        if second is not None:
            second.close()
        return second is not None
    finally:
        first.close()


def wait_until(predicate, what: str, timeout_s: float = 15.0) -> None:
    """Closed connections give their slot back asynchronously: retried until `predicate` or the deadline."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:.0f}s"
        time.sleep(0.2)


def produce_ahead(bootstrap: str, topic: str) -> KafkaError | None:
    """Produces one record stamped AHEAD_MS in the future; the delivery error (None: acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 20000})
    reports: list = []
    producer.produce(topic, b"ahead", timestamp=int(time.time() * 1000) + AHEAD_MS,
                     on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0, "the record was not reported within 30 s"
    assert len(reports) == 1
    return reports[0]


def topic_source(admin, topic: str, name: str) -> tuple[str, ConfigSource]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([resource], request_timeout=ADMIN_TIMEOUT_S)[resource].result(
        timeout=ADMIN_TIMEOUT_S + 5)[name]
    return entry.value, ConfigSource(entry.source)


def delete_quietly(admin, config_command: list[str], bootstrap: str, node: str) -> None:
    """Removes what this test sets, whatever state it left (a DELETE of what is not set is a no-op). The
    cluster default goes through the tool: librdkafka refuses a broker resource with an empty name."""
    resource = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[
        ConfigEntry("max.connections.per.ip.overrides", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S)[resource].result(
        timeout=ADMIN_TIMEOUT_S + 5)
    ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-default", "--alter",
                     "--delete-config", "log.message.timestamp.after.max.ms"))


def test_kafka_configs_sets_describes_and_deletes_dynamic_broker_configs(
        config_command, bootstrap, admin, psql, kafgres, create_topic, topic_name):
    node = psql.value("SHOW kafgres.node_id")
    topic = create_topic(topic_name("ahead"), partitions=1)
    assert second_connection_served(bootstrap), f"{SOURCE} is limited before the test sets anything"
    try:
        # Per broker: the override for SOURCE.
        out = ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-name", node,
                               "--alter", "--add-config", f"max.connections.per.ip.overrides={OVERRIDES}"))
        assert f"Completed updating config for broker {node}." in out, out
        rows = psql.rows("SELECT node_id, name, value, in_force FROM kafgres.dynamic_broker_configs "
                         "WHERE name = 'max.connections.per.ip.overrides'")
        assert rows == [[node, "max.connections.per.ip.overrides", OVERRIDES, "t"]], rows
        out = ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-name", node,
                               "--describe"))
        assert f"Dynamic configs for broker {node} are:" in out, out
        assert (f"max.connections.per.ip.overrides={OVERRIDES} sensitive=false synonyms={{"
                f"DYNAMIC_BROKER_CONFIG:max.connections.per.ip.overrides={OVERRIDES}, "
                f"DEFAULT_CONFIG:max.connections.per.ip.overrides=}}") in config_lines(out), out
        wait_until(lambda: not second_connection_served(bootstrap),
                   f"a second connection from {SOURCE} was still served under {OVERRIDES}")

        # A reload replaces the static settings only.
        psql.rows("SELECT pg_reload_conf()")
        time.sleep(1.0)
        assert not second_connection_served(bootstrap), "pg_reload_conf() undid the dynamic override"

        # The cluster default: a looser timestamp bound for every topic without its own.
        out = ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-default",
                               "--alter", "--add-config", f"log.message.timestamp.after.max.ms={AFTER_MAX_MS}"))
        assert "Completed updating default config for brokers in the cluster." in out, out
        out = ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-default",
                               "--describe"))
        assert "Default configs for brokers in the cluster are:" in out, out
        assert (f"log.message.timestamp.after.max.ms={AFTER_MAX_MS} sensitive=false synonyms={{"
                f"DYNAMIC_DEFAULT_BROKER_CONFIG:log.message.timestamp.after.max.ms={AFTER_MAX_MS}}}"
                ) in config_lines(out), out
        rows = psql.rows("SELECT node_id, value FROM kafgres.broker_configs "
                         "WHERE name = 'log.message.timestamp.after.max.ms'")
        assert rows == [["-1", str(AFTER_MAX_MS)]], rows
        assert topic_source(admin, topic, "message.timestamp.after.max.ms") == (
            str(AFTER_MAX_MS), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert produce_ahead(bootstrap, topic) is None, "a record 90 minutes ahead refused under the new default"

        # A config Kafka cannot change at runtime: Kafka's refusal.
        refused = kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-name", node,
                                "--alter", "--add-config", "num.partitions=3")
        assert refused.returncode != 0, refused.stdout
        assert "Cannot update these configs dynamically" in refused.stdout + refused.stderr, refused.stderr

        # --delete-config: the rows go and the defaults are back.
        ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-name", node,
                         "--alter", "--delete-config", "max.connections.per.ip.overrides"))
        ok(kafka_configs(config_command, bootstrap, "--entity-type", "brokers", "--entity-default",
                         "--alter", "--delete-config", "log.message.timestamp.after.max.ms"))
        rows = psql.rows("SELECT name FROM kafgres.broker_configs WHERE name IN "
                         "('max.connections.per.ip.overrides', 'log.message.timestamp.after.max.ms')")
        assert rows == [], rows
        wait_until(lambda: second_connection_served(bootstrap),
                   f"a second connection from {SOURCE} was not served once the override was deleted")
        value, source = topic_source(admin, topic, "message.timestamp.after.max.ms")
        assert (value, source) == ("3600000", ConfigSource.DEFAULT_CONFIG)
        error = produce_ahead(bootstrap, topic)
        assert error is not None and error.code() == KafkaError.INVALID_TIMESTAMP, error
    finally:
        delete_quietly(admin, config_command, bootstrap, node)
