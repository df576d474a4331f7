"""The one place where transcripts are normalized.

A scenario's transcript must read the same on any correct broker, so
everything that legitimately differs between two runs, or between two brokers
that both behave like Kafka, is replaced here by a placeholder, and nothing
else is. What is replaced, and by what:

| what | why it varies | placeholder |
|---|---|---|
| topic, group and transactional-id names made by `Context.name` | unique per run (`cf<run>-<scenario>-<tag>`) | `<tag>` |
| the broker's address (`host:port`) | 19092 for Kafka, 9092 for Kafgres | `<broker>` |
| the broker's node id (via `node`; in CLI output the `Leader:`, `Replicas:`, `Isr:` fields and the coordinator's `(id)`) | Kafka's node.id=1, Kafgres's own | `<node>` (another id stays as it is) |
| the cluster id (via `cluster_id`) | random per cluster | `<cluster-id>` (an empty one stays visible) |
| topic ids (via `topic_id`, and `TopicId: …` in kafka-topics output) | random per topic | `<topic-id>` (the zero id `AAAAAAAAAAAAAAAAAAAAAA` stays visible) |
| UUIDs anywhere (KIP-394 member ids `<client.id>-<uuid>`) | random per member | `<uuid>` (the client id prefix stays; the all-zero UUID stays visible) |
| timestamps the broker or client takes from its clock (via `clock_ms`) | wall-clock time | `<now>` when within the run's window, else the value itself |
| producer ids (via `producer_id`) | allocated by the broker | `<pid>` when ≥ 0 (-1 stays visible) |
| absolute log directory paths in kafka-reassign-partitions' JSON (`"log_dirs":["/…"]`, Kafka 4.4) | each broker's data directory | `<log-dir>` (`"any"` stays visible) |

Values that are the same on every correct broker are never normalized:
offsets, partition counts, keys, values, headers, explicit record
timestamps, error codes and names, config values and sources, group states,
protocols, assignments, lag, client ids and client hosts (every client here
connects from 127.0.0.1).

Scenarios pass broker-chosen values through the typed helpers (`node`,
`cluster_id`, `topic_id`, `clock_ms`, `producer_id`) as they write them, and
every finished line goes through `line()` for the textual rules (names,
address, UUIDs, the TopicId field of the CLI).
"""

from __future__ import annotations

import re
import time
import uuid

UUID_RE = re.compile(r"(?!00000000-0000-0000-0000-000000000000)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# A log directory path inside a JSON string: kafka-reassign-partitions (4.4) prints each replica's.
LOG_DIR_IN_JSON_RE = re.compile(r'(?<="log_dirs":\[)[^\]]*')
CLI_TOPIC_ID_RE = re.compile(r"(TopicId: )(?!AAAAAAAAAAAAAAAAAAAAAA\b)[A-Za-z0-9_-]{22}")
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# A timestamp the broker or a client takes from its clock counts as "now" within this margin of the run.
CLOCK_MARGIN_MS = 60_000


class Normalizer:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.names: dict[str, str] = {}
        self.node_id: int | None = None
        self.started_ms = int(time.time() * 1000)

    # --- what the scenario tells it ------------------------------------------

    def register(self, unique: str, placeholder: str) -> None:
        self.names[unique] = placeholder

    # --- typed helpers for broker-chosen values ---------------------------------

    def node(self, node_id: int | None) -> str:
        if node_id is not None and self.node_id is not None and node_id == self.node_id:
            return "<node>"
        return str(node_id)

    @staticmethod
    def cluster_id(value: str | None) -> str:
        return "<cluster-id>" if value else repr(value)

    @staticmethod
    def topic_id(value: object) -> str:
        text = str(value) if value is not None else "None"
        if text in ("None", ZERO_TOPIC_ID, str(uuid.UUID(int=0))):
            return text
        return "<topic-id>"

    def clock_ms(self, ms: int | None) -> str:
        if ms is None:
            return "None"
        now = int(time.time() * 1000)
        if self.started_ms - CLOCK_MARGIN_MS <= ms <= now + CLOCK_MARGIN_MS:
            return "<now>"
        return str(ms)

    @staticmethod
    def producer_id(pid: int) -> str:
        return "<pid>" if pid >= 0 else str(pid)

    # --- the textual rules, applied to every line ------------------------------------

    def line(self, text: str) -> str:
        for unique in sorted(self.names, key=len, reverse=True):
            text = text.replace(unique, self.names[unique])
        text = text.replace(self.bootstrap, "<broker>")
        if self.node_id is not None:
            text = re.sub(rf"\b(Leader|Replicas|Isr): {self.node_id}\b", r"\1: <node>", text)
            text = text.replace(f"<broker> ({self.node_id})", "<broker> (<node>)")
        text = CLI_TOPIC_ID_RE.sub(r"\1<topic-id>", text)
        text = LOG_DIR_IN_JSON_RE.sub(_log_dirs, text)
        return UUID_RE.sub("<uuid>", text)


def _log_dirs(match: re.Match) -> str:
    """Each absolute path of a JSON `log_dirs` list as `"<log-dir>"`; other entries (`"any"`) as they are."""
    return ",".join('"<log-dir>"' if item.startswith('"/') else item for item in match.group(0).split(","))
