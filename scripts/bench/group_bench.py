#!/usr/bin/env python3
"""Benchmarks of the consumer group coordinator against the running cluster (`./kafgres start`).

Measured with confluent-kafka (librdkafka) consumers, all in this one process
(one thread per consumer, so the clocks agree):

  group.commit     --commit-consumers members of one group (one partition each) each
                   loop poll(0) + a synchronous OffsetCommit of the next offset of their
                   partition for --seconds: commits/s over all of them, and the
                   latency of one commit (p50/p99/max). `formed_s` is how long the
                   group took to give every member its partition (from the last
                   subscribe; includes the initial rebalance delay).
  group.join       --members consumers subscribe one new group, one after the other:
                   seconds from the last subscribe() returning to every member
                   holding its partition (one partition each), per assignment
                   strategy. A new group's first rebalance waits
                   kafgres.group_initial_rebalance_delay_ms (3 s by default, as
                   Kafka's group.initial.rebalance.delay.ms) and, as in Kafka, one
                   more such window when members joined during the first, so a
                   burst of joins takes two windows: `beyond_delays_s` subtracts them.
  group.leave      then one member close()s (LeaveGroup): seconds from close() being
                   called to the others holding every partition again. The others
                   learn of the rebalance from their next heartbeat, so this is
                   bounded below by up to one heartbeat interval (500 ms here).

The strategy `consumer-protocol` runs the join and leave figures with KIP-848
members (group.protocol=consumer): no initial rebalance delay, but members learn
of a new target assignment at their next heartbeat, every
kafgres.group_consumer_heartbeat_interval_ms (5 s by default, as Kafka's
group.consumer.heartbeat.interval.ms).

Each figure prints one line of space-separated key=value pairs, starting with
`figure=`, e.g.

  figure=group.commit rate=2140.3 unit=commits/s consumers=100 count=21403 seconds=10.000 ...

The default run takes about 50 s (most of it waiting for initial rebalance delays).

Usage: scripts/bench/group_bench.py [--seconds 10] [--commit-consumers 100] [--members 10]
                                    [--rounds 2] [--strategies range cooperative-sticky]
                                    [--only group.commit ...]
Needs confluent-kafka (tests/requirements.txt; use .kafgres/venv/bin/python).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES = ["group.commit", "group.join", "group.leave"]
# Every wait is bounded: a group that does not form in this long fails the run.
SETTLE_TIMEOUT_S = 60.0
# The others learn of a rebalance from their next heartbeat's REBALANCE_IN_PROGRESS.
HEARTBEAT_INTERVAL_MS = 500
# The strategy name that stands for a KIP-848 group (group.protocol=consumer).
CONSUMER_PROTOCOL = "consumer-protocol"


def read_env(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    if not path.is_file():
        return env
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            env[key.strip()] = " ".join(shlex.split(value))
    return env


def emit(figure: str, **fields: object) -> None:
    parts = [f"figure={figure}"]
    for key, value in fields.items():
        parts.append(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}")
    print(" ".join(parts), flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


class Member:
    """One group consumer polled by its own thread; its callbacks keep the current assignment.

    `partitions` is what it holds now (eager: cleared on revoke; cooperative: shrunk), and
    `changed_at` the monotonic time of its last assignment change. While `work` is set, the
    thread runs it after each poll instead of polling with a timeout.
    """

    def __init__(self, config: dict[str, object], topic: str) -> None:
        self.consumer = Consumer(config)
        self.topic = topic
        self.partitions: set[int] = set()
        self.changed_at = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.work = None
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, _consumer, tps) -> None:
        with self.lock:
            self.partitions |= {tp.partition for tp in tps}
            self.changed_at = time.monotonic()

    def _on_revoke(self, _consumer, tps) -> None:
        with self.lock:
            self.partitions -= {tp.partition for tp in tps}
            self.changed_at = time.monotonic()

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.thread.start()

    def held(self) -> set[int]:
        with self.lock:
            return set(self.partitions)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                work = self.work
                msg = self.consumer.poll(0 if work else 0.02)
                if msg is not None and msg.error() is not None:
                    self.errors.append(str(msg.error()))
                if work:
                    work(self)
        finally:
            self.consumer.close()
            self.closed.set()

    def close(self, timeout_s: float = 30.0) -> None:
        self.stop.set()
        if not self.closed.wait(timeout_s):
            raise SystemExit(f"a consumer did not close within {timeout_s:.0f}s")


def wait_split(members: list[Member], partitions: int, timeout_s: float, what: str) -> float:
    """Waits until the members hold disjoint non-empty sets covering every partition; returns the
    monotonic time of the last assignment change that completed it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        held = [m.held() for m in members]
        if all(held) and sum(len(h) for h in held) == partitions and set().union(*held) == set(range(partitions)):
            return max(m.changed_at for m in members)
        time.sleep(0.002)
    raise SystemExit(f"{what}: no complete assignment within {timeout_s:.0f}s; held {[sorted(m.held()) for m in members]}, "
                     f"errors {[e for m in members for e in m.errors][-5:]}")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.env = read_env(Path(args.env))
        self.bootstrap = args.bootstrap or self.env.get("KAFGRES_BOOTSTRAP", "127.0.0.1:9092")
        self.args = args
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.topics: list[str] = []
        self.initial_delay_ms = self.read_setting_ms("kafgres.group_initial_rebalance_delay_ms")
        self.consumer_heartbeat_ms = self.read_setting_ms("kafgres.group_consumer_heartbeat_interval_ms")

    def read_setting_ms(self, name: str) -> int | None:
        """A kafgres setting in milliseconds through psql, or None if psql cannot tell."""
        env = {**os.environ, **self.env}
        try:
            out = subprocess.run(["psql", "-X", "-A", "-t", "-c", f"show {name}"],
                                 env=env, capture_output=True, text=True, timeout=10)
            return int(out.stdout.strip().removesuffix("ms")) if out.returncode == 0 else None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return None

    def topic(self, tag: str, partitions: int) -> str:
        name = f"group-bench-{tag}-{uuid.uuid4().hex[:8]}"
        self.admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
        self.topics.append(name)
        deadline = time.monotonic() + 30
        while len(self.admin.list_topics(name, timeout=10).topics[name].partitions) != partitions:
            if time.monotonic() > deadline:
                raise SystemExit(f"topic {name} not ready with {partitions} partitions")
            time.sleep(0.1)
        return name

    def close(self) -> None:
        if self.topics:
            for future in self.admin.delete_topics(self.topics, operation_timeout=30).values():
                try:
                    future.result(40)
                except KafkaException:
                    pass

    def member_config(self, group: str, strategy: str) -> dict[str, object]:
        if strategy == CONSUMER_PROTOCOL:
            # KIP-848: the broker assigns (its default assignor) and sets the
            # heartbeat interval; the client may not set either.
            return {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }

    def form_group(self, count: int, topic: str, strategy: str) -> tuple[list[Member], float]:
        """`count` members of a new group on `topic` (one partition each); returns them and the
        seconds from the last subscribe() to the complete assignment."""
        group = f"group-bench-{uuid.uuid4().hex[:8]}"
        members = [Member(self.member_config(group, strategy), topic) for _ in range(count)]
        for m in members:
            m.subscribe()
        last_subscribe = time.monotonic()
        done_at = wait_split(members, count, SETTLE_TIMEOUT_S, f"{count} members joining")
        return members, done_at - last_subscribe

    # --- commits ------------------------------------------------------------------------------

    def group_commit(self) -> None:
        n = self.args.commit_consumers
        topic = self.topic("commit", n)
        members, formed_s = self.form_group(n, topic, "range")
        latencies: list[list[float]] = [[] for _ in members]
        failures: list[str] = []
        measuring = threading.Event()
        next_offset = [1] * n

        def commit_work(i: int):
            def work(m: Member) -> None:
                held = m.held()
                if not held:
                    return
                started = time.perf_counter()
                try:
                    m.consumer.commit(offsets=[TopicPartition(topic, p, next_offset[i]) for p in held],
                                      asynchronous=False)
                except KafkaException as e:
                    failures.append(str(e))
                    return
                if measuring.is_set():
                    latencies[i].append(time.perf_counter() - started)
                next_offset[i] += 1
            return work

        try:
            for i, m in enumerate(members):
                m.work = commit_work(i)
            time.sleep(1.0)  # warm-up
            measuring.set()
            started = time.perf_counter()
            time.sleep(self.args.seconds)
            measuring.clear()
            elapsed = time.perf_counter() - started
        finally:
            for m in members:
                m.work = None
            for m in members:
                m.stop.set()
            for m in members:
                m.close()
        all_ms = [s * 1000 for per in latencies for s in per]
        if not all_ms:
            raise SystemExit(f"group.commit: no commit succeeded; errors {failures[-5:]}")
        emit("group.commit", rate=len(all_ms) / elapsed, unit="commits/s", consumers=n, count=len(all_ms),
             seconds=elapsed, p50_ms=percentile(all_ms, 50), p99_ms=percentile(all_ms, 99), max_ms=max(all_ms),
             mean_ms=statistics.fmean(all_ms), errors=len(failures), formed_s=formed_s)

    # --- rebalances ---------------------------------------------------------------------------

    def rebalances(self, want_join: bool, want_leave: bool) -> None:
        n = self.args.members
        topic = self.topic("rebalance", n)
        delay_s = (self.initial_delay_ms or 0) / 1000
        for strategy in self.args.strategies:
            joins: list[float] = []
            leaves: list[float] = []
            for _ in range(self.args.rounds):
                members, join_s = self.form_group(n, topic, strategy)
                try:
                    joins.append(join_s)
                    if want_leave:
                        leaving, staying = members[-1], members[:-1]
                        # The members' heartbeats are in phase (they all synced at once): leave at a
                        # random point of the heartbeat interval, not right after the assignment.
                        time.sleep(1.0 + random.uniform(0, HEARTBEAT_INTERVAL_MS / 1000))
                        started = time.monotonic()
                        leaving.close()
                        done_at = wait_split(staying, n, SETTLE_TIMEOUT_S, f"{n - 1} members after a leave")
                        leaves.append(done_at - started)
                finally:
                    for m in members:
                        m.stop.set()
                    for m in members:
                        m.close()
            if want_join:
                extra = {}
                if self.initial_delay_ms is not None and strategy != CONSUMER_PROTOCOL:
                    extra = dict(initial_delay_ms=self.initial_delay_ms,
                                 beyond_delays_s=statistics.median(joins) - 2 * delay_s)
                emit("group.join", strategy=strategy, members=n, rounds=len(joins), median_s=statistics.median(joins),
                     min_s=min(joins), max_s=max(joins), **extra)
            if want_leave:
                interval = HEARTBEAT_INTERVAL_MS if strategy != CONSUMER_PROTOCOL else self.consumer_heartbeat_ms
                emit("group.leave", strategy=strategy, members=n, rounds=len(leaves),
                     median_s=statistics.median(leaves), min_s=min(leaves), max_s=max(leaves),
                     heartbeat_interval_ms=interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=str(REPO_ROOT / ".kafgres" / "env"), help="the env file ./kafgres start wrote")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: from the env file)")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the commit figure")
    parser.add_argument("--commit-consumers", type=int, default=100, help="committing consumers (one group)")
    parser.add_argument("--members", type=int, default=10, help="members of the rebalance figures")
    parser.add_argument("--rounds", type=int, default=2, help="groups formed per strategy")
    parser.add_argument("--strategies", nargs="+", default=["range", "cooperative-sticky", CONSUMER_PROTOCOL],
                        choices=["range", "roundrobin", "cooperative-sticky", CONSUMER_PROTOCOL],
                        help=f"classic assignment strategies, or `{CONSUMER_PROTOCOL}` for a KIP-848 group")
    parser.add_argument("--only", nargs="+", choices=FIGURES, help="run only these figures")
    args = parser.parse_args()
    wanted = set(args.only or FIGURES)
    bench = Bench(args)
    try:
        if "group.commit" in wanted:
            bench.group_commit()
        if wanted & {"group.join", "group.leave"}:
            bench.rebalances("group.join" in wanted, "group.leave" in wanted)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
