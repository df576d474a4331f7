"""What the comparison runs: the workloads, their kafgres-bench arguments, and
the two durability modes.

Both brokers get the same commands but for the bootstrap address and, in
`strict` mode, Kafka's topic config `flush.messages=1` (an fsync after every
append, as Kafgres's default `kafgres.flush_policy = fsync` does before it
acknowledges). In `relaxed` mode Kafka runs with its defaults (the OS flushes
when it likes) and Kafgres with `kafgres.flush_policy = page_cache`.

Every run writes to a topic of its own, created by the run and deleted after
it (the consume workload reads the 1 KiB produce run's topic, then deletes it).
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = {
    "strict": {"kafgres_flush_policy": "fsync", "kafka_topic_configs": ["flush.messages=1"]},
    "relaxed": {"kafgres_flush_policy": "page_cache", "kafka_topic_configs": []},
}


@dataclass(frozen=True)
class Workload:
    key: str
    label: str
    # kafgres-bench arguments after the subcommand's topic; `{samples}` is replaced by a file path.
    subcommand: str
    args: tuple[str, ...]
    # The metric this workload is judged by, from its result line, and its unit.
    metric: str
    unit: str
    # Roughly how long it runs, for the timeout (the run's own deadline applies first).
    expected_s: int
    samples: bool = False
    # Creates its topic itself (partitions) or reads another run's (consume).
    creates_topic: bool = True


def workloads(quick: bool) -> list[Workload]:
    seconds = 3 if quick else 10
    sync_count, sync_warmup = (200, 20) if quick else (2000, 200)
    produce = ("--producers", "1", "--seconds", str(seconds))
    return [
        Workload("sync", "sync send, 100 B", "sync",
                 ("--count", str(sync_count), "--warmup", str(sync_warmup), "--size", "100"),
                 "p50", "ms", 60, samples=True),
        Workload("produce-100", "produce 100 B", "produce", ("--size", "100", *produce),
                 "records_per_s", "records/s", seconds),
        Workload("produce-1k", "produce 1 KiB", "produce", ("--size", "1024", *produce),
                 "records_per_s", "records/s", seconds),
        Workload("consume", "consume 1 KiB", "consume", (), "mb_per_s", "MB/s", 60, creates_topic=False),
        Workload("produce-256k", "produce 256 KiB", "produce", ("--size", "262144", *produce),
                 "mb_per_s", "MB/s", seconds),
        # Four producers, each its own librdkafka client (and connection) on
        # a thread of one kafgres-bench process: issue 24's durable-at-relaxed
        # speed targets are judged at 1 and 4 producers.
        Workload("produce-1k-4p", "produce 1 KiB, 4 producers", "produce",
                 ("--size", "1024", "--producers", "4", "--seconds", str(seconds)),
                 "records_per_s", "records/s", seconds),
        Workload("produce-256k-4p", "produce 256 KiB, 4 producers", "produce",
                 ("--size", "262144", "--producers", "4", "--seconds", str(seconds)),
                 "mb_per_s", "MB/s", seconds),
        Workload("e2e", "end-to-end, 1000/s", "e2e",
                 ("--rate", "1000", "--seconds", str(seconds), "--warmup-s", "1", "--size", "100"),
                 "p99", "ms", seconds + 5, samples=True),
        # Diagnostics, not targets: the sync and e2e patterns without librdkafka
        # (one blocking connection per side), to split those figures into what
        # the broker and loopback take and what the client library adds.
        Workload("bare-sync", "sync send, 100 B, no client library", "bare",
                 ("--pattern", "sync", "--count", str(sync_count), "--warmup", str(sync_warmup), "--size", "100"),
                 "p50", "ms", 60),
        Workload("bare-e2e", "end-to-end, 1000/s, no client library", "bare",
                 ("--pattern", "e2e", "--rate", "1000", "--count", str(seconds * 1000), "--warmup", "1000",
                  "--size", "100"),
                 "p99", "ms", seconds + 5),
        Workload("partitions", "1,000 partitions, 200 producers", "partitions",
                 ("--partitions", "1000", "--producers", "200", "--size", "1024", "--seconds", str(seconds)),
                 "records_per_s", "records/s", seconds * 3),
    ]


def command(
    binary: str,
    workload: Workload,
    *,
    bootstrap: str,
    topic: str,
    broker: str,
    mode: str,
    expect: int | None = None,
    samples_file: str | None = None,
) -> list[str]:
    out = [binary, workload.subcommand, "--bootstrap", bootstrap, "--topic", topic]
    if workload.creates_topic:
        if workload.subcommand != "partitions":
            out += ["--create-partitions", "1"]
        if broker == "kafka":
            for config in MODES[mode]["kafka_topic_configs"]:
                out += ["--topic-config", config]
    out += list(workload.args)
    if workload.subcommand == "consume":
        out += ["--expect", str(expect or 1)]
    if samples_file:
        out += ["--samples-file", samples_file]
    return out
