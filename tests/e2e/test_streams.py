"""A Kafka Streams application with exactly_once_v2 against Kafgres, killed with kill -9 and restarted.

tests/streams is a Maven project: kafgres.streams.WordCount on kafka-streams
4.1.1 (Maven Central), built into .kafgres/streams/build once, and again only
when tests/streams/pom.xml or src/ is newer than the build (offline when ~/.m2
has everything). Java 17+ and Maven must be installed. Streams 4.1.1 uses
transaction version 2 (KIP-890 part 2) on Kafgres: Produce adds partitions to
the transaction, EndTxn bumps the epoch.

The application: lines of an input topic (PARTITIONS partitions) are split into
words (flatMapValues), regrouped by word (groupBy: the repartition topic
APP-words-repartition), counted in a persistent RocksDB store (the changelog
topic APP-word-counts-changelog) with the record cache off, so every count
update goes to the output topic (word -> count, Long); processing.guarantee
exactly_once_v2, commit.interval.ms 100.

- A librdkafka idempotent producer feeds lines drawn from a small vocabulary
  (VOCABULARY, 1 to WORDS_PER_LINE_MAX words a line, null keys) at about 100
  lines a second for the whole scenario (never more than FEED_LINES_MAX); the
  expected count of each word is computed from the acknowledged lines.
- Run 1 starts; once its committed output grew by PROGRESS_RECORDS records,
  its JVM is stopped (SIGSTOP) at a moment when kafgres.transactions shows its
  transaction Ongoing with the output topic in it and an output partition's end
  is past its last stable offset (the transaction's records are written, not
  lingering in the producer), and gets kill -9 there (the row is checked
  unchanged after the kill).
- Run 2 starts with the same application.id and state directory, so the same
  process id and transactional id (checked): its InitProducerId fences run 1's
  epoch and aborts run 1's transaction. It makes the same progress and is
  killed -9 the same way.
- The state directory is wiped and run 3 starts: a new process id and
  transactional id (checked), so run 2's open transaction is aborted only by
  the broker, when its transaction.timeout.ms (Streams' 10 s) runs out, which
  holds back run 3's read_committed restoration until then; the store is
  rebuilt from the changelog (Streams' "Finished restoring changelog" lines,
  required). The feed stops once run 3 has made progress; run 3 finishes the
  input and is stopped with SIGTERM (a clean close: NOT_RUNNING, exit 143).
- Checked with read_committed readers after that: each word's values in the
  output topic are exactly 1, 2, ..., its expected count (nothing counted
  twice after a crash, no aborted update visible, none lost, in order); the
  output has aborted records that read_uncommitted sees (the kills did land in
  transactions); the changelog's last value per word is the expected count and
  its values per word strictly increase; the repartition and changelog topics
  exist in Kafgres with PARTITIONS partitions, cleanup.policy delete and
  compact; in kafgres.transactions run 2's transactional id is CompleteAbort
  and every id of the application is in a completed state.
- Each run's log (.kafgres/streams/runs/APP/run-N.log) has no ERROR line, the
  killed runs' and the restarted ones' alike.

Every wait has a deadline, loops are bounded, and every JVM is killed whatever
happens (and gets SIGKILL from the kernel if pytest dies). The topics and the
group are deleted afterwards, the state directory removed. About 30 s.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from support import REPO_ROOT, Psql, ensure_maven_build, isolated_reader, need_tool

sys.path.insert(0, str(REPO_ROOT / "scripts" / "bench"))
from apache_kafka import terminate  # noqa: E402  (scripts/bench is not a package)

STREAMS_DIR = REPO_ROOT / "tests" / "streams"
STREAMS_HOME = REPO_ROOT / ".kafgres" / "streams"
BUILD_DIR = STREAMS_HOME / "build"
APP_JAR = BUILD_DIR / "kafgres-streams.jar"
CLASSPATH_FILE = BUILD_DIR / "classpath.txt"
# Written after a successful build; the build is reused while it is newer than every source.
BUILD_STAMP = BUILD_DIR / "build.stamp"
# Held while building, so that two sessions sharing .kafgres never build into each other.
BUILD_LOCK = STREAMS_HOME / "build.lock"
RUNS_DIR = STREAMS_HOME / "runs"
RUN_DIR_KEEP_S = 24 * 3600.0  # older runs' logs and state are removed

MAIN_CLASS = "kafgres.streams.WordCount"
# The names WordCount gives its store and its groupBy (WordCount.STORE_NAME, REPARTITION_NAME).
STORE_NAME = "word-counts"
REPARTITION_NAME = "words"

BUILD_TIMEOUT_S = 900.0  # a first build downloads kafka-streams, RocksDB and Maven's plugins
APP_HEAP = "-Xmx256m"

PARTITIONS = 3
VOCABULARY = ("kafka", "postgres", "stream", "table", "commit", "abort", "fence", "epoch",
              "offset", "marker", "changelog", "repartition", "state", "store", "exactly", "once")
WORDS_PER_LINE_MAX = 5
FEED_CHUNK_LINES = 10
FEED_INTERVAL_S = 0.1  # FEED_CHUNK_LINES every FEED_INTERVAL_S: about 100 lines, 300 words a second
FEED_LINES_MAX = 20_000  # the feed stops here whatever happens (about 200 s of it)
SEED = 890  # the lines are the same in every run of the test

# A run is killed (or the feed stopped) once the committed output grew by this many records
# since the run reached RUNNING: its tasks are assigned, restored and processing.
PROGRESS_RECORDS = 300
# From a JVM's start to that progress: start-up, a rebalance that waits up to the killed member's
# session timeout (6 s), restoration, and for run 3 the broker aborting run 2's transaction at its
# timeout (Streams' 10 s under exactly-once).
PROGRESS_TIMEOUT_S = 60.0
# After the feed stopped: the last records processed and committed.
FINISH_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0  # SIGTERM to exit (the application's own close waits up to 20 s)
READ_TIMEOUT_S = 30.0
POLL_S = 0.2
FREEZE_TRIES = 150  # looks at kafgres.transactions for an open transaction before a kill -9
FREEZE_SETTLE_S = 0.2

ERROR_LINE = re.compile(r"^\[[^\]]+\] ERROR ")
RESTORED_LINE = re.compile(r"Finished restoring changelog (\S+) to store " + re.escape(STORE_NAME) +
                           r" with a total number of (\d+) records")
TRANSACTIONAL_ID = re.compile(r"transactionalId=([^\],]+)\]")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
COMPLETED_TRANSACTION_STATES = {"Empty", "CompleteCommit", "CompleteAbort"}


# --------------------------------------------------------------------------
# Building tests/streams


def ensure_build() -> str:
    """Builds tests/streams unless the build is current; the application's classpath."""
    need_tool("java", "the Streams test needs Java 17+")
    STREAMS_HOME.mkdir(parents=True, exist_ok=True)
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build finishes first (bounded by its own timeout)
        ensure_maven_build(STREAMS_DIR, [f"-Dkafgres.streams.build.dir={BUILD_DIR}"], BUILD_STAMP, [APP_JAR],
                           CLASSPATH_FILE, BUILD_TIMEOUT_S)
    return os.pathsep.join([str(APP_JAR), CLASSPATH_FILE.read_text().strip()])


def prune_old_runs() -> None:
    if not RUNS_DIR.is_dir():
        return
    cutoff = time.time() - RUN_DIR_KEEP_S
    for run in RUNS_DIR.iterdir():
        if run.is_dir() and run.stat().st_mtime < cutoff:
            shutil.rmtree(run, ignore_errors=True)


# --------------------------------------------------------------------------
# The application's JVM


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when pytest dies. Not SIGTERM (what scripts/bench's JVMs
    get): a JVM this test has stopped with SIGSTOP would keep a SIGTERM pending forever."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class WordCountApp:
    """One run of the WordCount JVM: its log is run_dir/run-N.log, its stdout (state changes) run-N.stdout."""

    def __init__(self, number: int, classpath: str, bootstrap: str, app_id: str, input_topic: str,
                 output_topic: str, state_dir: Path, run_dir: Path, jvm_args: tuple[str, ...] = ()) -> None:
        self.number = number
        self.log = run_dir / f"run-{number}.log"
        self.stdout_path = run_dir / f"run-{number}.stdout"
        self.stdout = open(self.stdout_path, "w")
        self.process = subprocess.Popen(
            ["java", APP_HEAP, "-XX:+UseSerialGC", "-Djava.awt.headless=true", f"-Dkafgres.streams.log={self.log}",
             *jvm_args, "-cp", classpath, MAIN_CLASS, bootstrap, app_id, input_topic, output_topic, str(state_dir)],
            stdout=self.stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )
        self.started = time.monotonic()

    def check_running(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"WordCount run {self.number} exited with {self.process.returncode}; "
                        f"see {self.log}\n{self.describe()}")

    def kill9(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.stdout.close()

    def stop(self) -> int:
        """SIGTERM (the application's clean close), SIGKILL after STOP_TIMEOUT_S; the exit status."""
        terminate(self.process, STOP_TIMEOUT_S)
        self.stdout.close()
        return self.process.returncode

    def is_running(self) -> bool:
        """Whether the application's last state change (on stdout) was to RUNNING."""
        self.stdout.flush()
        lines = self.stdout_path.read_text(errors="replace").splitlines()
        return bool(lines) and lines[-1].endswith("-> RUNNING")

    def transactional_id(self) -> str:
        """The transactional id of the run's producer (exactly_once_v2: APP-PROCESS_ID-THREAD), from its log."""
        found = TRANSACTIONAL_ID.search(self.log_text())
        assert found, f"run {self.number}'s log names no transactional id\n{self.describe()}"
        return found.group(1)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def describe(self, lines: int = 25) -> str:
        try:
            states = self.stdout_path.read_text(errors="replace").strip()
        except FileNotFoundError:
            states = ""
        tail = "\n".join(self.log_text().splitlines()[-lines:])
        return f"stdout:\n{states}\nlog ends:\n{tail}"

    def error_lines(self) -> list[str]:
        """The ERROR lines of the log, each with the first lines of its stack trace."""
        lines = self.log_text().splitlines()
        found = []
        for i, line in enumerate(lines):
            if ERROR_LINE.match(line):
                trace = [t for t in lines[i + 1:i + 6] if not t.startswith("[")]
                found.append("\n".join([line, *trace]))
        return found


# --------------------------------------------------------------------------
# The feed of lines


class Feeder(threading.Thread):
    """Produces FEED_CHUNK_LINES lines every FEED_INTERVAL_S until stopped (or FEED_LINES_MAX)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="streams-feeder", daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 20000})
        self.random = random.Random(SEED)
        self.lines: list[str] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failures.append(str(err))

    def run(self) -> None:
        while not self.stopping.is_set() and len(self.lines) < FEED_LINES_MAX:
            for _ in range(FEED_CHUNK_LINES):
                line = " ".join(self.random.choice(VOCABULARY)
                                for _ in range(self.random.randint(1, WORDS_PER_LINE_MAX)))
                self.producer.produce(self.topic, value=line.encode(), on_delivery=self._on_delivery)
                self.lines.append(line)
            self.producer.poll(0)
            self.stopping.wait(FEED_INTERVAL_S)

    def finish(self) -> Counter:
        """Stops the feed and waits for every delivery; the expected count of each word."""
        self.stopping.set()
        self.join(timeout=10)
        assert not self.is_alive(), "the feeder thread did not stop"
        remaining = self.producer.flush(30)
        assert remaining == 0, f"{remaining} of {len(self.lines)} lines still unacknowledged after 30 s"
        assert not self.failures, f"{len(self.failures)} lines not delivered: {self.failures[:5]}"
        return Counter(word for line in self.lines for word in line.split())


# --------------------------------------------------------------------------
# Reading what the application wrote


def _long(value: bytes) -> int:
    (count,) = struct.unpack(">q", value)
    return count


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    return isolated_reader(bootstrap, isolation)


class OutputWatcher:
    """A read_committed reader of the output topic kept open through the runs: every word's values so far."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = _consumer(bootstrap, "read_committed")
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.values: dict[str, list[int]] = {}
        self.records = 0
        self.errors: list[str] = []

    def drain(self, timeout_s: float = POLL_S) -> None:
        """Takes in what arrives within `timeout_s` (at most a few thousand records)."""
        deadline = time.monotonic() + timeout_s
        for _ in range(10_000):
            msg = self.consumer.poll(max(0.0, deadline - time.monotonic()))
            if msg is None:
                return
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    self.errors.append(str(msg.error()))
                continue
            self.values.setdefault(msg.key().decode(), []).append(_long(msg.value()))
            self.records += 1

    def last(self) -> dict[str, int]:
        return {word: values[-1] for word, values in self.values.items()}

    def close(self) -> None:
        self.consumer.close()


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[tuple[int, str, int]]:
    """Every record of the topic, as (partition, key, Long value), in each partition's order."""
    consumer = _consumer(bootstrap, isolation)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    records: list[tuple[int, str, int]] = []
    at_end: set[int] = set()
    errors: list[str] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    errors.append(str(msg.error()))
                continue
            at_end.discard(msg.partition())
            records.append((msg.partition(), msg.key().decode(), _long(msg.value())))
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, (
        f"{isolation} read of {topic} reached the end of partitions {sorted(at_end)} only within "
        f"{READ_TIMEOUT_S:.0f}s ({len(records)} records); errors {errors[-5:]}")
    return records


def values_by_word(records: list[tuple[int, str, int]]) -> dict[str, list[int]]:
    values: dict[str, list[int]] = {}
    partition_of: dict[str, int] = {}
    for partition, word, count in records:
        assert partition_of.setdefault(word, partition) == partition, f"{word!r} is in two partitions"
        values.setdefault(word, []).append(count)
    return values


def app_transactions(psql: Psql, app_id: str) -> list[tuple[str, str, str]]:
    """(transactional id, state, partitions) of the application's transactional ids in kafgres.transactions."""
    rows = psql.rows("select transactional_id, state, partitions::text from kafgres.transactions "
                     "where starts_with(transactional_id, :'prefix') order by transactional_id",
                     prefix=f"{app_id}-")
    return [(r[0], r[1], r[2]) for r in rows]


def topic_config(admin: AdminClient, topic: str, name: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource], request_timeout=15)[resource].result(timeout=20)
    return configs[name].value


def cleanup(admin: AdminClient, topics: list[str], group: str) -> None:
    """Deletes what this run created on the dev cluster."""
    existing = set(admin.list_topics(timeout=10).topics)
    futures = {}
    doomed = [t for t in topics if t in existing]
    if doomed:
        futures.update(admin.delete_topics(doomed, operation_timeout=15, request_timeout=15))
    futures.update(admin.delete_consumer_groups([group], request_timeout=15))
    for future in futures.values():
        try:
            future.result(timeout=20)
        except Exception:  # noqa: BLE001  (cleanup: a topic or group left behind is not this test's failure)
            pass


# --------------------------------------------------------------------------


def freeze_in_transaction(app: WordCountApp, psql: Psql, app_id: str, bootstrap: str,
                          output_topic: str) -> tuple[str, str, str]:
    """Stops the JVM (SIGSTOP) at a moment when its transaction is open and holds records in the
    output topic; that transaction's row.

    A transaction lasts about commit.interval.ms and the next one opens with the next record
    sent, so a few tries find one open; the frozen JVM cannot end it while it is looked at
    (requests it sent before it stopped are given FREEZE_SETTLE_S to be answered first). An
    open transaction is not enough: one may hold only repartition records, or have added an
    output partition whose batch still lingers in the producer, and the kill then leaves nothing
    in the output topic to abort. So the look also asks for an output partition whose end is
    past its last stable offset: records of the open transaction, written.
    """
    transactional_id = app.transactional_id()
    rows: list[tuple[str, str, str]] = []
    committed, uncommitted = _consumer(bootstrap, "read_committed"), _consumer(bootstrap, "read_uncommitted")
    try:
        for _ in range(FREEZE_TRIES):
            app.check_running()
            app.process.send_signal(signal.SIGSTOP)
            time.sleep(FREEZE_SETTLE_S)  # what it sent before it stopped (an EndTxn) is answered first
            rows = [r for r in app_transactions(psql, app_id) if r[0] == transactional_id]
            if (rows and rows[0][1] == "Ongoing" and output_topic in rows[0][2]
                    and _open_records_in(committed, uncommitted, output_topic)):
                return rows[0]
            app.process.send_signal(signal.SIGCONT)
            # Long enough to run a commit interval or two: stopped 0.2 s of every
            # look, a JVM on a busy machine made no progress between short ones.
            time.sleep(random.uniform(0.05, 0.4))
    finally:
        committed.close()
        uncommitted.close()
    pytest.fail(f"run {app.number}'s transaction {transactional_id} was not open with output records in any of "
                f"{FREEZE_TRIES} looks; last: {rows}\n{app.describe()}")


def _open_records_in(committed: Consumer, uncommitted: Consumer, topic: str) -> bool:
    """Whether some partition of `topic` has records past its last stable offset (an open transaction's)."""
    for partition in range(PARTITIONS):
        tp = TopicPartition(topic, partition)
        stable = committed.get_watermark_offsets(tp, timeout=5, cached=False)[1]
        end = uncommitted.get_watermark_offsets(tp, timeout=5, cached=False)[1]
        if end > stable:
            return True
    return False


def wait_for_progress(app: WordCountApp, watcher: OutputWatcher, what: str) -> None:
    """Waits until the run is RUNNING (tasks assigned and restored), then until the committed
    output grew by PROGRESS_RECORDS: records that run wrote, the previous run being dead by then."""
    deadline = app.started + PROGRESS_TIMEOUT_S
    since: int | None = None
    while since is None or watcher.records < since + PROGRESS_RECORDS:
        app.check_running()
        if time.monotonic() > deadline:
            grown = "(not RUNNING yet)" if since is None else f"by {watcher.records - since} records"
            pytest.fail(f"run {app.number}'s committed output grew {grown}, not by {PROGRESS_RECORDS}, "
                        f"within {PROGRESS_TIMEOUT_S:.0f}s ({what}); reader errors {watcher.errors[-5:]}\n"
                        f"{app.describe()}")
        watcher.drain()
        if since is None and app.is_running():
            since = watcher.records


def test_word_count_exactly_once_survives_kill_9(bootstrap, admin, psql, create_topic, topic_name):
    classpath = ensure_build()
    prune_old_runs()
    app_id = f"e2e-streams-wordcount-{uuid.uuid4().hex[:10]}"
    input_topic, output_topic = topic_name("lines"), topic_name("counts")
    repartition_topic = f"{app_id}-{REPARTITION_NAME}-repartition"
    changelog_topic = f"{app_id}-{STORE_NAME}-changelog"
    run_dir = RUNS_DIR / app_id
    state_dir = run_dir / "state"
    state_dir.mkdir(parents=True)
    apps: list[WordCountApp] = []
    feeder: Feeder | None = None
    watcher: OutputWatcher | None = None

    def start(number: int) -> WordCountApp:
        app = WordCountApp(number, classpath, bootstrap, app_id, input_topic, output_topic, state_dir, run_dir)
        apps.append(app)
        return app

    def kill_mid_transaction(app: WordCountApp) -> tuple[str, str, str]:
        """kill -9 while the run's transaction is open: the run's transaction, as the kill left it."""
        time.sleep(random.uniform(0.1, 0.5))
        watcher.drain(0.0)
        row = freeze_in_transaction(app, psql, app_id, bootstrap, output_topic)
        app.kill9()
        after = [r for r in app_transactions(psql, app_id) if r[0] == row[0]]
        assert after == [row], f"run {app.number}'s transaction moved while its JVM was stopped: {row} -> {after}"
        print(f"\nrun {app.number} killed -9 with {watcher.records} committed output records read, its "
              f"transaction {row[0]} {row[1]} in {row[2].count('[') - 1} partitions")
        return row

    try:
        create_topic(input_topic, PARTITIONS)
        create_topic(output_topic, PARTITIONS)
        watcher = OutputWatcher(bootstrap, output_topic)
        feeder = Feeder(bootstrap, input_topic)
        feeder.start()

        # Run 1, killed in the middle of processing.
        run1 = start(1)
        wait_for_progress(run1, watcher, "first start")
        kill_mid_transaction(run1)

        # Run 2: same state directory, so the same process id and transactional id (its
        # InitProducerId fences run 1 and aborts its transaction); killed as well.
        run2 = start(2)
        wait_for_progress(run2, watcher, "restart with the same state directory")
        assert run2.transactional_id() == run1.transactional_id(), "run 2 did not reuse run 1's process id"
        kill_mid_transaction(run2)

        # Run 3: the state directory wiped; the store comes back from the changelog.
        shutil.rmtree(state_dir)
        state_dir.mkdir()
        run3 = start(3)
        wait_for_progress(run3, watcher, "restart with the state directory wiped")
        assert run3.transactional_id() != run2.transactional_id(), "run 3 has run 2's process id: state not wiped?"
        expected = feeder.finish()
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        while watcher.last() != dict(expected) and time.monotonic() < deadline:
            run3.check_running()
            over = {w: (n, expected[w]) for w, n in watcher.last().items() if n > expected[w]}
            assert not over, f"words counted past their expected count (count, expected): {over}"
            watcher.drain()
        assert watcher.last() == dict(expected), (
            f"{FINISH_TIMEOUT_S:.0f}s after the feed stopped the committed output's last counts are "
            f"{dict(sorted(watcher.last().items()))}, expected {dict(sorted(expected.items()))}\n{run3.describe()}")
        status = run3.stop()
        # The JVM exits 143 (128 + SIGTERM) once the shutdown hook's clean close returned.
        assert status == 143 and run3.stdout_path.read_text().endswith("PENDING_SHUTDOWN -> NOT_RUNNING\n"), (
            f"run 3 exited {status} on SIGTERM, not after a clean close\n{run3.describe()}")
        print(f"\n{len(feeder.lines)} lines, {sum(expected.values())} words fed")

        check_results(bootstrap, admin, output_topic, repartition_topic, changelog_topic, expected)
        # Run 2's transaction was left open under an id nobody used again: the broker aborted it at its timeout.
        transactions = {r[0]: r for r in app_transactions(psql, app_id)}
        assert transactions.get(run2.transactional_id(), ("", ""))[1] == "CompleteAbort", (
            f"run 2's transaction, open when it was killed, is not aborted: {transactions}")
        assert all(r[1] in COMPLETED_TRANSACTION_STATES for r in transactions.values()), (
            f"transactions of {app_id} not completed: {transactions}")
        restored = [m.groups() for m in RESTORED_LINE.finditer(run3.log_text())]
        assert restored, f"run 3 (state directory wiped) logged no restoration of {STORE_NAME}\n{run3.describe()}"
        print(f"run 3 restored {STORE_NAME} from: {restored}")
    finally:
        if feeder is not None:
            feeder.stopping.set()
        for app in apps:
            if app.process.poll() is None:
                app.process.kill()
                app.process.wait(timeout=10)
        if watcher is not None:
            watcher.close()
        shutil.rmtree(state_dir, ignore_errors=True)
        cleanup(admin, [input_topic, output_topic, repartition_topic, changelog_topic], app_id)

    errors = {app.number: app.error_lines() for app in apps}
    assert not any(errors.values()), "WordCount logged ERROR lines:\n" + "\n".join(
        f"run {n} ({run_dir}/run-{n}.log):\n" + "\n".join(lines[:10]) for n, lines in errors.items() if lines)


def check_results(bootstrap, admin, output_topic, repartition_topic, changelog_topic, expected: Counter) -> None:
    # The output: each word's committed updates are exactly 1..count, in order.
    output = values_by_word(read_topic(bootstrap, output_topic))
    assert set(output) == set(expected), f"words in the output {sorted(output)}, fed {sorted(expected)}"
    wrong = {w: v for w, v in output.items() if v != list(range(1, expected[w] + 1))}
    assert not wrong, "committed count updates that are not exactly 1, 2, ..., count: " + "; ".join(
        f"{w} (expected up to {expected[w]}): {len(v)} values, first out of place at index "
        f"{next((i for i, n in enumerate(v) if n != i + 1), len(v))}: {v[:5]}...{v[-5:]}" for w, v in wrong.items())
    # The kills left records of open transactions behind, which the restarts aborted.
    committed = sum(len(v) for v in output.values())
    aborted = len(read_topic(bootstrap, output_topic, "read_uncommitted")) - committed
    print(f"output: {committed} committed records, {aborted} more read_uncommitted (aborted)")
    assert aborted > 0, "no aborted record in the output topic: the kills did not land in a transaction"

    # The changelog: the store's last value per word is its count.
    changelog = values_by_word(read_topic(bootstrap, changelog_topic))
    assert {w: v[-1] for w, v in changelog.items()} == dict(expected), (
        f"the changelog's last values {dict(sorted((w, v[-1]) for w, v in changelog.items()))}, "
        f"expected {dict(sorted(expected.items()))}")
    not_increasing = {w: v for w, v in changelog.items() if any(b <= a for a, b in zip(v, v[1:]))}
    assert not not_increasing, f"changelog values not strictly increasing: {not_increasing}"

    # The internal topics Streams created.
    topics = admin.list_topics(timeout=10).topics
    for topic in (repartition_topic, changelog_topic):
        assert topic in topics, f"{topic} is not in Kafgres's topics"
        assert len(topics[topic].partitions) == PARTITIONS, f"{topic} has {len(topics[topic].partitions)} partitions"
    assert topic_config(admin, changelog_topic, "cleanup.policy") == "compact"
    assert topic_config(admin, repartition_topic, "cleanup.policy") == "delete"
