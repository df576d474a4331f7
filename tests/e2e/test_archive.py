"""Topic data in backups: `kafgres.archive_command` and a restore from a base
backup plus the archive (docs/operations.md, "Backups and archiving").

A throwaway cluster of its own (Postgres on 127.0.0.1:5480, Kafka on
127.0.0.1:9480) with 1 MiB segments and an archive command that copies each
closed segment file into a directory of the server's timeline (`%t`). A `pg_basebackup` is taken once the
topic exists; records are produced after it, rolling several segments, and
archived. Then the data directory is lost (the server killed, the directory
removed), the base backup is put back, the archived segments are copied into
its log directory, and the server starts: every record of every archived
segment is served again, the same values in the same order. The
`kafgres.archive_status` view reports what was archived, with no backlog.

Every wait has a deadline; the cluster and its directories are removed at
the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support import PG_BIN, ThrowawayCluster, as_postgres, port_is_free, produce_all

PG_PORT = 5480
KAFKA_PORT = 9480
TOPIC = "archived-orders"
RECORDS_PER_PARTITION = 3000
VALUE_BYTES = 1024


class Cluster(ThrowawayCluster):
    def __init__(self) -> None:
        super().__init__("archive", PG_PORT, KAFKA_PORT)
        self.archive = self.home / "archive"
        self.backup = self.home / "base"

    @property
    def log_dir(self) -> Path:
        return self.pgdata / "kafgres"


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it runs initdb and pg_ctl as postgres)")
    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is an archive-test cluster from an earlier run still up?"
    c = Cluster()
    try:
        c.archive.mkdir()
        shutil.chown(c.archive, "postgres", "postgres")
        command = f'd={c.archive}/%t/%f; mkdir -p "${{d%/*}}" && cp %p "$d"'
        c.init({"kafgres.segment_bytes": str(1 << 20), "kafgres.archive_command": f"'{command}'"})
        c.start()
        c.sql("CREATE EXTENSION kafgres")
        c.wait_until_serving(60)
        yield c
    finally:
        c.destroy()


def value(partition: int, i: int) -> bytes:
    return f"p{partition}-{i:06d}-".encode().ljust(VALUE_BYTES, b"x")


def archived_until(cluster: Cluster, partition: int) -> int:
    """The base offset of the first segment not archived: every record below it is in the archive."""
    checkpoint = cluster.log_dir / f"{TOPIC}-{partition}" / "archived-offset-checkpoint"
    return int(checkpoint.read_text().split()[0])  # `<offset> <timeline>`


def read_partition(bootstrap: str, partition: int, count: int, timeout_s: float = 60.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "archive-check", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20})
    try:
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_a_base_backup_and_the_archive_bring_back_every_archived_record(cluster: Cluster):
    cluster.sql(f"SELECT kafgres.create_topic('{TOPIC}', 2, '{{\"retention.ms\": \"-1\"}}'::jsonb)")
    as_postgres(str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres",
                "-D", str(cluster.backup), "-X", "stream", "--checkpoint=fast", timeout_s=120)

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    produce_all(producer, [dict(topic=TOPIC, partition=p, value=value(p, i))
                           for p in (0, 1) for i in range(RECORDS_PER_PARTITION)], timeout_s=120)
    del producer  # before the server goes away, so that it does not log connection failures

    deadline = time.monotonic() + 60
    while True:
        (backlog, segments, failures) = cluster.sql(
            "SELECT backlog_segments, segments_archived, failures FROM kafgres.archive_status")[0]
        if (backlog == 0 and segments >= 4) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert backlog == 0 and segments >= 4, f"archive_status: backlog {backlog}, {segments} segments archived"
    assert failures == 0
    expected = {p: archived_until(cluster, p) for p in (0, 1)}
    assert all(0 < n < RECORDS_PER_PARTITION for n in expected.values()), expected
    # %t: the files are under the directory of the timeline the server writes WAL on.
    (timeline,) = cluster.sql("SELECT timeline_id FROM pg_control_checkpoint()")[0]
    timeline_dir = cluster.archive / str(timeline)
    assert sorted(p.name for p in cluster.archive.iterdir()) == [str(timeline)]
    archived_logs = sorted(p.relative_to(timeline_dir).as_posix() for p in timeline_dir.rglob("*.log"))
    assert len(archived_logs) == segments, archived_logs

    # The data directory is lost.
    cluster.stop("immediate")
    shutil.rmtree(cluster.pgdata)
    # Restore: the base backup, then the archived segments into its log directory.
    shutil.copytree(cluster.backup, cluster.pgdata, symlinks=True)
    for path in timeline_dir.rglob("*"):
        if path.is_file():
            target = cluster.log_dir / path.relative_to(timeline_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    subprocess.run(["chown", "-R", "postgres:postgres", str(cluster.pgdata)], check=True, timeout=60)
    os.chmod(cluster.pgdata, 0o700)
    cluster.start()
    cluster.wait_until_serving(60)

    for p in (0, 1):
        values = read_partition(cluster.bootstrap, p, expected[p])
        assert len(values) == expected[p], f"partition {p}: {len(values)} of {expected[p]} archived records served"
        assert values == [value(p, i) for i in range(expected[p])], f"partition {p} served other records"
