"""Kafka Streams 4.4 with `group.protocol=streams` (KIP-1071 Streams groups) against Kafgres.

tests/streams's WordCount (test_streams.py says what it does: a repartition topic, a RocksDB store and its
changelog, exactly_once_v2), built here against kafka-streams 4.4.0 into .kafgres/streams/build-4.4.0 and run
with `-Dkafgres.streams.group.protocol=streams`, so its members join a Streams group with
StreamsGroupHeartbeat: the broker creates the repartition and changelog topics the topology declares and
assigns the tasks.

- Instance A starts alone and processes lines fed at about 100 a second; instance B joins: the group then has
  two members, each with active tasks (kafka-streams-groups.sh --describe --members, kafka-tools 4.4), and
  the broker created the internal topics with the input's partition count (the changelog compacted).
- B stops cleanly (SIGTERM): it leaves the group and A takes every task, and goes on processing.
- Checked with a read_committed reader after the feed stopped: each word's values in the output are exactly
  1, 2, ..., its expected count (nothing lost or counted twice across the two rebalances), and neither run's
  log has an ERROR line.

Every wait has a deadline and every JVM is stopped whatever happens. About 60 s after the first build.
"""

from __future__ import annotations

import fcntl
import os
import re
import time

import pytest

from support import ensure_maven_build, need_tool
from test_java_client import java_build, ok, run_java  # noqa: F401 (java_build is a fixture)
from test_streams import (PARTITIONS, REPARTITION_NAME, RUNS_DIR, STORE_NAME, STREAMS_DIR, STREAMS_HOME,
                          Feeder, OutputWatcher, WordCountApp, cleanup, read_topic, topic_config, values_by_word)

KAFKA_VERSION = "4.4.0"
BUILD_DIR = STREAMS_HOME / f"build-{KAFKA_VERSION}"
APP_JAR = BUILD_DIR / "kafgres-streams.jar"
CLASSPATH_FILE = BUILD_DIR / "classpath.txt"
BUILD_STAMP = BUILD_DIR / "build.stamp"
BUILD_LOCK = STREAMS_HOME / f"build-{KAFKA_VERSION}.lock"
BUILD_TIMEOUT_S = 900.0
STREAMS_PROTOCOL = ("-Dkafgres.streams.group.protocol=streams",)

RUNNING_TIMEOUT_S = 90.0
PROGRESS_RECORDS = 200
PROGRESS_TIMEOUT_S = 90.0
FINISH_TIMEOUT_S = 60.0


def ensure_build() -> str:
    need_tool("java", "the Streams test needs Java 17+")
    STREAMS_HOME.mkdir(parents=True, exist_ok=True)
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensure_maven_build(STREAMS_DIR, [f"-Dkafgres.streams.build.dir={BUILD_DIR}", f"-Dkafka.version={KAFKA_VERSION}"],
                           BUILD_STAMP, [APP_JAR], CLASSPATH_FILE, BUILD_TIMEOUT_S)
    return os.pathsep.join([str(APP_JAR), CLASSPATH_FILE.read_text().strip()])


def wait_until(what: str, check, timeout_s: float, *apps: WordCountApp) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for app in apps:
            app.check_running()
        if check():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} within {timeout_s:.0f}s\n" + "\n".join(app.describe() for app in apps))


def members(app_id: str, bootstrap: str) -> list[str]:
    """kafka-streams-groups --describe --members: one line per member (its header left out)."""
    out = ok(run_java("kafka-streams-groups", "--bootstrap-server", bootstrap, "--describe", "--members",
                      "--group", app_id))
    return [line for line in out.splitlines() if line.startswith(app_id) and "MEMBER" not in line]


def test_a_streams_group_splits_the_tasks_and_survives_a_member_leaving(bootstrap, admin, create_topic, topic_name,
                                                                      java_build):  # noqa: F811
    classpath = ensure_build()
    app_id = topic_name("wc848s")
    input_topic, output_topic = f"{app_id}-lines", f"{app_id}-counts"
    create_topic(input_topic, PARTITIONS)
    create_topic(output_topic, PARTITIONS)
    repartition = f"{app_id}-{REPARTITION_NAME}-repartition"
    changelog = f"{app_id}-{STORE_NAME}-changelog"
    run_dir = RUNS_DIR / app_id
    run_dir.mkdir(parents=True, exist_ok=True)
    feeder = Feeder(bootstrap, input_topic)
    watcher = OutputWatcher(bootstrap, output_topic)
    apps: list[WordCountApp] = []
    try:
        feeder.start()
        a = WordCountApp(1, classpath, bootstrap, app_id, input_topic, output_topic, run_dir / "state-a", run_dir,
                         jvm_args=STREAMS_PROTOCOL)
        apps.append(a)
        wait_until("instance A did not reach RUNNING", a.is_running, RUNNING_TIMEOUT_S, a)

        def grew(since: int):
            def check() -> bool:
                watcher.drain()
                return watcher.records >= since + PROGRESS_RECORDS
            return check

        wait_until("A made no progress", grew(watcher.records), PROGRESS_TIMEOUT_S, a)
        # The broker made the topology's internal topics, as many partitions as the input.
        for topic in (repartition, changelog):
            assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == PARTITIONS, topic
        assert topic_config(admin, changelog, "cleanup.policy") == "compact"

        b = WordCountApp(2, classpath, bootstrap, app_id, input_topic, output_topic, run_dir / "state-b", run_dir,
                         jvm_args=STREAMS_PROTOCOL)
        apps.append(b)
        split: list[str] = []

        def both_hold_tasks() -> bool:
            nonlocal split
            if not (a.is_running() and b.is_running()):
                return False
            split = members(app_id, bootstrap)
            # Each member's line lists its active tasks as `ACTIVE: <subtopology>:[<partitions>]`.
            return len(split) == 2 and all(re.search(r"ACTIVE: \d+:\[\d", line) for line in split)

        wait_until("the two instances did not both hold tasks", both_hold_tasks, RUNNING_TIMEOUT_S, a, b)
        wait_until("no progress with two members", grew(watcher.records), PROGRESS_TIMEOUT_S, a, b)

        assert b.stop() in (0, 143), b.describe()
        wait_until("A did not take B's tasks", lambda: len(members(app_id, bootstrap)) == 1 and a.is_running(),
                   RUNNING_TIMEOUT_S, a)
        wait_until("A alone made no progress", grew(watcher.records), PROGRESS_TIMEOUT_S, a)

        expected = feeder.finish()
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        while watcher.last() != dict(expected) and time.monotonic() < deadline:
            a.check_running()
            watcher.drain(0.5)
        assert watcher.last() == dict(expected), (
            f"the last counts are not the expected ones after {FINISH_TIMEOUT_S:.0f}s\n{a.describe()}")
        assert a.stop() in (0, 143), a.describe()
        values = values_by_word(read_topic(bootstrap, output_topic))
        wrong = {w: v for w, v in values.items() if v != list(range(1, expected[w] + 1))}
        assert not wrong, f"words whose committed counts are not 1..n: {sorted(wrong)[:5]}"
        errors = [e for app in apps for e in app.error_lines()]
        assert not errors, "\n\n".join(errors[:5])
    finally:
        feeder.stopping.set()
        for app in apps:
            if app.process.poll() is None:
                app.stop()
        watcher.close()
        cleanup(admin, [input_topic, output_topic, repartition, changelog], app_id)
