"""`kafgres.share_consume`: a share group's queue (KIP-932) consumed from SQL, settled with the transaction.

- A SQL session joins a share group; records produced after it joined are acquired by a call and stay
  acquired until the transaction ends. ROLLBACK releases them: the next call gets them again with
  `delivery_count` 2. COMMIT accepts them: never delivered again, and the group's stored state
  (`kafgres.share_group_partitions`) reaches lag 0. A rollback to a savepoint releases only what was
  acquired after it.
- A SQL session and a Java KafkaShareConsumer (kafka-clients 4.4, tests/java's `share-worker`) in one
  group split a two-partition queue: every record goes to exactly one of them, and both get some.
- A SQL session that disconnects leaves its share groups: the other member gets its partition at once,
  not after the 45 s session timeout.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from support import produce_all
from test_java_client import JAVA_BIN, _tool_env, java_build  # noqa: F401 (java_build is a fixture)

DEADLINE_S = 60.0


def create_topic(conn, topic: str, partitions: int) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT kafgres.create_topic(%s, %s)", (topic, partitions))
    conn.commit()


def share_consume(conn, group: str, topic: str, max_records: int = 100, wait: str = "2 s") -> list[tuple]:
    """(partition, offset, value, delivery_count) of one call, in the connection's open transaction."""
    with conn.cursor() as cur:
        cur.execute(
            'SELECT partition, "offset", value, delivery_count FROM kafgres.share_consume_text(%s, %s, %s, %s::interval)',
            (group, topic, max_records, wait),
        )
        return cur.fetchall()


def acquire(conn, group: str, topic: str, count: int) -> list[tuple]:
    """Calls until `count` records are acquired in the open transaction (a call may return one partition's)."""
    got: list[tuple] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        got += share_consume(conn, group, topic, count - len(got))
    assert len(got) == count, f"acquired {len(got)} of {count}: {got}"
    return sorted(got)


def test_commit_accepts_rollback_releases(pg_connect, make_producer, topic_name):
    conn = pg_connect()
    topic, group = topic_name("q"), topic_name("g")
    create_topic(conn, topic, 2)
    # Joining starts the group at the log end (share.auto.offset.reset=latest).
    assert share_consume(conn, group, topic, wait="0") == []
    conn.commit()
    produce_all(make_producer(), [dict(topic=topic, partition=i % 2, value=f"job-{i}") for i in range(10)])
    values = {f"job-{i}" for i in range(10)}

    first = acquire(conn, group, topic, 10)
    assert {v for _, _, v, _ in first} == values and {d for *_, d in first} == {1}
    conn.rollback()

    again = acquire(conn, group, topic, 10)
    assert [(p, o, v) for p, o, v, _ in again] == [(p, o, v) for p, o, v, _ in first]
    assert {d for *_, d in again} == {2}, again
    conn.commit()
    assert share_consume(conn, group, topic, wait="0.5 s") == []
    conn.commit()

    # A savepoint rolled back releases what was acquired after it, and only that.
    produce_all(make_producer(), [dict(topic=topic, partition=0, value=f"late-{i}") for i in range(4)])
    with conn.cursor() as cur:
        cur.execute("SAVEPOINT s")
    assert len(acquire(conn, group, topic, 4)) == 4
    with conn.cursor() as cur:
        cur.execute("ROLLBACK TO SAVEPOINT s")
    conn.commit()
    late = acquire(conn, group, topic, 4)
    assert {(v, d) for _, _, v, d in late} == {(f"late-{i}", 2) for i in range(4)}
    conn.commit()

    # The accepted records are the group's stored state: no lag left once it is written.
    deadline = time.monotonic() + DEADLINE_S
    lag = None
    while time.monotonic() < deadline:
        with conn.cursor() as cur:
            cur.execute("SELECT coalesce(sum(lag), -1) FROM kafgres.share_group_partitions WHERE group_id = %s",
                        (group,))
            lag = cur.fetchone()[0]
        conn.commit()
        if lag == 0:
            break
        time.sleep(0.2)
    assert lag == 0, f"share group {group} still has lag {lag}"


def test_a_sql_session_and_a_java_share_consumer_split_a_queue(java_build, bootstrap, pg_connect, make_producer,  # noqa: F811
                                                              topic_name):
    conn = pg_connect()
    topic = topic_name("split")
    group = f"{topic}-group"  # the Java scenario's group name
    create_topic(conn, topic, 2)
    # The SQL session joins first and is assigned both partitions; the Java consumer joins next and the
    # simple assignor gives each member one. The SQL session learns its share at its next call's
    # heartbeat; the Java consumer has only ever known its own, so neither fetches the other's partition.
    assert share_consume(conn, group, topic, wait="0") == []
    conn.commit()
    worker = subprocess.Popen(
        [str(JAVA_BIN / "kafka-run-class"), "kafgres.probe.KafgresProbe", "share-worker", bootstrap, topic],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_tool_env())
    java_lines: list[str] = []
    joined = threading.Event()

    def read_worker() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            java_lines.append(line.rstrip("\n"))
            if line.startswith("joined"):
                joined.set()

    reader = threading.Thread(target=read_worker, daemon=True)
    reader.start()
    try:
        assert joined.wait(DEADLINE_S), f"the Java share consumer did not join: {java_lines}"
        assert share_consume(conn, group, topic, wait="0") == []
        conn.commit()
        total = 200
        produce_all(make_producer(), [dict(topic=topic, partition=i % 2, value=f"m-{i}") for i in range(total)])
        sql_values: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 5:
            rows = share_consume(conn, group, topic, 50, wait="0.5 s")
            conn.commit()
            if rows:
                quiet_since = time.monotonic()
                sql_values += [v for _, _, v, _ in rows]
        worker.wait(timeout=DEADLINE_S + 30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        reader.join(timeout=5)
    stderr = worker.stderr.read() if worker.stderr else ""
    assert worker.returncode == 0, f"share-worker exited {worker.returncode}\n{java_lines}\n{stderr}"
    assert java_lines[-1] == "done", java_lines
    java_values = [line.removeprefix("got ") for line in java_lines if line.startswith("got ")]
    assert sql_values and java_values, f"SQL got {len(sql_values)}, Java {len(java_values)}: both must get some"
    every = sorted(sql_values + java_values, key=lambda v: int(v.split("-")[1]))
    assert every == [f"m-{i}" for i in range(total)], (
        f"each record once: SQL {len(sql_values)}, Java {len(java_values)}, "
        f"twice: {sorted(set(sql_values) & set(java_values))[:10]}")


def consume_until(conn, group: str, topic: str, count: int, within_s: float) -> list[tuple]:
    """Calls (committing each) until `count` records came or `within_s` passed."""
    got: list[tuple] = []
    deadline = time.monotonic() + within_s
    while len(got) < count and time.monotonic() < deadline:
        got += share_consume(conn, group, topic, count - len(got), wait="0.5 s")
        conn.commit()
    return got


def test_a_disconnecting_session_leaves_the_group_at_once(pg_connect, make_producer, topic_name):
    topic, group = topic_name("leave"), topic_name("g")
    a, b = pg_connect(), pg_connect()
    create_topic(a, topic, 2)
    for conn in (a, b, a):  # a joins with both partitions; b joins; a learns it keeps one
        assert share_consume(conn, group, topic, wait="0") == []
        conn.commit()
    produce_all(make_producer(), [dict(topic=topic, partition=i % 2, value=f"before-{i}") for i in range(10)])
    b_got = consume_until(b, group, topic, 5, 15)
    a_got = consume_until(a, group, topic, 5, 15)
    assert len({p for p, *_ in b_got}) == 1 and len(b_got) == 5, f"b: {b_got}"
    assert {p for p, *_ in a_got} == {1 - b_got[0][0]} and len(a_got) == 5, f"a: {a_got}"

    a.close()  # the backend exits and leaves the group
    produce_all(make_producer(), [dict(topic=topic, partition=i % 2, value=f"after-{i}") for i in range(10)])
    # Well inside the 45 s session timeout that would otherwise fence a.
    after = consume_until(b, group, topic, 10, 20)
    assert sorted(v for _, _, v, _ in after) == sorted(f"after-{i}" for i in range(10)), (
        f"b got {len(after)} of 10 after a left: {after}")


def test_bad_arguments_are_sql_errors(pg_connect, topic_name):
    import psycopg

    conn = pg_connect(autocommit=True)
    with pytest.raises(psycopg.errors.UndefinedObject, match="does not exist"):
        share_consume(conn, "g", topic_name("missing"))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="group id"):
        share_consume(conn, "", topic_name("missing"))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_records"):
        share_consume(conn, "g", topic_name("missing"), max_records=0)
