"""What every scenario gets: a `Context` bound to one broker, and the registry.

A scenario is a function `scenario_x(ctx)` registered with `@scenario`. It
drives real clients against `ctx.bootstrap` and writes what it observes with
`ctx.out(...)`: one line per fact, exact values, in an order that does not
depend on timing. It never asks which broker it runs against. Names come
from `ctx.name(tag)` (unique per run, normalized to `<tag>`); broker-chosen
values go through `ctx.norm`'s helpers (normalize.py is the only place
where anything is normalized). Every wait has a deadline. `Context.close()`
closes the clients and deletes the scenario's groups and topics.

Clients: confluent-kafka (librdkafka) for most things, kafka-python where its
view adds something, and Kafka's Java command-line tools (kafka-topics,
kafka-consumer-groups, kafka-get-offsets and kafka-configs from the tests/java
build at the reference Kafka's version) through `ctx.cli`;
independent runs of a tool at once through `ctx.run_tools`, written with
`ctx.write_tool` as `cli` writes them. kafka-configs loads its classes from a
class data sharing archive next to that classpath, written by its first run.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from normalize import Normalizer
from reference import REFERENCE_KAFKA_VERSION, REPO_ROOT

JAVA_DIR = REPO_ROOT / "tests" / "java"
JAVA_BIN = JAVA_DIR / "bin"
# The tools and the Java client at the reference broker's version, apart from the e2e suite's build
# (.kafgres/java, the 4.1.1 client that the e2e tests keep covering).
JAVA_BUILD = Path(os.environ.get("KAFGRES_REFERENCE_JAVA_BUILD",
                                 REPO_ROOT / ".kafgres" / f"java-{REFERENCE_KAFKA_VERSION}"))
# A first build downloads kafka-clients, kafka-tools and Maven's plugins.
JAVA_BUILD_TIMEOUT_S = 900.0
# For topics that get records with fixed timestamps from 2023 or earlier (fixed, so transcripts can show
# them): without it the broker's retention check (Kafka's runs every 5 minutes) may delete them in the
# middle of a scenario, 7 days (retention.ms) being long past, and the consumers find an empty log.
RETAIN_FOREVER = {"retention.ms": "-1"}
CLI_TIMEOUT_S = 60.0
# Tool runs at once per broker in `Context.run_tools` (each is a JVM; both brokers' scenarios run together).
TOOL_WORKERS = 3
ADMIN_TIMEOUT_S = 15.0
WAIT_TIMEOUT_S = 30.0
# The tools run through tests/java/bin (kafka-configs runs from the same build, with a class data sharing
# archive: see Context.java_command).
JAVA_TOOLS = {"kafka-topics", "kafka-consumer-groups", "kafka-get-offsets", "kafka-console-producer",
              "kafka-transactions", "kafka-leader-election", "kafka-reassign-partitions", "kafka-features",
              "kafka-metadata-quorum",
              "kafka-console-consumer", "kafka-share-groups", "kafka-delegation-tokens", "kafka-streams-groups", "kafgres-probe"}
# Kafka 4.4's kafka-configs.sh (in kafka-tools; it was core's Scala kafka.admin.ConfigCommand up to 4.1).
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
# What the JVM says when a tool's class is not on its classpath: a broken setup, never a transcript line
# (both brokers' transcripts would agree on it).
MISSING_CLASS = "Could not find or load main class"
# slf4j-simple's log lines (tests/java) and Java stack frames: not part of a tool's answer.
TOOL_NOISE_RE = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3} |\s+at |\s+\.\.\. \d+ more|SLF4J|WARNING: )")


@dataclass(frozen=True)
class ToolRun:
    """One run of a Kafka tool (`Context.run_tool`): its cleaned output and exit code (None: timed out)."""
    tool: str
    args: tuple[str, ...]
    stdout: list[str]
    stderr: list[str]
    returncode: int | None
    timeout_s: float


@dataclass(frozen=True)
class Scenario:
    name: str
    func: Callable[["Context"], None]
    doc: str
    # Runs against the secured pair (secured.py: SASL/SCRAM and an ACL authorizer on both), not the plain one.
    secured: bool = False


SCENARIOS: dict[str, Scenario] = {}


def scenario(func: Callable[["Context"], None] | None = None, *, secured: bool = False):
    """Registers `scenario_x(ctx)`; `@scenario(secured=True)` runs it against the secured pair."""

    def register(func: Callable[["Context"], None]) -> Callable[["Context"], None]:
        name = func.__name__.removeprefix("scenario_")
        doc = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else ""
        SCENARIOS[name] = Scenario(name, func, doc, secured)
        return func

    return register(func) if func is not None else register


def error_text(error: object, message: bool = True) -> str:
    """A KafkaError (or KafkaException) as `NAME(code)`, with the broker's message when asked."""
    if isinstance(error, KafkaException):
        error = error.args[0]
    if isinstance(error, KafkaError):
        text = f"{error.name()}({error.code()})"
        return f"{text} {error.str()!r}" if message else text
    return f"{type(error).__name__}: {error}"


def bytes_text(data: bytes | None) -> str:
    """A key or value: as Python writes it, or its length and digest when longer than 64 bytes."""
    if data is None or len(data) <= 64:
        return repr(data)
    return f"<{len(data)} bytes sha256:{hashlib.sha256(data).hexdigest()[:16]}>"


def secured_config() -> dict:
    """librdkafka's settings to log in to the secured pair as its super user."""
    from secured import librdkafka_config

    return librdkafka_config()


def ensure_java_tools() -> None:
    """Builds tests/java at the reference Kafka's version unless that build is current (fails the test if it
    cannot)."""
    import kafka_raw  # noqa: F401  (puts tests/e2e on the path)
    from support import ensure_maven_build

    ensure_maven_build(JAVA_DIR, [f"-Dkafka.version={REFERENCE_KAFKA_VERSION}", f"-Dkafgres.java.build.dir={JAVA_BUILD}"],
                       JAVA_BUILD / "build.stamp", [JAVA_BUILD / "kafgres-probe.jar"], JAVA_BUILD / "classpath.txt",
                       JAVA_BUILD_TIMEOUT_S)


def config_command_classpath() -> str:
    """kafka-configs' classpath: tests/java's build, whose kafka-tools holds ConfigCommand from Kafka 4.4 on;
    the probe jar first, for its simplelogger.properties (WARN: the tool's INFO lines are not its answer)."""
    return f"{JAVA_BUILD / 'kafgres-probe.jar'}:{(JAVA_BUILD / 'classpath.txt').read_text().strip()}"


# Writing kafka-configs' class data sharing archive (Context.run_tool) happens once.
CDS_LOCK = threading.Lock()


def config_command_archive(classpath: str) -> Path:
    """Where kafka-configs' classes are archived (JDK 13+ dynamic CDS): one file per classpath and JVM."""
    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha256(f"{classpath}\n{java}".encode()).hexdigest()[:16]
    return JAVA_BUILD / f"config-command-{key}.jsa"


class Context:
    def __init__(self, bootstrap: str, scenario_name: str, run_id: str, secured: bool = False):
        self.bootstrap = bootstrap
        # On the secured pair every client logs in (SASL/SCRAM-SHA-256) as the super user unless told otherwise.
        self.client_security = secured_config() if secured else {}
        self.scenario = scenario_name
        self.run_id = run_id
        self.norm = Normalizer(bootstrap)
        self.lines: list[str] = []
        self.topics: list[str] = []
        self.groups: list[str] = []
        self._admin: AdminClient | None = None
        self._closers: list[Callable[[], None]] = []
        node = self.describe_cluster_node()
        self.norm.node_id = node

    # --- transcript ----------------------------------------------------------------

    def out(self, *parts: object) -> None:
        self.lines.append(self.norm.line(" ".join(str(p) for p in parts)))

    def name(self, tag: str, kind: str = "topic") -> str:
        """A unique name for a topic or group of this run, written as `<tag>` in transcripts."""
        unique = f"cf{self.run_id}-{self.scenario.replace('_', '-')}-{tag}"
        self.norm.register(unique, f"<{tag}>")
        (self.groups if kind == "group" else self.topics if kind == "topic" else []).append(unique)
        return unique

    # --- clients ------------------------------------------------------------------

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4, **self.client_security})
        return self._admin

    def describe_cluster_node(self) -> int | None:
        result = self.admin.describe_cluster(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S + 5)
        return result.nodes[0].id if result.nodes else None

    def producer(self, config: dict | None = None) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "log_level": 4, "linger.ms": 5, "message.timeout.ms": 20000,
                      "enable.idempotence": False, "acks": "all", **self.client_security, **(config or {})})
        self._closers.append(lambda: p.flush(5))
        return p

    def consumer(self, config: dict | None = None) -> Consumer:
        c = Consumer({"bootstrap.servers": self.bootstrap, "log_level": 3, "group.id": f"cf-unused-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "enable.auto.offset.store": False,
                      "enable.partition.eof": False, "auto.offset.reset": "error", **self.client_security,
                      **(config or {})})

        def close() -> None:
            try:
                c.close()
            except RuntimeError:
                pass  # closed by the scenario

        self._closers.append(close)
        return c

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> str:
        futures = self.admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                           request_timeout=ADMIN_TIMEOUT_S)
        futures[name].result(timeout=ADMIN_TIMEOUT_S + 5)
        self.wait_topic(name, partitions)
        return name

    def wait_topic(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while time.monotonic() < deadline:
            md = self.admin.list_topics(topic=name, timeout=5).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(f"topic {name} did not show {partitions} partitions with leaders within {WAIT_TIMEOUT_S}s")

    def produce(self, topic: str, records: Iterable[dict], config: dict | None = None,
                quiet: bool = False) -> list[tuple[int, int, str | None]]:
        """Produces records (dicts of Producer.produce arguments) and waits for every delivery report.

        Writes `produced <partition>@<offset>` or the error per record unless quiet; returns them.
        """
        p = self.producer(config)
        reports: list[tuple[int, int, str | None] | None] = []

        def on_delivery(i: int):
            def report(err, msg):
                reports[i] = (msg.partition(), msg.offset(), error_text(err) if err else None)

            return report

        for i, record in enumerate(records):
            reports.append(None)
            p.produce(topic, on_delivery=on_delivery(i), **record)
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while any(r is None for r in reports) and time.monotonic() < deadline:
            p.poll(0.1)
        p.flush(5)
        if any(r is None for r in reports):
            raise TimeoutError(f"no delivery report for {reports.count(None)} records to {topic}")
        if not quiet:
            for i, (partition, offset, err) in enumerate(reports):
                self.out(f"produced #{i}", f"p{partition}@{offset}" if err is None else f"p{partition} {err}")
        return reports  # type: ignore[return-value]

    def consume(self, topic: str, partition: int, offset: int, count: int, idle_s: float = 1.0,
                config: dict | None = None, show: Callable | None = None) -> list:
        """Reads `count` records of one partition from `offset` (assign), then waits idle_s for any more.

        Writes one line per record (offset, key, value, headers, timestamp) and
        one per client error; `more: N` if records past `count` arrived.
        """
        c = self.consumer(config)
        c.assign([TopicPartition(topic, partition, offset)])
        got: list = []
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        idle_until = None
        while time.monotonic() < deadline:
            if len(got) >= count:
                idle_until = idle_until or time.monotonic() + idle_s
                if time.monotonic() > idle_until:
                    break
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                self.out(f"consume p{partition}@{offset} error", error_text(msg.error(), message=False))
                if len(got) >= count or msg.error().code() == KafkaError.OFFSET_OUT_OF_RANGE:
                    break
                continue
            got.append(msg)
        c.close()
        for msg in got[:count]:
            self.out(show(msg) if show else self.record_text(msg))
        if len(got) != count:
            self.out(f"consume p{partition}@{offset}: {len(got)} records, expected {count}")
        return got

    def record_text(self, msg) -> str:
        ts_type, ts = msg.timestamp()
        ts_name = {0: "none", 1: "create", 2: "append"}.get(ts_type, str(ts_type))
        headers = msg.headers()
        return (f"p{msg.partition()}@{msg.offset()} key={bytes_text(msg.key())} value={bytes_text(msg.value())}"
                + (f" headers={headers!r}" if headers else "")
                + f" ts={ts_name}:{self.norm.clock_ms(ts)}")

    # --- the Java command-line tools ------------------------------------------------

    def java_command(self, tool: str, *args: str, archive_to: Path | None = None) -> list[str]:
        if tool in JAVA_TOOLS:
            return [str(JAVA_BIN / tool), *args]
        if tool == "kafka-configs":
            classpath = config_command_classpath()
            archive = config_command_archive(classpath)
            # The classes it loads, from the archive (about half its start-up time; Context.run_tool writes it
            # once); -Xlog:disable keeps the JVM quiet about it (an unusable archive is ignored).
            cds = ([f"-XX:ArchiveClassesAtExit={archive_to}"] if archive_to is not None
                   else [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else [])
            return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                    "-Xlog:disable", *cds,
                    "-Dlog4j2.rootLogger.level=off", "-Dlog4j2.level=off",
                    "-cp", classpath, CONFIG_COMMAND, *args]
        raise ValueError(f"unknown tool {tool}")

    def run_tool(self, tool: str, *args: str, sort: bool = False, timeout_s: float = CLI_TIMEOUT_S,
                 stdin: str | None = None) -> "ToolRun":
        """Runs a Kafka tool with `--bootstrap-server` and writes nothing: its stdout and stderr lines with
        runs of blanks collapsed (column widths follow the values' lengths) and log lines and stack frames
        left out (sorted when asked), and its exit code (None when it timed out)."""
        env = {**os.environ, "KAFGRES_JAVA_BUILD": str(JAVA_BUILD)}

        def run(archive_to: Path | None = None) -> subprocess.CompletedProcess:
            cmd = self.java_command(tool, "--bootstrap-server", self.bootstrap, *args, archive_to=archive_to)
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env,
                                  **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}))

        try:
            done = None
            if tool == "kafka-configs":
                archive = config_command_archive(config_command_classpath())
                with CDS_LOCK:  # the first run writes the archive; the others wait for it
                    if not archive.is_file():
                        partial = archive.with_name(f"{archive.name}.{os.getpid()}")
                        done = run(archive_to=partial)
                        if partial.is_file():
                            os.replace(partial, archive)
            if done is None:
                done = run()
        except subprocess.TimeoutExpired:
            return ToolRun(tool, args, [], [], None, timeout_s)
        if MISSING_CLASS in done.stderr:
            raise RuntimeError(f"{tool} cannot run: {done.stderr.strip()}")

        def clean(text: str) -> list[str]:
            kept = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()
                    if line.strip() and not TOOL_NOISE_RE.match(line)]
            return sorted(kept) if sort else kept

        return ToolRun(tool, args, clean(done.stdout), clean(done.stderr), done.returncode, timeout_s)

    def run_tools(self, calls: list[tuple[str, ...]], tool: str = "kafka-configs",
                  workers: int = TOOL_WORKERS) -> list["ToolRun"]:
        """Runs independent invocations of one tool at once (each `calls` item is its arguments) and writes
        nothing; their runs in the order given. For calls whose order does not matter: each JVM's start
        is most of a call's time."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda args: self.run_tool(tool, *args), calls))

    def write_tool(self, run: "ToolRun") -> None:
        """Writes a run as `cli` does: `$ tool args` (normalized), stdout's lines, stderr's, then `exit N`
        when not 0 (or the timeout)."""
        if run.returncode is None:
            self.out(f"$ {run.tool} {shlex.join(run.args)}", f"TIMEOUT after {run.timeout_s:.0f}s")
            return
        self.out(f"$ {run.tool} {shlex.join(run.args)}")
        for text in run.stdout:
            self.out("  " + text)
        for text in run.stderr:
            self.out("  stderr: " + text)
        if run.returncode != 0:
            self.out(f"  exit {run.returncode}")

    def cli(self, tool: str, *args: str, show: bool = True, sort: bool = False,
            timeout_s: float = CLI_TIMEOUT_S, stdin: str | None = None) -> list[str]:
        """Runs a Kafka tool with `--bootstrap-server` and writes its answer.

        Writes `$ tool args` (normalized), then stdout and stderr lines with
        runs of blanks collapsed (column widths follow the values' lengths) and
        log lines and stack frames left out, then `exit N` when not 0. Returns
        stdout's collapsed lines (before normalization). `stdin` is fed to the
        tool (the console producer reads its records there).
        """
        run = self.run_tool(tool, *args, sort=sort, timeout_s=timeout_s, stdin=stdin)
        if show or run.returncode is None:
            self.write_tool(run)
        return run.stdout

    # --- teardown -------------------------------------------------------------------

    def close(self) -> None:
        for close in reversed(self._closers):
            try:
                close()
            except Exception:  # noqa: BLE001  (teardown is best effort)
                pass
        try:
            if self.groups:
                for f in self.admin.delete_consumer_groups(self.groups, request_timeout=10).values():
                    try:
                        f.result(timeout=15)
                    except Exception:  # noqa: BLE001
                        pass
            if self.topics:
                for f in self.admin.delete_topics(self.topics, operation_timeout=10).values():
                    try:
                        f.result(timeout=15)
                    except Exception:  # noqa: BLE001
                        pass
        except Exception:  # noqa: BLE001
            pass
