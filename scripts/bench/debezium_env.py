#!/usr/bin/env python3
"""Debezium's PostgreSQL connector in a Kafka Connect worker, the other side of
scripts/bench/cdc_bench.py: `debezium_capture(table, columns_ddl, workdir)`
owns, for the length of a `with` block, everything that side needs, all on
127.0.0.1, and nothing else:

- a throwaway Postgres 15 cluster on port 5470 (initdb as `postgres` under
  `workdir/postgres`, the postmaster started directly rather than by pg_ctl
  so that it can die with this process; `wal_level = logical`, `max_wal_senders = 4`,
  `max_replication_slots = 4`, `synchronous_commit = on`, `fsync = on`; no
  kafgres extension), holding `public.<table>` and `public.debezium_probe`;
- Apache Kafka 4.1.1 on port 19470 (controller 19471), apache_kafka.py's
  KafkaBroker, data and logs under `workdir/kafka`;
- a Kafka Connect 4.1.1 standalone worker (ConnectStandalone, 1 GiB heap,
  REST on 127.0.0.1:18470, files under `workdir/connect`) running
  `io.debezium.connector.postgresql.PostgresConnector` 3.6.1.Final, named
  `debezium-bench`, over pgoutput, slot `debezium_bench`, publication
  `dbz_publication` (created for the two tables), topic prefix `bench`.

The jars come from Maven Central: scripts/bench/pom.xml for the broker
(.kafgres/bench/kafka-lib/classpath.txt) and scripts/bench/debezium-pom.xml
for Connect and the connector (.kafgres/bench/debezium-lib/classpath.txt),
each resolved once and again only when its pom is newer than its classpath.

The connector's settings are Debezium's and Connect's defaults except what
the brief fixes: JsonConverter without schemas for keys and values (so a
record's value is the bare Debezium envelope, as Kafgres writes it),
`snapshot.mode=no_data` (no initial snapshot: changes from the slot's
creation on), `decimal.handling.mode=string`, `publication.autocreate.mode
=filtered`, `offset.flush.interval.ms=1000`. Nothing is tuned for speed. The
defaults that bear on latency and on what a consumer sees:

- `poll.interval.ms` = 500: when the connector's queue is empty the task waits
  this long before looking again, so a change arriving at an idle connector
  can wait up to about half a second before Connect gets it;
  `max.batch.size` = 2048 and `max.queue.size` = 8192 bound a batch and the
  backlog between the replication stream and Connect;
- the worker's producer: `linger.ms` = 5 (the Kafka 4.x client default),
  `acks=all`, and Connect's own `max.in.flight.requests.per.connection=1`
  for source tasks;
- pgoutput sends a transaction only once it has committed, so every change
  waits for its COMMIT (no streaming of transactions in progress);
- `offset.flush.interval.ms` (1 s here) and `status.update.interval.ms`
  (10 s) govern when the slot's confirmed LSN moves (WAL retention), not
  latency;
- `tombstones.on.delete=true`: a DELETE gives a `d` envelope and then a
  record with a null value; with the default REPLICA IDENTITY, `before` of an
  update is null and `before` of a delete holds only the key columns.

Before yielding, it waits (bounded) until the connector and its task are
RUNNING over REST and a change really streams: it inserts a row into
`public.debezium_probe` (also captured, topic `bench.public.debezium_probe`)
until one reaches Kafka, so the benchmarked table's topic
`bench.public.<table>` holds only the caller's changes, and the slot exists
before the caller writes anything.

On leaving the block, whatever happened: Connect is stopped (SIGTERM, then
SIGKILL after 30 s), then Kafka (KafkaBroker.stop), then Postgres (pg_ctl
stop -m fast, as ThrowawayCluster.destroy does), and the three directories it
made under `workdir` are removed. When the block ends by an exception, the
logs are kept (`workdir/connect/server.log`, `workdir/kafka/server.log`,
`workdir/postgres.log`) and only the data goes. If the Python process dies,
even by SIGKILL, the kernel stops the rest (PR_SET_PDEATHSIG): SIGTERM to
Connect and Kafka, SIGINT (fast shutdown) to the postmaster; their files then
stay under `workdir` until the next run replaces them.

Self-check: `.kafgres/venv/bin/python scripts/bench/debezium_env.py [WORKDIR]`
(WORKDIR defaults to a temporary directory under /tmp) brings it all up for `t(id bigint primary key, v text)`, inserts 1000 rows in
10 transactions, reads their 1000 change records and prints the first.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parents[1]
# apache_kafka.py beside this file; tests/e2e for ThrowawayCluster (and the kafka_wire it imports).
for _path in (BENCH_DIR, ROOT / "tests/e2e"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import psycopg  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition  # noqa: E402

from apache_kafka import (  # noqa: E402
    JVM_FLAGS,
    PR_SET_PDEATHSIG,
    STOP_TIMEOUT_S,
    KafkaBroker,
    _die_with_parent,
    port_open,
    terminate,
)
from support import PG_BIN, ThrowawayCluster, as_postgres  # noqa: E402

log = logging.getLogger("debezium_env")

PG_PORT = 5470
KAFKA_PORT = 19470
CONTROLLER_PORT = 19471
REST_PORT = 18470
CONNECTOR = "debezium-bench"
TOPIC_PREFIX = "bench"
SLOT = "debezium_bench"
PROBE_TABLE = "debezium_probe"
PG_CONNINFO = f"host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres"

MVN_TIMEOUT_S = 600
PG_READY_TIMEOUT_S = 60
CONNECT_READY_TIMEOUT_S = 120
STREAMING_TIMEOUT_S = 120
PROBE_EVERY_S = 5.0
LOG_TAIL_LINES = 40

KAFKA_POM = BENCH_DIR / "pom.xml"
KAFKA_CLASSPATH = ROOT / ".kafgres/bench/kafka-lib/classpath.txt"
DEBEZIUM_POM = BENCH_DIR / "debezium-pom.xml"
DEBEZIUM_CLASSPATH = ROOT / ".kafgres/bench/debezium-lib/classpath.txt"
LOG4J2_CONFIG = BENCH_DIR / "kafka-log4j2.properties"  # INFO to ${kafka.logs.dir}/server.log

IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass
class CaptureTarget:
    name: str  # "debezium"
    pg_conninfo: str  # libpq conninfo of the Postgres that holds the captured table
    bootstrap: str  # Kafka bootstrap servers holding the change topic
    topic: str  # the change topic of the table


def topic_of(table: str) -> str:
    """Debezium's topic for public.<table>: <topic.prefix>.<schema>.<table>."""
    return f"{TOPIC_PREFIX}.public.{table}"


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return f"--- last {lines} lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])


def resolve_classpath(pom: Path, classpath: Path) -> str:
    """`mvn dependency:build-classpath` of `pom` into `classpath`, unless that is there and newer than the pom.

    Tries Maven Central first and, if that fails, Maven's offline mode (the jars already in ~/.m2)."""
    if classpath.is_file() and classpath.stat().st_size > 0 and classpath.stat().st_mtime >= pom.stat().st_mtime:
        return classpath.read_text().strip()
    failures = []
    for offline in ([], ["-o"]):
        command = ["mvn", "-B", "-q", *offline, "-f", str(pom), "dependency:build-classpath"]
        log.info("resolving %s: %s", pom.name, " ".join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            failures.append(f"{' '.join(command)}: no result within {MVN_TIMEOUT_S} s")
            continue
        if done.returncode == 0 and classpath.is_file():
            return classpath.read_text().strip()
        failures.append(f"{' '.join(command)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    raise RuntimeError(f"could not resolve the classpath of {pom}:\n" + "\n".join(failures))


class LogicalCluster(ThrowawayCluster):
    """ThrowawayCluster's pg_ctl stop/destroy, sql and log helpers for a plain Postgres 15 (no kafgres)
    with logical WAL, living in `home` instead of a fresh directory under /tmp, its postmaster a child
    of this process."""

    def __init__(self, home: Path, port: int) -> None:
        super().__init__("debezium", port, 0, home=home)
        self.postmaster: subprocess.Popen | None = None

    def init(self, settings: dict[str, str], kafgres: bool = False) -> None:
        """initdb (trust over TCP, replication included), then postgresql.conf with the port and `settings`."""
        super().init(settings, kafgres=False)

    def start(self) -> None:
        """The postmaster as a child of this process (not pg_ctl's daemon), so that it gets SIGINT, a fast
        shutdown, if this process dies; then waits until it takes connections."""
        with open(self.log, "w") as log_file:
            self.postmaster = subprocess.Popen(
                [str(PG_BIN / "postgres"), "-D", str(self.pgdata)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                user="postgres", group="postgres", extra_groups=[],  # before preexec_fn, which must come last
                preexec_fn=_fast_shutdown_with_parent,
            )
        deadline = time.monotonic() + PG_READY_TIMEOUT_S
        while True:
            if self.postmaster.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.postmaster.returncode}\n{tail(self.log)}")
            try:
                self.sql("SELECT 1")
                return
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Postgres took no connection on {self.pg_port} within "
                                       f"{PG_READY_TIMEOUT_S} s: {error}\n{tail(self.log)}") from error
            time.sleep(0.2)

    def destroy(self) -> None:
        """ThrowawayCluster.destroy (pg_ctl stop -m fast, then harder, then rm -r home), and reaps the postmaster."""
        super().destroy()
        if self.postmaster is not None:
            try:
                self.postmaster.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.postmaster.kill()
                self.postmaster.wait(timeout=10)


def _fast_shutdown_with_parent() -> None:
    """In the postmaster, before exec (and after the switch to user postgres, which would clear it):
    SIGINT, Postgres's fast shutdown, when the parent process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _let_postgres_in(workdir: Path) -> None:
    """The postgres user must reach `workdir` (a TemporaryDirectory is 0700): add search (x) for others."""
    if os.stat(workdir).st_uid == os.getuid():
        os.chmod(workdir, os.stat(workdir).st_mode | 0o011)
    check = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(workdir)], timeout=30)
    if check.returncode != 0:
        raise RuntimeError(f"user postgres cannot enter {workdir}: give every directory on its path search (x) "
                           "permission for others, or pick a workdir elsewhere (e.g. under /tmp)")


def _properties(values: dict[str, str]) -> str:
    """A Java .properties file (backslashes escaped; nothing here needs more)."""
    return "".join(f"{key}={value.replace(chr(92), chr(92) * 2)}\n" for key, value in values.items())


class ConnectWorker:
    """A Kafka Connect standalone worker with one connector, its files (properties, offsets, log) in `home`."""

    def __init__(self, home: Path, classpath: str, bootstrap: str, rest_port: int, connector: dict[str, str]) -> None:
        self.home = home
        self.classpath = classpath
        self.bootstrap = bootstrap
        self.rest_port = rest_port
        self.connector = connector
        self.name = connector["name"]
        self.log = home / "server.log"
        self.stdout_log = home / "stdout.log"
        self.process: subprocess.Popen | None = None

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def worker_properties(self) -> dict[str, str]:
        converter = "org.apache.kafka.connect.json.JsonConverter"
        return {
            "bootstrap.servers": self.bootstrap,
            "key.converter": converter,
            "key.converter.schemas.enable": "false",
            "value.converter": converter,
            "value.converter.schemas.enable": "false",
            "offset.storage.file.filename": str(self.home / "offsets"),
            "offset.flush.interval.ms": "1000",
            "listeners": self.rest,
        }

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        worker = self.home / "worker.properties"
        worker.write_text("# scripts/bench/debezium_env.py: the Connect worker\n" + _properties(self.worker_properties()))
        connector = self.home / "connector.properties"
        connector.write_text("# scripts/bench/debezium_env.py: the Debezium connector\n" + _properties(self.connector))
        command = [
            "java",
            *JVM_FLAGS,  # -Xms1G -Xmx1G and kafka-run-class.sh's flags
            f"-Dkafka.logs.dir={self.home}",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            "-cp",
            self.classpath,
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(worker),
            str(connector),
        ]
        with open(self.stdout_log, "w") as stdout:
            self.process = subprocess.Popen(
                command, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )

    def logs(self) -> str:
        return f"{tail(self.log)}\n{tail(self.stdout_log, 10)}"

    def status(self) -> dict | None:
        """GET /connectors/<name>/status, or None while the REST server or the connector isn't there yet."""
        try:
            with urllib.request.urlopen(f"{self.rest}/connectors/{self.name}/status", timeout=2) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def wait_running(self, timeout_s: float) -> None:
        """Until the connector and every one of its tasks (at least one) report RUNNING."""
        deadline = time.monotonic() + timeout_s
        status: dict | None = None
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the Connect worker exited with {self.process.returncode}\n{self.logs()}")
            status = self.status()
            if status is not None:
                states = [status["connector"]["state"], *(task["state"] for task in status.get("tasks", []))]
                if "FAILED" in states:
                    traces = [status["connector"].get("trace", "")] + [t.get("trace", "") for t in status["tasks"]]
                    raise RuntimeError(f"connector {self.name} FAILED: {json.dumps(status)[:500]}\n"
                                       + "\n".join(t for t in traces if t)[:4000])
                if status.get("tasks") and all(state == "RUNNING" for state in states):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"connector {self.name} not RUNNING within {timeout_s:.0f} s "
                                   f"(last status: {json.dumps(status)})\n{self.logs()}")
            time.sleep(0.5)

    def stop(self) -> None:
        if terminate(self.process):
            log.warning("Connect did not stop within %s s of SIGTERM; it was killed", STOP_TIMEOUT_S)


def assign_from_beginning(consumer: Consumer, topic: str, deadline: float) -> None:
    """Waits (until `deadline`, time.monotonic()) for `topic` to exist, then assigns all its partitions from offset 0."""
    last = "no metadata yet"
    while True:
        metadata = consumer.list_topics(topic, timeout=2).topics.get(topic)
        if metadata is not None and metadata.error is None and metadata.partitions:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(metadata.partitions)])
            return
        if metadata is not None and metadata.error is not None:
            last = str(metadata.error)
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} did not appear in time ({last})")
        time.sleep(0.2)


def new_consumer(bootstrap: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "debezium-env",  # assign() only: never joins or commits
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    })


def read_records(bootstrap: str, topic: str, count: int, timeout_s: float) -> list[Message]:
    """The first `count` records of `topic` (waiting for it to exist), within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    consumer = new_consumer(bootstrap)
    records: list[Message] = []
    try:
        assign_from_beginning(consumer, topic, deadline)
        while len(records) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(records)} of {count} records on {topic} within {timeout_s:.0f} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"consuming {topic}: {message.error()}")
            records.append(message)
    finally:
        consumer.close()
    return records


def wait_streaming(cluster: LogicalCluster, worker: ConnectWorker, bootstrap: str, timeout_s: float) -> int:
    """Inserts rows into public.debezium_probe (another one every PROBE_EVERY_S) until a change reaches its topic.

    Returns how many probe rows were inserted."""
    topic = topic_of(PROBE_TABLE)
    deadline = time.monotonic() + timeout_s
    consumer = new_consumer(bootstrap)
    probes = 0
    next_probe = 0.0
    assigned = False
    last_error = "none"
    try:
        while True:
            if worker.process is not None and worker.process.poll() is not None:
                raise RuntimeError(f"the Connect worker exited with {worker.process.returncode}\n{worker.logs()}")
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"no change of public.{PROBE_TABLE} on {topic} within {timeout_s:.0f} s of the "
                                   f"connector running ({probes} probe rows inserted; connector status: "
                                   f"{json.dumps(worker.status())}; last consumer error: {last_error})\n{worker.logs()}")
            if now >= next_probe:
                probes += 1
                cluster.sql(f"INSERT INTO public.{PROBE_TABLE} (id) VALUES ({probes})")
                next_probe = now + PROBE_EVERY_S
            if not assigned:
                try:
                    assign_from_beginning(consumer, topic, min(deadline, next_probe))
                    assigned = True
                except TimeoutError:
                    continue
            message = consumer.poll(0.5)
            if message is not None:
                if message.error() is None:
                    return probes
                last_error = str(message.error())
    finally:
        consumer.close()


def _check_ports_free() -> None:
    for port in (PG_PORT, KAFKA_PORT, CONTROLLER_PORT, REST_PORT):
        if port_open("127.0.0.1", port):
            raise RuntimeError(f"127.0.0.1:{port} is already in use; is another debezium_env running?")


def _clear(path: Path, keep_logs: bool) -> None:
    """Removes `path`, or, with keep_logs, everything in it but its *.log files."""
    if not path.exists():
        return
    if not keep_logs:
        shutil.rmtree(path, ignore_errors=True)
        return
    for child in path.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        elif child.suffix != ".log":
            child.unlink(missing_ok=True)


@contextmanager
def debezium_capture(table: str, columns_ddl: str, workdir: Path, before_table: tuple[str, ...] = (),
                     after_table: tuple[str, ...] = (),
                     connector_settings: dict[str, str] | None = None) -> Iterator[CaptureTarget]:
    """Postgres + Apache Kafka + Connect with Debezium capturing `public.<table>` (see the module docstring).

    `table` is a bare lowercase identifier (the schema is public); `columns_ddl` goes verbatim into
    `CREATE TABLE public.<table> (<columns_ddl>)`, made before the connector starts, after the statements
    of `before_table` (types the table needs) and before those of `after_table` (e.g. REPLICA IDENTITY
    FULL); `connector_settings` are added to the connector's. On entry the
    connector is streaming and `bench.public.<table>` is empty (it is created by the first change). Uses
    workdir/postgres, workdir/kafka and workdir/connect (left over ones are replaced) and removes them on
    exit; after an exception their logs stay.
    """
    if not IDENTIFIER.fullmatch(table) or table == PROBE_TABLE:
        raise ValueError(f"table must be a bare lowercase identifier other than {PROBE_TABLE!r}, not {table!r}")
    _check_ports_free()
    started = time.monotonic()
    resolve_classpath(KAFKA_POM, KAFKA_CLASSPATH)  # KafkaBroker reads the file itself
    connect_classpath = resolve_classpath(DEBEZIUM_POM, DEBEZIUM_CLASSPATH)
    log.info("classpaths ready after %.1f s", time.monotonic() - started)

    workdir.mkdir(parents=True, exist_ok=True)
    _let_postgres_in(workdir)
    pg_home, kafka_home, connect_home = workdir / "postgres", workdir / "kafka", workdir / "connect"
    for leftover in (pg_home, kafka_home, connect_home):
        shutil.rmtree(leftover, ignore_errors=True)
    (workdir / "postgres.log").unlink(missing_ok=True)  # kept by an earlier failed run

    failed = False
    with ExitStack() as teardown:  # unwinds in reverse: Connect, then Kafka, then Postgres

        def clear_postgres(cluster: LogicalCluster) -> None:
            if failed and cluster.log.exists():
                shutil.copy(cluster.log, workdir / "postgres.log")
            cluster.destroy()  # pg_ctl stop -m fast (then immediate, then SIGKILL), and removes pg_home

        def clear_kafka(broker: KafkaBroker) -> None:
            broker.stop()
            _clear(kafka_home, keep_logs=failed)

        def clear_connect(worker: ConnectWorker) -> None:
            worker.stop()
            _clear(connect_home, keep_logs=failed)

        try:
            pg_home.mkdir()
            cluster = LogicalCluster(pg_home, PG_PORT)
            teardown.callback(clear_postgres, cluster)
            cluster.init({
                "wal_level": "logical",
                "max_wal_senders": "4",
                "max_replication_slots": "4",
                "synchronous_commit": "on",
                "fsync": "on",
            })
            cluster.start()
            log.info("Postgres up on %s after %.1f s", PG_PORT, time.monotonic() - started)

            broker = KafkaBroker(ROOT, kafka_home, KAFKA_PORT, CONTROLLER_PORT, die_with_parent=True)
            teardown.callback(clear_kafka, broker)
            broker.start()
            log.info("Kafka %s up on %s after %.1f s", broker.version, broker.bootstrap, time.monotonic() - started)

            cluster.sql(
                *before_table,
                f"CREATE TABLE public.{table} ({columns_ddl})",
                *after_table,
                f"CREATE TABLE public.{PROBE_TABLE} (id int PRIMARY KEY)",
            )
            worker = ConnectWorker(connect_home, connect_classpath, broker.bootstrap, REST_PORT, {
                "name": CONNECTOR,
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "tasks.max": "1",
                "plugin.name": "pgoutput",
                "database.hostname": "127.0.0.1",
                "database.port": str(PG_PORT),
                "database.user": "postgres",
                "database.dbname": "postgres",
                "topic.prefix": TOPIC_PREFIX,
                "table.include.list": f"public.{table},public.{PROBE_TABLE}",
                "snapshot.mode": "no_data",
                "decimal.handling.mode": "string",
                "slot.name": SLOT,
                "publication.autocreate.mode": "filtered",
                **(connector_settings or {}),
            })
            teardown.callback(clear_connect, worker)
            worker.start()
            worker.wait_running(CONNECT_READY_TIMEOUT_S)
            log.info("connector RUNNING after %.1f s", time.monotonic() - started)
            probes = wait_streaming(cluster, worker, broker.bootstrap, STREAMING_TIMEOUT_S)
            log.info("streaming after %.1f s (%d probe row%s)", time.monotonic() - started, probes,
                     "" if probes == 1 else "s")
            yield CaptureTarget("debezium", PG_CONNINFO, broker.bootstrap, topic_of(table))
        except BaseException:
            failed = True
            log.error("debezium_capture failed; the logs stay under %s", workdir)
            raise


def self_check(workdir: Path) -> int:
    rows, transactions = 1000, 10
    started = time.monotonic()
    with debezium_capture("t", "id bigint PRIMARY KEY, v text", workdir) as target:
        up_s = time.monotonic() - started
        print(f"debezium environment up in {up_s:.1f} s", flush=True)
        with psycopg.connect(target.pg_conninfo, autocommit=True) as conn:
            per_tx = rows // transactions
            for tx in range(transactions):
                with conn.transaction():
                    with conn.cursor() as cursor:
                        cursor.executemany("INSERT INTO public.t (id, v) VALUES (%s, %s)",
                                           [(i, f"row {i}") for i in range(tx * per_tx + 1, (tx + 1) * per_tx + 1)])
        records = read_records(target.bootstrap, target.topic, rows, timeout_s=60)
        envelopes = [json.loads(record.value()) for record in records]
        ids = [envelope["after"]["id"] for envelope in envelopes]
        ops = {envelope["op"] for envelope in envelopes}
        if ids != list(range(1, rows + 1)) or ops != {"c"}:
            print(f"debezium FAILED: ids in order {ids == list(range(1, rows + 1))}, ops {sorted(ops)}")
            return 1
        print(f"debezium ok: {len(records)} records, first: key={records[0].key().decode()} "
              f"value={json.dumps(envelopes[0])}")
    print(f"torn down; total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    if len(sys.argv) > 1:
        sys.exit(self_check(Path(sys.argv[1])))
    with tempfile.TemporaryDirectory(prefix="kafgres-debezium-") as scratch:
        status = self_check(Path(scratch))
    sys.exit(status)
