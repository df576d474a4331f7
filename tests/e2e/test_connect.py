"""Kafka Connect in distributed mode with its config, offset and status topics in Kafgres.

One Connect 4.1.1 worker (`org.apache.kafka.connect.cli.ConnectDistributed`,
connect-runtime and connect-file from Maven Central: tests/connect/pom.xml
resolves the classpath into .kafgres/connect once, and again only when the
pom is newer) at a time, its REST API on 127.0.0.1:18584 only, in a group of
its own with its three storage topics created by Connect in Kafgres
(replication factor 1), all named per run, and the StringConverter, so a
line of a file is a record's value as it is:

- source and sink: FileStreamSource reads FIRST_LINES lines written to a file
  into a 1-partition topic, FileStreamSink writes that topic to another file.
  The topic holds exactly those lines in order, the sink's file gets exactly
  them.
- a restart: the worker is stopped (SIGTERM) and started again with the same
  configuration, then MORE_LINES lines are appended to the source file. The
  topic ends up with every line exactly once, in order (the source resumed
  from its file position, kept in the offset topic in Kafgres, instead of
  reading the file again), and the sink's file too (the sink resumed from its
  group's committed offset).
- the offsets REST API: GET /connectors/<name>/offsets gives the source's
  position as the file's size in bytes, and the sink's offset as the topic's
  end, once everything is through.
- exactly-once source support: a second worker, in a group of its own with
  `exactly.once.source.support=enabled` (the leader writes the config topic
  in transactions and fences zombie tasks; each source task produces records
  and its offsets in one transaction, through a transactional producer in
  transaction version 2, KIP-890, which Kafgres finalizes), runs a source
  with `exactly.once.support=required` and a transaction every 2 seconds
  while a thread keeps appending to its file. The worker is killed (SIGKILL)
  once at least KILL_AFTER records are committed and more are in a
  transaction still open, then started again: the killed task's transaction
  is aborted (after its transaction.timeout.ms, which the restarted worker
  waits for while it reads the offset topic read_committed), the task resumes
  from its last committed position, and a read_committed reader of the topic
  finds every line exactly once, in order, while a read_uncommitted one also
  sees the aborted records. The offsets API gives the file's size. Then the
  connector is stopped and its offset moved back to line REWIND_TO_LINE with
  PATCH /connectors/<name>/offsets, which fences out its task's
  transactional producer first (Admin.fenceProducers, as the worker's DEBUG
  log line shows) and writes the offset in a transaction; resumed, the task
  reads the rest of the file again: read_committed finds the file followed by
  its lines from REWIND_TO_LINE on, each once.
- neither worker logs an ERROR line (.kafgres/connect/*.log).

Every wait has a deadline; each JVM is stopped or killed whatever happens
(and gets SIGTERM from the kernel if pytest dies). Needs Java 17+ and Maven.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from support import REPO_ROOT, isolated_reader, need_tool, port_is_free

sys.path.insert(0, str(REPO_ROOT / "scripts" / "bench"))
from apache_kafka import _die_with_parent, terminate  # noqa: E402  (scripts/bench is not a package)

CONNECT_DIR = REPO_ROOT / "tests" / "connect"
POM = CONNECT_DIR / "pom.xml"
BUILD_DIR = REPO_ROOT / ".kafgres" / "connect"
CLASSPATH_FILE = BUILD_DIR / "classpath.txt"

# The worker's REST listener: no other test or tool of the repository uses it.
REST_PORT = 18584
REST_URL = f"http://127.0.0.1:{REST_PORT}"

MAVEN_TIMEOUT_S = 900.0
WORKER_HEAP = "-Xmx256m"
WORKER_STOP_TIMEOUT_S = 30.0
# From the JVM's start to the REST API answering and the worker in its group.
WORKER_READY_TIMEOUT_S = 60.0
# From a connector's config to its task running (a rebalance of the one-worker group).
CONNECTOR_RUNNING_TIMEOUT_S = 45.0
# From lines written to the source file to the records on the topic and the lines in the sink's file.
FLOW_TIMEOUT_S = 45.0
REST_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 20.0
# Source offsets and sink consumer offsets are committed every OFFSET_FLUSH_MS.
OFFSET_FLUSH_MS = 1000

FIRST_LINES = 200
MORE_LINES = 100
# Exactly-once: lines in the file before the source starts, then appended in
# bursts while it runs (for about 8 s, several transactions); the worker is
# killed once KILL_AFTER records are committed on the topic and more are in a
# transaction still open.
EOS_INITIAL_LINES = 500
EOS_TOTAL_LINES = 2500
EOS_BURST_LINES = 20
EOS_BURST_PAUSE_S = 0.08
# The source task commits a transaction every EOS_TRANSACTION_MS (transaction.boundary=interval),
# so that one is almost always open when the worker is killed.
EOS_TRANSACTION_MS = 2000
KILL_AFTER = 800
# The offsets API then moves the source back to this line, and it reads the rest of the file again.
REWIND_TO_LINE = 2000
# The exactly-once source task's transactions: how long a restarted worker waits for a killed one's.
TASK_TRANSACTION_TIMEOUT_MS = 6000

ERROR_LINE = re.compile(r"^\[[^\]]+\] ERROR ")


# --------------------------------------------------------------------------
# The worker's classpath and process


def ensure_classpath() -> str:
    """connect-runtime's and connect-file's runtime classpath, resolved with Maven unless newer than the pom."""
    if CLASSPATH_FILE.is_file() and CLASSPATH_FILE.stat().st_mtime >= POM.stat().st_mtime:
        text = CLASSPATH_FILE.read_text().strip()
        if all(Path(j).is_file() for j in text.split(":") if j):
            return text
    mvn = need_tool("mvn", "the Connect test needs Apache Maven")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [mvn, "-B", "-q", "-f", str(POM), f"-Dkafgres.connect.dir={BUILD_DIR}", "dependency:build-classpath"]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"resolving Connect's classpath did not finish within {MAVEN_TIMEOUT_S:.0f}s", pytrace=False)
    if result.returncode != 0 or not CLASSPATH_FILE.is_file():
        pytest.fail(f"`{' '.join(cmd)}` exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}",
                    pytrace=False)
    # The dependency plugin leaves an unchanged file as it was: newer than the pom now, so not resolved again.
    CLASSPATH_FILE.touch()
    return CLASSPATH_FILE.read_text().strip()


def worker_properties(bootstrap: str, run: str, exactly_once: bool) -> str:
    """A distributed worker's configuration: its group and its three topics in Kafgres, named per run."""
    lines = [
        f"bootstrap.servers={bootstrap}",
        f"group.id=connect-e2e-{run}",
        f"config.storage.topic=connect-e2e-{run}-configs",
        f"offset.storage.topic=connect-e2e-{run}-offsets",
        f"status.storage.topic=connect-e2e-{run}-status",
        # One node: one replica each; fewer partitions than the defaults (25 and 5) suffice for one worker.
        "config.storage.replication.factor=1",
        "offset.storage.replication.factor=1",
        "status.storage.replication.factor=1",
        "offset.storage.partitions=5",
        "status.storage.partitions=3",
        # Lines in the files are the records' values, as they are.
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        f"listeners=http://127.0.0.1:{REST_PORT}",
        "rest.advertised.host.name=127.0.0.1",
        f"rest.advertised.port={REST_PORT}",
        f"offset.flush.interval.ms={OFFSET_FLUSH_MS}",
        # connect-file is on the classpath with its ServiceLoader manifests: no scan of every jar.
        "plugin.discovery=service_load",
    ]
    if exactly_once:
        lines += [
            "exactly.once.source.support=enabled",
            # A task killed mid-transaction leaves it open, with records in the
            # offsets topic; a restarted worker reads that topic read_committed
            # up to its high watermark (Connect's KafkaBasedLog, end offsets from
            # TopicAdmin.endOffsets at READ_UNCOMMITTED) before its herder does
            # anything, so it waits until the transaction coordinator aborts the
            # zombie's transaction at transaction.timeout.ms (the producers'
            # default, 60 s): Apache Kafka's design, and Kafgres aborts it at the
            # same time. A short timeout for the task producers keeps that wait short.
            f"producer.transaction.timeout.ms={TASK_TRANSACTION_TIMEOUT_MS}",
        ]
    return "\n".join(lines) + "\n"


class Worker:
    """One ConnectDistributed JVM; `stop()` is SIGTERM (SIGKILL after WORKER_STOP_TIMEOUT_S), `kill()` SIGKILL."""

    def __init__(self, classpath: str, properties: Path, log: Path) -> None:
        if not port_is_free(REST_PORT):
            pytest.fail(f"127.0.0.1:{REST_PORT} is in use: the Connect worker's REST listener needs it")
        self.log = log
        log.unlink(missing_ok=True)
        self.stdout = open(log.with_suffix(".stdout"), "w")
        self.process = subprocess.Popen(
            ["java", WORKER_HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
             f"-Dlog4j2.configurationFile={CONNECT_DIR / 'log4j2.properties'}", f"-Dkafgres.connect.log={log}",
             "-cp", classpath, "org.apache.kafka.connect.cli.ConnectDistributed", str(properties)],
            stdout=self.stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )

    def check_running(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"the Connect worker exited with {self.process.returncode}; see {self.log}\n{self.log_tail()}")

    def wait_ready(self) -> None:
        """Until the REST API answers and the worker has joined its group (GET /connectors answers)."""
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            self.check_running()
            try:
                status, body = rest("GET", "/connectors")
                if status == 200:
                    return
                last = f"{status} {body}"
            except OSError as e:
                last = str(e)
            time.sleep(0.5)
        pytest.fail(f"the Connect worker was not ready within {WORKER_READY_TIMEOUT_S:.0f}s ({last}):\n"
                    f"{self.log_tail()}")

    def stop(self) -> None:
        terminate(self.process, WORKER_STOP_TIMEOUT_S)
        self.stdout.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.stdout.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def error_lines(log: Path) -> list[str]:
    """The log's ERROR lines, each with the first lines of its stack trace."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for i, line in enumerate(lines):
        if ERROR_LINE.match(line):
            trace = [t for t in lines[i + 1:i + 6] if not t.startswith("[")]
            found.append("\n".join([f"{log.name}: {line}", *trace]))
    return found


# --------------------------------------------------------------------------
# The REST API


def rest(method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    """One request to the worker's REST API: (status, decoded JSON body or text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(REST_URL + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REST_TIMEOUT_S) as answer:
            status, raw = answer.status, answer.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def put_connector(worker: Worker, name: str, config: dict[str, str]) -> None:
    """PUT /connectors/<name>/config, again while the worker answers 409 (a rebalance under way)."""
    deadline = time.monotonic() + CONNECTOR_RUNNING_TIMEOUT_S
    while True:
        worker.check_running()
        status, body = rest("PUT", f"/connectors/{name}/config", config)
        if status in (200, 201):
            return
        if status != 409 or time.monotonic() > deadline:
            pytest.fail(f"PUT /connectors/{name}/config answered {status}: {body}\n{worker.log_tail()}")
        time.sleep(0.5)


def wait_running(worker: Worker, name: str) -> None:
    """Until the connector and its one task are RUNNING; fails at once on FAILED, with Connect's trace."""
    deadline = time.monotonic() + CONNECTOR_RUNNING_TIMEOUT_S
    body: object = None
    while time.monotonic() < deadline:
        worker.check_running()
        status, body = rest("GET", f"/connectors/{name}/status")
        if status == 200:
            states = [body["connector"]["state"], *(t["state"] for t in body["tasks"])]
            if "FAILED" in states:
                pytest.fail(f"{name} failed: {json.dumps(body, indent=1)}")
            if len(states) == 2 and set(states) == {"RUNNING"}:
                return
        time.sleep(0.5)
    pytest.fail(f"{name} not running within {CONNECTOR_RUNNING_TIMEOUT_S:.0f}s: {body}\n{worker.log_tail()}")


def stop_connector(worker: Worker, name: str) -> None:
    """PUT /connectors/<name>/stop, then until its status is STOPPED (its tasks shut down)."""
    status, body = rest("PUT", f"/connectors/{name}/stop")
    assert status == 204, f"PUT /connectors/{name}/stop answered {status}: {body}"
    deadline = time.monotonic() + CONNECTOR_RUNNING_TIMEOUT_S
    while time.monotonic() < deadline:
        worker.check_running()
        status, body = rest("GET", f"/connectors/{name}/status")
        if status == 200 and body["connector"]["state"] == "STOPPED" and not body["tasks"]:
            return
        time.sleep(0.5)
    pytest.fail(f"{name} not stopped within {CONNECTOR_RUNNING_TIMEOUT_S:.0f}s: {body}")


def connector_offsets(name: str) -> list[dict]:
    status, body = rest("GET", f"/connectors/{name}/offsets")
    assert status == 200, f"GET /connectors/{name}/offsets answered {status}: {body}"
    return body["offsets"]


def wait_for_source_position(worker: Worker, name: str, source: Path) -> None:
    """Until the offsets API gives the source's position as the file's size: every line read and committed."""
    wait_for_offsets(worker, name, [{"partition": {"filename": str(source)},
                                     "offset": {"position": source.stat().st_size}}])


def wait_for_offsets(worker: Worker, name: str, expected: list[dict]) -> None:
    """Until GET /connectors/<name>/offsets gives `expected` (offsets are committed every OFFSET_FLUSH_MS)."""
    deadline = time.monotonic() + FLOW_TIMEOUT_S
    offsets: list[dict] = []
    while time.monotonic() < deadline:
        worker.check_running()
        offsets = connector_offsets(name)
        if offsets == expected:
            return
        time.sleep(0.5)
    pytest.fail(f"GET /connectors/{name}/offsets gives {offsets}, not {expected}, {FLOW_TIMEOUT_S:.0f}s on")


# --------------------------------------------------------------------------
# Files and topics


def numbered(first: int, count: int, tag: str) -> list[str]:
    return [f"{tag} line {i:05d} {'x' * (i % 17)}" for i in range(first, first + count)]


def append_lines(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def file_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[str]:
    """Every value of topic[0] a reader at `isolation` sees, from the start to the partition's end."""
    c = isolated_reader(bootstrap, isolation)
    c.assign([TopicPartition(topic, 0, 0)])
    values: list[str] = []
    errors: list[str] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while True:
            assert time.monotonic() < deadline, (
                f"reading {topic} ({isolation}): no end of partition within {READ_TIMEOUT_S:.0f}s after "
                f"{len(values)} records; errors {errors[-5:]}")
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return values
                errors.append(str(msg.error()))
                continue
            values.append(msg.value().decode())
    finally:
        c.close()


def wait_for_topic(worker: Worker, bootstrap: str, topic: str, expected: list[str],
                   isolation: str = "read_committed") -> None:
    """Until `topic` holds as many records as expected (or more), then: exactly `expected`, in order."""
    deadline = time.monotonic() + FLOW_TIMEOUT_S
    values: list[str] = []
    while time.monotonic() < deadline:
        worker.check_running()
        values = read_topic(bootstrap, topic, isolation)
        if len(values) >= len(expected):
            break
        time.sleep(0.5)
    assert_same_lines(values, expected, f"{topic} ({isolation})")


def wait_for_file(worker: Worker, path: Path, expected: list[str]) -> None:
    deadline = time.monotonic() + FLOW_TIMEOUT_S
    lines: list[str] = []
    while time.monotonic() < deadline:
        worker.check_running()
        lines = file_lines(path)
        if len(lines) >= len(expected):
            break
        time.sleep(0.5)
    assert_same_lines(lines, expected, f"the sink's file {path}")


def assert_same_lines(got: list[str], expected: list[str], what: str) -> None:
    """`got` is `expected`, in order; if not, says what is duplicated, missing, extra or out of order."""
    if got == expected:
        return
    counts: dict[str, int] = {}
    for line in got:
        counts[line] = counts.get(line, 0) + 1
    wanted = set(expected)
    duplicated = [line for line, n in counts.items() if n > 1]
    missing = [line for line in expected if line not in counts]
    extra = [line for line in counts if line not in wanted]
    pytest.fail(f"{what} holds {len(got)} lines, expected {len(expected)}: {len(duplicated)} duplicated (first "
                f"{duplicated[:3]}), {len(missing)} missing (first {missing[:3]}), {len(extra)} unexpected (first "
                f"{extra[:3]}){'; the same lines in another order' if not (duplicated or missing or extra) else ''}")


def cleanup(admin: AdminClient, run: str, topics: list[str], groups: list[str]) -> None:
    """Deletes what this run created on the dev cluster: its topics, Connect's three, its groups."""
    existing = set(admin.list_topics(timeout=10).topics)
    doomed = [t for t in [*topics, *(f"connect-e2e-{run}-{what}" for what in ("configs", "offsets", "status"))]
              if t in existing]
    futures = {}
    if doomed:
        futures.update(admin.delete_topics(doomed, operation_timeout=15, request_timeout=15))
    futures.update(admin.delete_consumer_groups([f"connect-e2e-{run}", *groups], request_timeout=15))
    for future in futures.values():
        try:
            future.result(timeout=20)
        except Exception:  # noqa: BLE001  (cleanup: a topic or group left behind is not this test's failure)
            pass


# --------------------------------------------------------------------------


def test_source_and_sink_across_a_restart(bootstrap, admin, create_topic, topic_name, tmp_path):
    need_tool("java", "the Connect test needs Java 17+")
    classpath = ensure_classpath()
    run = uuid.uuid4().hex[:10]
    topic = create_topic(topic_name("lines"))
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    source, sink = f"file-source-{run}", f"file-sink-{run}"
    properties = tmp_path / "worker.properties"
    properties.write_text(worker_properties(bootstrap, run, exactly_once=False))
    logs = [BUILD_DIR / "worker-1.log", BUILD_DIR / "worker-2.log"]

    lines = numbered(0, FIRST_LINES, "first")
    append_lines(source_file, lines)
    worker = None
    try:
        started = time.monotonic()
        worker = Worker(classpath, properties, logs[0])
        worker.wait_ready()
        print(f"\nworker ready in {time.monotonic() - started:.1f}s")
        put_connector(worker, source, {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(source_file), "topic": topic,
        })
        put_connector(worker, sink, {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(sink_file), "topics": topic,
        })
        wait_running(worker, source)
        wait_running(worker, sink)
        wait_for_topic(worker, bootstrap, topic, lines)
        wait_for_file(worker, sink_file, lines)
        wait_for_source_position(worker, source, source_file)
        print(f"first flow done at {time.monotonic() - started:.1f}s")

        worker.stop()
        worker = Worker(classpath, properties, logs[1])
        worker.wait_ready()
        wait_running(worker, source)
        wait_running(worker, sink)
        more = numbered(FIRST_LINES, MORE_LINES, "more")
        append_lines(source_file, more)
        lines += more
        wait_for_topic(worker, bootstrap, topic, lines)
        wait_for_file(worker, sink_file, lines)
        wait_for_source_position(worker, source, source_file)
        print(f"second flow done at {time.monotonic() - started:.1f}s")
        wait_for_offsets(worker, sink, [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                         "offset": {"kafka_offset": len(lines)}}])
        # Both offsets are past everything: nothing more is coming, so what is there now is final.
        assert_same_lines(read_topic(bootstrap, topic), lines, topic)
        assert_same_lines(file_lines(sink_file), lines, f"the sink's file {sink_file}")
        worker.stop()
    finally:
        if worker is not None:
            worker.kill()
        cleanup(admin, run, [topic], [f"connect-{sink}"])
    errors = [e for log in logs for e in error_lines(log)]
    assert not errors, f"the worker logged {len(errors)} ERROR lines:\n" + "\n".join(errors[:20])


class LineWriter(threading.Thread):
    """Appends `lines` to `path` in bursts of EOS_BURST_LINES, EOS_BURST_PAUSE_S apart: a file that grows while
    the source reads it. A bounded loop; `join()` it."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.lines = lines

    def run(self) -> None:
        for at in range(0, len(self.lines), EOS_BURST_LINES):
            append_lines(self.path, self.lines[at:at + EOS_BURST_LINES])
            time.sleep(EOS_BURST_PAUSE_S)


def topic_end(bootstrap: str, topic: str, isolation: str) -> int:
    """topic[0]'s end for a reader at `isolation`: the high watermark, or the last stable offset (the first
    offset of the oldest open transaction) for read_committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kafgres-e2e-unused-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]
    finally:
        c.close()


def test_exactly_once_source_across_a_kill(bootstrap, admin, create_topic, topic_name, tmp_path):
    need_tool("java", "the Connect test needs Java 17+")
    classpath = ensure_classpath()
    run = uuid.uuid4().hex[:10]
    topic = create_topic(topic_name("eos"))
    source_file = tmp_path / "source.txt"
    source = f"eos-source-{run}"
    properties = tmp_path / "worker.properties"
    properties.write_text(worker_properties(bootstrap, run, exactly_once=True))
    logs = [BUILD_DIR / "eos-worker-1.log", BUILD_DIR / "eos-worker-2.log"]

    lines = numbered(0, EOS_TOTAL_LINES, "eos")
    append_lines(source_file, lines[:EOS_INITIAL_LINES])
    writer = LineWriter(source_file, lines[EOS_INITIAL_LINES:])
    worker = None
    try:
        started = time.monotonic()
        worker = Worker(classpath, properties, logs[0])
        worker.wait_ready()
        put_connector(worker, source, {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(source_file), "topic": topic,
            # FileStreamSourceTask stops a poll at batch.size lines even when it
            # has read more of the file, and reads those only once the file
            # grows again: with a batch smaller than what is left when the file
            # stops growing, its last lines stay unread. A batch as large as
            # the whole file never stops early.
            "batch.size": str(EOS_TOTAL_LINES),
            # The worker refuses the connector unless it can give it exactly-once delivery.
            "exactly.once.support": "required",
            "transaction.boundary": "interval", "transaction.boundary.interval.ms": str(EOS_TRANSACTION_MS),
        })
        wait_running(worker, source)
        writer.start()
        # Killed with KILL_AFTER records or more committed (so the restarted
        # task must resume from a committed source offset) and more records in
        # a transaction still open (the last stable offset is below the end).
        deadline = time.monotonic() + FLOW_TIMEOUT_S
        end = stable = 0
        while time.monotonic() < deadline:
            worker.check_running()
            stable, end = topic_end(bootstrap, topic, "read_committed"), topic_end(bootstrap, topic, "read_uncommitted")
            if KILL_AFTER <= stable < end:
                break
            time.sleep(0.05)
        worker.kill()
        assert KILL_AFTER <= stable < end, (
            f"{topic} has last stable offset {stable} and end offset {end}, {FLOW_TIMEOUT_S:.0f}s on")
        print(f"\nkilled the worker at {time.monotonic() - started:.1f}s: end offset {end}, last stable offset {stable}")

        worker = Worker(classpath, properties, logs[1])
        worker.wait_ready()
        wait_running(worker, source)
        writer.join(timeout=FLOW_TIMEOUT_S)
        assert not writer.is_alive(), f"the writer did not finish within {FLOW_TIMEOUT_S:.0f}s"
        wait_for_source_position(worker, source, source_file)
        committed = read_topic(bootstrap, topic)
        uncommitted = read_topic(bootstrap, topic, "read_uncommitted")
        print(f"done at {time.monotonic() - started:.1f}s: {len(committed)} records read committed, "
              f"{len(uncommitted)} uncommitted, end offset {topic_end(bootstrap, topic, 'read_uncommitted')}")
        assert_same_lines(committed, lines, f"{topic} (read_committed)")
        # The killed worker's open transaction was aborted, not lost: its records are in the log (a
        # read_uncommitted reader sees them, the restarted task wrote them again), hidden from read_committed.
        assert len(uncommitted) > len(committed) and set(uncommitted) == set(lines), (
            f"read_uncommitted: {len(uncommitted)} records, read_committed: {len(committed)}")

        # Altering an exactly-once source's offsets: the worker fences out the
        # task's transactional producer first (Admin.fenceProducers), then
        # writes the offsets in a transaction; the resumed task reads the file
        # again from that position.
        stop_connector(worker, source)
        rewind_to = sum(len(line) + 1 for line in lines[:REWIND_TO_LINE])
        status, body = rest("PATCH", f"/connectors/{source}/offsets", {"offsets": [
            {"partition": {"filename": str(source_file)}, "offset": {"position": rewind_to}}]})
        assert status == 200, f"PATCH /connectors/{source}/offsets answered {status}: {body}\n{worker.log_tail()}"
        fenced = f"Finished fencing out 1 task producers for source connector {source}"
        assert fenced in worker.log.read_text(errors="replace"), f"no '{fenced}' in {worker.log}"
        status, body = rest("PUT", f"/connectors/{source}/resume")
        assert status == 202, f"PUT /connectors/{source}/resume answered {status}: {body}"
        wait_running(worker, source)
        lines += lines[REWIND_TO_LINE:]
        wait_for_topic(worker, bootstrap, topic, lines)
        wait_for_source_position(worker, source, source_file)
        assert_same_lines(read_topic(bootstrap, topic), lines, f"{topic} (read_committed), after the rewind")
        print(f"rewound and read again by {time.monotonic() - started:.1f}s")
        worker.stop()
    finally:
        if worker is not None:
            worker.kill()
        if writer.ident is not None:  # started
            writer.join(timeout=FLOW_TIMEOUT_S)
        cleanup(admin, run, [topic], [])
    errors = [e for log in logs for e in error_lines(log)]
    assert not errors, f"the worker logged {len(errors)} ERROR lines:\n" + "\n".join(errors[:20])
