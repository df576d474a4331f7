"""Helpers shared by the end-to-end tests (the fixtures in conftest.py wrap them).

- `read_env_file` / `Kafgres`: what `./kafgres start` wrote to `.kafgres/env`,
  the launcher, and the Postgres server log;
- `Psql`: SQL through the psql binary, values passed as psql variables;
- `produce_all`: produce records and wait for every delivery report;
- `wait_for_topic_metadata`: wait until Metadata shows a topic ready.

Every wait here has a deadline.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import kafka_wire

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = Path(os.environ.get("KAFGRES_ENV_FILE", REPO_ROOT / ".kafgres" / "env"))
REQUIRED_ENV_KEYS = (
    "KAFGRES_BOOTSTRAP",
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "KAFGRES_PGDATA",
    "KAFGRES_PG_LOG",
    "KAFGRES_ROOT",
)
BROKER_BACKEND_TYPE = "kafgres broker"

PRODUCER_DEFAULTS = {
    # The plain (non-idempotent) produce path; test_idempotence.py turns idempotence on.
    "enable.idempotence": False,
    "acks": "all",
    "linger.ms": 5,
    # Fail a record after 20 s instead of librdkafka's 5 minutes.
    "message.timeout.ms": 20000,
}

CONSUMER_DEFAULTS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    # An out-of-range start offset is an error, never a silent jump.
    "auto.offset.reset": "error",
}


def read_env_file(path: Path) -> dict[str, str]:
    """Parses shell `KEY=VALUE` lines (optional `export`, shell quoting, # comments)."""
    env: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"{path}:{lineno}: not a KEY=VALUE line: {line!r}")
        env[key] = " ".join(shlex.split(value, comments=True))
    return env


class Kafgres:
    """The running cluster as the tests see it: addresses, paths and the launcher."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.bootstrap = env["KAFGRES_BOOTSTRAP"]
        self.root = Path(env["KAFGRES_ROOT"])
        self.pg_log = Path(env["KAFGRES_PG_LOG"])
        # Child processes (psql, the launcher) get the libpq variables.
        self.process_env = {**os.environ, **env}

    def launcher(self, *args: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess:
        """Runs `./kafgres ARGS` from the repo root; fails the test on a non-zero exit."""
        cmd = [str(self.root / "kafgres"), *args]
        try:
            result = subprocess.run(
                cmd, cwd=self.root, env=self.process_env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s")
        assert result.returncode == 0, (
            f"`{shlex.join(cmd)}` exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        return result

    def pg_log_size(self) -> int:
        try:
            return self.pg_log.stat().st_size
        except FileNotFoundError:
            return 0

    def pg_log_since(self, offset: int) -> str:
        """The server log written after byte `offset` (all of it if the file shrank meanwhile)."""
        data = self.pg_log.read_bytes()
        if len(data) < offset:
            offset = 0
        return data[offset:].decode(errors="replace")


class PsqlError(Exception):
    """psql failed (server down, in recovery, SQL error) or timed out."""


class Psql:
    """Runs SQL through the psql binary with the cluster's libpq variables.

    Values are passed as psql variables (`-v name=value`, written :'name' in
    the SQL) and the SQL is fed on stdin, where psql interpolates them (it
    does not for `-c`). Rows come back as lists of strings.
    """

    FIELD_SEPARATOR = "\x1f"

    def __init__(self, kafgres: Kafgres) -> None:
        self._env = kafgres.process_env

    def rows(self, sql: str, timeout_s: float = 30.0, **variables: object) -> list[list[str]]:
        cmd = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", self.FIELD_SEPARATOR]
        for name, value in variables.items():
            cmd += ["-v", f"{name}={value}"]
        cmd += ["-f", "-"]
        try:
            result = subprocess.run(cmd, input=sql, env=self._env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            raise PsqlError(f"psql did not finish within {timeout_s:.0f}s: {sql}") from e
        if result.returncode != 0:
            raise PsqlError(f"psql exited {result.returncode}: {result.stderr.strip()}\nSQL: {sql}")
        return [line.split(self.FIELD_SEPARATOR) for line in result.stdout.splitlines()]

    def value(self, sql: str, **variables: object) -> str:
        """The single value of a query that must return exactly one row of one column."""
        rows = self.rows(sql, **variables)
        assert len(rows) == 1 and len(rows[0]) == 1, f"expected one value from {sql!r}, got {rows!r}"
        return rows[0][0]

    def broker_pids(self, timeout_s: float = 10.0) -> list[int]:
        rows = self.rows(
            "select pid from pg_stat_activity where backend_type = :'backend_type' order by pid",
            timeout_s=timeout_s,
            backend_type=BROKER_BACKEND_TYPE,
        )
        return [int(r[0]) for r in rows]

    def broker_pid(self) -> int:
        """The pid of the one broker worker; fails the test if there is not exactly one."""
        pids = self.broker_pids()
        assert len(pids) == 1, f"expected exactly one '{BROKER_BACKEND_TYPE}' backend, found pids {pids}"
        return pids[0]


def wait_for_topic_metadata(admin: AdminClient, name: str, partitions: int, timeout_s: float = 15.0) -> None:
    """Waits until Metadata lists the topic with partitions 0..n-1, each led by a listed broker.

    Asks for all topics (a null topic list), so the lookup itself never auto-creates.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=5)
        except KafkaException as e:
            last = str(e)
            time.sleep(0.2)
            continue
        topic = md.topics.get(name)
        if topic is None:
            last = "topic not listed"
        elif topic.error is not None:
            last = f"topic error {topic.error}"
        elif sorted(topic.partitions) != list(range(partitions)):
            last = f"partitions {sorted(topic.partitions)}"
        elif any(p.leader not in md.brokers for p in topic.partitions.values()):
            last = f"leaders {[p.leader for p in topic.partitions.values()]} vs brokers {list(md.brokers)}"
        else:
            return
        time.sleep(0.2)
    pytest.fail(f"topic {name} not ready with {partitions} partitions within {timeout_s:.0f}s: {last}")


def poll_record(consumer: Consumer, timeout_s: float, errors: list[str]) -> Message | None:
    """One consumer poll: the record it returned, or None when none came in
    `timeout_s` or the client reported an error, which goes into `errors` so
    that a test can say why nothing arrived."""
    msg = consumer.poll(timeout_s)
    if msg is None:
        return None
    if msg.error() is not None:
        errors.append(str(msg.error()))
        return None
    return msg


def read_committed_rows(bootstrap: str, topic: str, partition: int, end: int | None = None) -> list[list]:
    """Every record of a partition before `end` (by default its end offset now), read_committed, as
    JSON-ready rows: [offset, key, value, [[header, value]...], timestamp] (keys, values and header
    values as text)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rows-reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    got: list[list] = []
    try:
        if end is None:
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                    break
                continue
            assert message.error() is None, f"{topic}/{partition}: {message.error()}"
            if message.offset() >= end:
                break
            got.append([message.offset(), (message.key() or b"").decode(),
                        None if message.value() is None else message.value().decode(),
                        [[k, v.decode()] for k, v in (message.headers() or [])], message.timestamp()[1]])
    finally:
        consumer.close()
    return got


def produce_all(producer: Producer, records: list[dict], timeout_s: float = 30.0) -> list[Message]:
    """Produces records (dicts of Producer.produce keyword arguments) and waits for every delivery report.

    Returns the delivery-report messages in the order of `records`; fails the
    test if any record is not acknowledged within `timeout_s` or failed.
    """
    reports: list[tuple[KafkaError | None, Message] | None] = [None] * len(records)

    def callback_for(i: int):
        def on_delivery(err, msg):
            reports[i] = (err, msg)

        return on_delivery

    for i, record in enumerate(records):
        producer.produce(on_delivery=callback_for(i), **record)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    assert remaining == 0, f"{remaining} of {len(records)} records still unacknowledged after {timeout_s:.0f}s"
    missing = [i for i, r in enumerate(reports) if r is None]
    assert not missing, f"no delivery report for records {missing}"
    failed = [(i, str(r[0])) for i, r in enumerate(reports) if r[0] is not None]
    assert not failed, f"delivery failed (record index, error): {failed}"
    return [r[1] for r in reports]


# --------------------------------------------------------------------------
# Throwaway clusters: tests that need their own Postgres (kill -9 loops,
# settings the dev cluster does not have) start one on other ports.

PG_BIN = Path(os.environ.get("KAFGRES_PG_BIN", "/usr/lib/postgresql/15/bin"))


def as_postgres(*cmd: str, timeout_s: float = 90.0) -> subprocess.CompletedProcess:
    """Runs a command as the postgres user; fails the test if it fails."""
    full = ["runuser", "-u", "postgres", "--", *cmd]
    result = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, f"{' '.join(full)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class ThrowawayCluster:
    """A Postgres cluster with the extension preloaded, in a temporary directory:
    initdb (trust over TCP), the kafgres settings plus `settings`, pg_ctl start,
    its server log, and `destroy()` that stops it and removes everything."""

    def __init__(self, tag: str, pg_port: int, kafka_port: int, home: Path | None = None) -> None:
        self.tag = tag
        self.pg_port = pg_port
        self.kafka_port = kafka_port
        self.home = home or Path(tempfile.mkdtemp(prefix=f"kafgres-{tag}-", dir="/tmp"))
        self.pgdata = self.home / "pgdata"
        self.log = self.home / "postgres.log"
        self.socket_dir = self.home / "run"
        self.socket_dir.mkdir(parents=True)
        shutil.chown(self.home, "postgres", "postgres")
        shutil.chown(self.socket_dir, "postgres", "postgres")
        self.conninfo = f"host=127.0.0.1 port={pg_port} user=postgres dbname=postgres connect_timeout=3"

    def init(self, settings: dict[str, str], kafgres: bool = True) -> None:
        """initdb, then postgresql.conf with the ports, the extension unless `kafgres` is false (a plain
        Postgres), and `settings` (values as written)."""
        as_postgres(
            str(PG_BIN / "initdb"), "-D", str(self.pgdata), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8",
        )
        lines = {
            "port": str(self.pg_port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.socket_dir}'",
        }
        if kafgres:
            lines.update({
                "shared_preload_libraries": "'kafgres'",
                "wal_level": "replica",
                "kafgres.port": str(self.kafka_port),
                "kafgres.listen_address": "'127.0.0.1'",
                "kafgres.database": "'postgres'",
            })
        lines.update(settings)
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(f"\n# kafgres throwaway cluster: {self.tag}\n")
            conf.writelines(f"{name} = {value}\n" for name, value in lines.items())

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def sql(self, *statements: str, dbname: str = "postgres") -> list[tuple]:
        """Runs `statements` in one autocommit session; returns the last one's rows."""
        rows: list[tuple] = []
        conninfo = self.conninfo.replace("dbname=postgres", f"dbname={dbname}")
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for statement in statements:
                cursor = conn.execute(statement)
                rows = cursor.fetchall() if cursor.description else []
        return rows

    def wait_until_serving(self, timeout_s: float) -> None:
        """Waits until the broker answers ApiVersions (answered before any authentication)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if kafka_wire.broker_answers(self.bootstrap, timeout_s=1):
                return
            time.sleep(0.1)
        raise AssertionError(f"no broker on {self.bootstrap} within {timeout_s:.0f}s\n{self.log_tail()}")

    def start(self) -> None:
        cmd = ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-l", str(self.log),
               "-w", "-t", "60", "start"]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        assert result.returncode == 0, (
            f"pg_ctl start exited {result.returncode}: {result.stdout}{result.stderr}\n{self.log_tail()}"
        )

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no server log)"

    def reload(self, **settings: object) -> None:
        """ALTER SYSTEM SET each kafgres setting, reload, and wait for the worker's line for each."""
        offset = len(self.log_text())
        statements = [f"ALTER SYSTEM SET kafgres.{name} = '{value}'" for name, value in settings.items()]
        self.sql(*statements, "SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        for name, value in settings.items():
            line = f"kafgres: kafgres.{name} is now {value}"
            while line not in self.log_text()[offset:]:
                assert time.monotonic() < deadline, f"no {line!r} in the server log:\n{self.log_tail()}"
                time.sleep(0.05)

    def stop(self, mode: str) -> None:
        """pg_ctl stop -m `mode`, not checked (destroy's caller looks at what is left)."""
        if self.pgdata.exists():
            subprocess.run(
                ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata),
                 "-m", mode, "-w", "-t", "30", "stop"],
                capture_output=True, timeout=60,
            )

    def destroy(self) -> None:
        self.stop("fast")
        self.stop("immediate")
        pid = self.postmaster_pid()
        if pid is not None:  # still up: kill what is left of it
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.home, ignore_errors=True)


# --------------------------------------------------------------------------
# Java tests: tools on PATH and Maven builds of the projects under tests/


def need_tool(tool: str, what: str) -> str:
    """The path of `tool`, or the test fails saying it needs `what` (Java 17+ and Maven on Debian)."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"`{tool}` not found on PATH: {what}. On Debian: apt-get install openjdk-17-jdk-headless maven",
                    pytrace=False)
    return path


# What Maven says when an offline build lacks something in ~/.m2 (then it runs online).
MAVEN_OFFLINE_MISS = re.compile(r"offline mode|could not be resolved|could not resolve|cannot access", re.IGNORECASE)


def _maven_build_is_current(project: Path, stamp: Path, outputs: list[Path], classpath_file: Path) -> bool:
    if not (stamp.is_file() and classpath_file.is_file() and all(o.is_file() for o in outputs)):
        return False
    built = stamp.stat().st_mtime
    sources = [project / "pom.xml", *(p for p in (project / "src").rglob("*") if p.is_file())]
    if any(p.stat().st_mtime > built for p in sources):
        return False
    # ~/.m2 may have been cleaned since: every classpath entry must still be there.
    return all(Path(p).is_file() for p in classpath_file.read_text().strip().split(os.pathsep) if p)


def ensure_maven_build(project: Path, maven_args: list[str], stamp: Path, outputs: list[Path], classpath_file: Path,
                       timeout_s: float) -> None:
    """`mvn package` of the Maven project `project` (with `maven_args`), offline first and online if ~/.m2
    lacks something, unless the build stamped `stamp` after the last change of its pom and src/, its
    `outputs` exist and every jar of its `classpath_file` is still there. The test fails if it cannot."""
    if _maven_build_is_current(project, stamp, outputs, classpath_file):
        return
    mvn = need_tool("mvn", f"building {project.name} needs Apache Maven")
    started = time.time()  # a source edited during the build makes the next session rebuild

    def run(offline: bool) -> subprocess.CompletedProcess:
        cmd = [mvn, "-q", "-B", *(["-o"] if offline else []), "-f", str(project / "pom.xml"), *maven_args, "package"]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=project)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s", pytrace=False)

    result = run(offline=True)
    if result.returncode != 0 and MAVEN_OFFLINE_MISS.search(result.stdout + result.stderr):
        result = run(offline=False)  # ~/.m2 lacks something: fetch it from Maven Central
    if result.returncode != 0:
        pytest.fail(f"building {project} failed (exit {result.returncode}):\n"
                    f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}", pytrace=False)
    stamp.write_text(f"{project.name} built from sources as of {time.ctime(started)}\n")
    os.utime(stamp, (started, started))


def isolated_reader(bootstrap: str, isolation: str) -> Consumer:
    """A consumer for assign() at `isolation` (read_committed or read_uncommitted) that reports each
    partition's end (enable.partition.eof) and never commits; its group is never joined."""
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"kafgres-e2e-unused-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "isolation.level": isolation,
    })
