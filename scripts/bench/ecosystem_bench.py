"""MirrorMaker 2 replication and a Kafka Connect source, with Kafgres and with Apache Kafka on the same
machine, in one run (issue 25's figures).

    .kafgres/venv/bin/python scripts/bench/ecosystem_bench.py [--records 1000000] [--rounds 2]

Needs the `./kafgres start` cluster, Kafka's jars (.kafgres/bench/kafka-lib, as `./kafgres bench`
prepares them) and the classpaths the e2e tests resolve (.kafgres/mirrormaker/classpath.txt from
tests/mirrormaker/pom.xml, .kafgres/connect/classpath.txt from tests/connect/pom.xml: run
tests/e2e/test_mirrormaker.py and test_connect.py once). Starts two Kafka 4.x brokers (KRaft, one
node each, their defaults) on 127.0.0.1:29092 and 29192.

- MirrorMaker 2: RECORDS records of 100 B in a 3-partition topic on the source, then a dedicated
  MirrorMaker (IdentityReplicationPolicy) copies them to the target: Kafgres -> Kafka and
  Kafka -> Kafka. The rate runs from the first record seen on the target to the last, so that
  MirrorMaker's start-up and topic discovery are not counted.
- Connect source: a standalone worker runs FileStreamSource over a file of RECORDS lines of 100 B
  into a 3-partition topic on Kafgres and on Kafka, timed the same way.

Kafgres runs its flush policy (fsync by default), Kafka its page cache. Prints one line per run and
the medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apache_kafka import KafkaBroker, _die_with_parent, terminate  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
VALUE_BYTES = 100
RUN_TIMEOUT_S = 600
MM_CLASSPATH = ROOT / ".kafgres/mirrormaker/classpath.txt"
CONNECT_CLASSPATH = ROOT / ".kafgres/connect/classpath.txt"


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(60)


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "acks": "all"})
    value = b"x" * VALUE_BYTES
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300) != 0:
        raise RuntimeError(f"records left unsent to {topic} on {bootstrap}")


def count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ecosystem-bench-count"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))
    except Exception:  # noqa: BLE001  (the topic may not exist yet)
        return 0
    finally:
        consumer.close()


def time_arrival(process: subprocess.Popen, bootstrap: str, topic: str, records: int, log: Path) -> float:
    """Seconds from the first record seen in `topic` to the last of `records`."""
    first = None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the JVM exited with {process.returncode}; see {log}")
        n = count(bootstrap, topic)
        now = time.monotonic()
        if n > 0 and first is None:
            first = now
        if n >= records and first is not None:
            return max(now - first, 1e-3)
        time.sleep(0.2)
    raise RuntimeError(f"{topic} on {bootstrap} did not reach {records} records within {RUN_TIMEOUT_S} s; see {log}")


def java(classpath: Path, main: str, *args: str, log: Path) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen(["java", "-Xmx1g", "-cp", classpath.read_text().strip(), main, *args], stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)


def mirror(source: str, target: str, records: int, work: Path) -> float:
    topic = f"eco-mm-{uuid.uuid4().hex[:8]}"
    create_topic(source, topic)
    fill(source, topic, records)
    prefix = f"eco-mm-{uuid.uuid4().hex[:8]}"
    properties = work / f"{prefix}.properties"
    properties.write_text("\n".join([
        "clusters = src, dst",
        f"src.bootstrap.servers = {source}",
        f"dst.bootstrap.servers = {target}",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "src->dst.enabled = true",
        f"src->dst.topics = {topic}",
        "dst->src.enabled = false",
        "src->dst.emit.heartbeats.enabled = false",
        "src->dst.emit.checkpoints.enabled = false",
        "src->dst.sync.group.offsets.enabled = false",
        "refresh.topics.interval.seconds = 1",
        f"config.storage.topic = {prefix}-configs",
        f"offset.storage.topic = {prefix}-offsets",
        f"status.storage.topic = {prefix}-status",
        *(f"{k} = 1" for k in ("replication.factor", "checkpoints.topic.replication.factor",
                               "heartbeats.topic.replication.factor", "offset-syncs.topic.replication.factor",
                               "config.storage.replication.factor", "offset.storage.replication.factor",
                               "status.storage.replication.factor")),
        "",
    ]))
    log = work / f"{prefix}.log"
    process = java(MM_CLASSPATH, "org.apache.kafka.connect.mirror.MirrorMaker", str(properties), log=log)
    try:
        return time_arrival(process, target, topic, records, log)
    finally:
        terminate(process, 30)


def connect_source(target: str, records: int, work: Path) -> float:
    topic = f"eco-src-{uuid.uuid4().hex[:8]}"
    create_topic(target, topic)
    lines = work / f"{topic}.txt"
    with open(lines, "w") as f:
        line = "x" * (VALUE_BYTES - 1)
        for _ in range(records):
            f.write(line + "\n")
    worker = work / f"{topic}-worker.properties"
    worker.write_text("\n".join([
        f"bootstrap.servers = {target}",
        "key.converter = org.apache.kafka.connect.storage.StringConverter",
        "value.converter = org.apache.kafka.connect.storage.StringConverter",
        f"offset.storage.file.filename = {work / (topic + '.offsets')}",
        "offset.flush.interval.ms = 1000",
        "listeners = http://127.0.0.1:18585",
        "",
    ]))
    connector = work / f"{topic}-connector.properties"
    connector.write_text("\n".join([
        f"name = {topic}",
        "connector.class = org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max = 1",
        f"file = {lines}",
        f"topic = {topic}",
        "batch.size = 10000",
        "",
    ]))
    log = work / f"{topic}.log"
    process = java(CONNECT_CLASSPATH, "org.apache.kafka.connect.cli.ConnectStandalone", str(worker), str(connector),
                   log=log)
    try:
        return time_arrival(process, target, topic, records, log)
    finally:
        terminate(process, 30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for path in (MM_CLASSPATH, CONNECT_CLASSPATH):
        if not path.is_file():
            print(f"no {path}: run the e2e tests test_mirrormaker.py and test_connect.py once", file=sys.stderr)
            return 2
    state = ROOT / ".kafgres/bench/ecosystem"
    state.mkdir(parents=True, exist_ok=True)
    kafgres = KafgresCluster(ROOT).bootstrap
    kafka_a = KafkaBroker(ROOT, state / "kafka-a", 29092, 29093, die_with_parent=True)
    kafka_b = KafkaBroker(ROOT, state / "kafka-b", 29192, 29193, die_with_parent=True)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(dir=state) as tmp:
        work = Path(tmp)
        try:
            kafka_a.start()
            kafka_b.start()
            runs = [
                ("MirrorMaker 2, Kafgres -> Kafka", lambda: mirror(kafgres, kafka_b.bootstrap, args.records, work)),
                ("MirrorMaker 2, Kafka -> Kafka", lambda: mirror(kafka_a.bootstrap, kafka_b.bootstrap, args.records,
                                                                 work)),
                ("Connect FileStreamSource -> Kafgres", lambda: connect_source(kafgres, args.records, work)),
                ("Connect FileStreamSource -> Kafka", lambda: connect_source(kafka_a.bootstrap, args.records, work)),
            ]
            for round_index in range(args.rounds):
                for name, run in runs:
                    seconds = run()
                    rate = args.records / seconds
                    results.setdefault(name, []).append(rate)
                    print(f"[ecosystem-bench] round {round_index + 1} {name}: {rate:,.0f} records/s "
                          f"({rate * VALUE_BYTES / 1e6:.1f} MB/s, {seconds:.2f} s)", flush=True)
        finally:
            kafka_a.stop()
            kafka_b.stop()
    print()
    print("| workload | records/s | MB/s |")
    print("|---|---|---|")
    for name, rates in results.items():
        median = statistics.median(rates)
        print(f"| {name} | {median:,.0f} | {median * VALUE_BYTES / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
