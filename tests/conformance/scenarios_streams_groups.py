"""Streams groups (KIP-1071) on both brokers: tests/streams's WordCount built against kafka-streams 4.4.0
(tests/e2e/test_streams_groups.py builds it) with `group.protocol=streams`, and kafka-streams-groups.sh.

Member ids are the client's random 22-character ids: written as `<member-id>`. One instance only, so which
member holds which task is the same on any broker.
"""

from __future__ import annotations

import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from framework import Context, scenario
from reference import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))

TOOL = "kafka-streams-groups"
PARTITIONS = 3
LINES = ("kafka postgres", "postgres stream", "table stream kafka", "kafka", "commit abort", "stream table")
RUN_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
MEMBER_ID_RE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")


def _long(value: bytes) -> int:
    (count,) = struct.unpack(">q", value)
    return count


class App:
    """The WordCount JVM, started with the streams protocol; stopped with SIGTERM (a clean leave)."""

    def __init__(self, ctx: Context, classpath: str, app_id: str, input_topic: str, output_topic: str):
        self.state_dir = Path(tempfile.mkdtemp(prefix="cf-streams-"))
        self.log = self.state_dir / "app.log"
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", f"-Dkafgres.streams.log={self.log}",
             "-Dkafgres.streams.group.protocol=streams", "-cp", classpath, "kafgres.streams.WordCount",
             ctx.bootstrap, app_id, input_topic, output_topic, str(self.state_dir / "state")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        ctx._closers.append(self.stop)

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        return self.process.returncode


def tool(ctx: Context, *args: str, sort: bool = False) -> None:
    """Runs kafka-streams-groups and writes its answer with member ids as <member-id> (its lines sorted when
    asked: the tool prints a group's partitions in no fixed order)."""
    run = ctx.run_tool(TOOL, *args, sort=sort)
    ctx.out(f"$ {TOOL} {' '.join(args)}")
    for text in run.stdout:
        ctx.out("  " + MEMBER_ID_RE.sub("<member-id>", ctx.norm.line(text)))
    for text in run.stderr:
        ctx.out("  stderr: " + MEMBER_ID_RE.sub("<member-id>", ctx.norm.line(text)))
    if run.returncode != 0:
        ctx.out(f"  exit {run.returncode}")


def settled(ctx: Context, group: str, predicate, timeout_s: float = 30.0) -> None:
    """Waits until the group's --describe --state output satisfies `predicate` (its state moves with heartbeats)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate(" ".join(ctx.run_tool(TOOL, "--describe", "--state", "--group", group).stdout)):
            return
        time.sleep(0.5)


@scenario
def scenario_streams_groups(ctx: Context) -> None:
    """A Streams application joins a Streams group: the broker creates its repartition and changelog topics
    and gives it every task; the counts it writes; the tool lists the group, describes it, its members and
    its offsets; the application stops (leaves) and the group is Empty, then deleted."""
    from test_streams_groups import ensure_build

    classpath = ensure_build()
    app_id = ctx.name("wc", kind="group")
    input_topic, output_topic = ctx.name("lines"), ctx.name("counts")
    ctx.name("wc-words-repartition")
    ctx.name("wc-word-counts-changelog")
    ctx.create_topic(input_topic, PARTITIONS)
    ctx.create_topic(output_topic, PARTITIONS)
    ctx.produce(input_topic, [dict(value=line.encode(), partition=i % PARTITIONS) for i, line in enumerate(LINES)],
                quiet=True)
    expected = Counter(word for line in LINES for word in line.split())

    app = App(ctx, classpath, app_id, input_topic, output_topic)
    consumer = ctx.consumer({"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    consumer.assign([TopicPartition(output_topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    last: dict[str, int] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while last != dict(expected) and time.monotonic() < deadline and app.process.poll() is None:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            last[msg.key().decode()] = _long(msg.value())
    ctx.out("counts:", " ".join(f"{w}={c}" for w, c in sorted(last.items())))
    ctx.out("as expected:", last == dict(expected))
    if app.process.poll() is not None:
        ctx.out("the application exited:", app.process.returncode, (app.process.stdout.read() or "")[-2000:])
        return
    for topic in (f"{app_id}-words-repartition", f"{app_id}-word-counts-changelog"):
        described = ctx.admin.list_topics(topic, timeout=10).topics[topic]
        ctx.out(f"internal topic {topic}: {len(described.partitions)} partitions")

    tool(ctx, "--list")
    settled(ctx, app_id, lambda text: "STABLE" in text.upper())
    tool(ctx, "--describe", "--state", "--group", app_id)
    tool(ctx, "--describe", "--group", app_id, sort=True)
    tool(ctx, "--describe", "--members", "--group", app_id)
    tool(ctx, "--describe", "--offsets", "--group", app_id, sort=True)
    ctx.out("stopped:", app.stop())
    settled(ctx, app_id, lambda text: "EMPTY" in text.upper())
    tool(ctx, "--describe", "--state", "--group", app_id)
    tool(ctx, "--delete", "--group", app_id)
    tool(ctx, "--list")
