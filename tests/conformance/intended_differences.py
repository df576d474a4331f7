"""Every intended difference between Apache Kafka's and Kafgres's transcripts.

Each entry names the scenarios it applies to, a regular expression for the
lines of Kafka's transcript and one for Kafgres's (each must match a whole
line; None when that side has no line for it: the other side's lines are then
left out, not marked), and `doc`: the words that
start its entry in docs/conformance.md, where its reason is explained (the
test checks that they are there). Before the transcripts are compared, every
line matched by an entry is replaced by `~ <key>` on its side, and a run of
such markers becomes one, so a difference of several lines reads as one.
The groups a pattern captures are kept in its marker (`~ <key> <group>…`),
so the parts of a line that must still agree stay compared.

An entry that matches nothing, or the same lines on both sides, fails the
scenario (unless it is marked `may_not_occur`: it depends on the broker's
history, as leader epochs do on its restarts): Kafgres then behaves as Kafka does there (or the scenario changed)
and the entry, with its paragraph in docs/conformance.md, should go.

Anything that differs and is not listed here is a bug, in Kafgres or in a
scenario.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    key: str
    scenarios: tuple[str, ...]
    kafka: str | None
    kafgres: str | None
    doc: str
    reason: str
    # True when the difference depends on the broker's history and may not occur on a fresh one.
    may_not_occur: bool = False


DIFFERENCES: list[Difference] = [
    Difference(
        key="share-start-offset-advances",
        scenarios=("share_groups",),
        kafka=r"(  <admin-group> <admin> 0) 0 0",
        kafgres=r"(  <admin-group> <admin> 0) 10 0",
        doc="**A share-partition's start offset moves past acknowledged records at",
        reason="Kafgres moves a share-partition's start offset over acknowledged records at once; Kafka 4.4 "
               "describes start offset 0 with the 10 acknowledged records counted as delivery complete.",
    ),
    Difference(
        key="group-config-described-as-set",
        scenarios=("share_groups",),
        # Either, as the race went.
        kafka=r"  group config share\.auto\.offset\.reset=(?:latest \(DEFAULT_CONFIG\)|earliest \(DYNAMIC_GROUP_CONFIG\))",
        kafgres=r"  group config share\.auto\.offset\.reset=earliest \(DYNAMIC_GROUP_CONFIG\)",
        doc="**Group configs are described as set.**",
        reason="Kafka 4.4's group configs reach the broker through the metadata log, so a describe right after "
               "the alter may see the default; Kafgres answers what was stored.",
        # Kafka's answer depends on how fast its metadata log propagated.
        may_not_occur=True,
    ),
    Difference(
        key="no-broker-logger-resource",
        scenarios=("config_resources",),
        kafka=r"(kafka-python list_config_resources (?:None|\['BROKER_LOGGER'\]):) "
              r"(?:\{'broker': \['<node>'\], 'broker_logger': \['<node>'\], 'topic': \['<t>'\]\}"
              r"|\{'broker_logger': \['<node>'\]\})",
        kafgres=r"(kafka-python list_config_resources (?:None|\['BROKER_LOGGER'\]):) "
                r"(?:\{'broker': \['<node>'\], 'topic': \['<t>'\]\}|\{\})",
        doc="**No broker loggers.**",
        reason="Kafgres's log level is a setting (kafgres.log_level); DescribeConfigs does not serve "
               "BROKER_LOGGER resources, so ListConfigResources does not list the broker's.",
    ),
    Difference(
        key="auto-create-answered-at-once",
        scenarios=("metadata",),
        kafka=r"(metadata v12 auto-create, first answer: <auto>) error=3 id=00000000-0000-0000-0000-000000000000 "
              r"internal=False \[\] epochs=\[\]",
        kafgres=r"(metadata v12 auto-create, first answer: <auto>) error=0 id=<topic-id> internal=False "
                r"\[p0 err=0 leader=<node> replicas=\['<node>'\] isr=\['<node>'\] offline=\[\]\] epochs=\[\d+\]",
        doc="**Auto-created topics are answered at once.**",
        reason="Kafka creates the topic asynchronously and answers UNKNOWN_TOPIC_OR_PARTITION first; "
               "Kafgres records it in the catalog and answers with the topic.",
    ),
    Difference(
        key="leader-epoch-is-the-term",
        scenarios=("metadata",),
        kafka=r"(metadata v12 (?:no auto-create|auto-create, once created): .*\]) epochs=\[0(?:, 0)*\]",
        kafgres=r"(metadata v12 (?:no auto-create|auto-create, once created): .*\]) epochs=\[\d+(?:, \d+)*\]",
        doc="**A partition's leader epoch is the broker's term.**",
        reason="Every partition's leader epoch is the epoch of the broker's current term "
               "(kafgres.leader_epochs: one more at each restart, a new range at each promotion), so a new "
               "topic on a broker that has restarted does not start at 0 as on a fresh Kafka cluster.",
        may_not_occur=True,
    ),
    Difference(
        key="apis-not-implemented",
        scenarios=("api_versions",),
        kafka=r"other apis: \[\d.*\]",
        kafgres=r"other apis: \[[\d, ]*\]",
        doc="ApiVersions advertises only the APIs in the table above",
        reason="Kafgres serves only the APIs of docs/conformance.md's table (no transactions, ACLs, "
               "quotas, SASL, KIP-848, share group offsets and state, KRaft-internal APIs).",
    ),
    Difference(
        key="cluster-min-insync-replicas",
        scenarios=("topic_configs", "alter_configs", "topics_cli"),
        kafka=r"config min\.insync\.replicas=1 source=DYNAMIC_DEFAULT_BROKER_CONFIG read_only=False default=False "
              r"sensitive=False synonyms=\[min\.insync\.replicas=1/DEFAULT_CONFIG\]"
              r"|  (Topic: <t> TopicId: <topic-id> PartitionCount: \d+ ReplicationFactor: 1) "
              r"Configs: min\.insync\.replicas=1,(retention\.ms=3600000)",
        kafgres=r"config min\.insync\.replicas=1 source=DEFAULT_CONFIG read_only=False default=True "
                r"sensitive=False synonyms=\[min\.insync\.replicas=1/DEFAULT_CONFIG\]"
                r"|  (Topic: <t> TopicId: <topic-id> PartitionCount: \d+ ReplicationFactor: 1) "
                r"Configs: (retention\.ms=3600000)",
        doc="**No cluster-wide min.insync.replicas.**",
        reason="A new Kafka 4.1 cluster stores min.insync.replicas=1 as a cluster-wide dynamic default "
               "(DYNAMIC_DEFAULT_BROKER_CONFIG, listed by kafka-topics --describe); min.insync.replicas is "
               "not among Kafgres's dynamic broker configs (it has no replicas), so the same value is the "
               "DEFAULT_CONFIG.",
    ),
    Difference(
        key="controller-mutation-rate-refused",
        scenarios=("client_quotas",),
        kafka=r"(AlterClientQuotas \(validate only\) user controller_mutation_rate): NoError\(0\) None",
        kafgres=r"(AlterClientQuotas \(validate only\) user controller_mutation_rate): InvalidRequestError\(42\) "
                r"'controller_mutation_rate is not enforced by Kafgres'",
        doc="`controller_mutation_rate` is refused with INVALID_REQUEST saying Kafgres does not enforce it",
        reason="Kafgres has no controller, so it would store the quota and never apply it; it refuses the key "
               "(INVALID_REQUEST, its value checked as Kafka checks it first) where Kafka accepts it.",
    ),
    Difference(
        key="ip-entity-host-name-refused",
        scenarios=("client_quotas",),
        kafka=r"(AlterClientQuotas \(validate only\) ip localhost \(a host name\)): NoError\(0\) None",
        kafgres=r"(AlterClientQuotas \(validate only\) ip localhost \(a host name\)): InvalidRequestError\(42\) "
                r"'localhost is not a valid IP or resolvable host\.'",
        doc="an ip entity must be an IP address (Kafka also resolves host names when the quota is set)",
        reason="Kafgres's acceptor matches a connection's address against ip quotas and does no DNS, so an ip "
               "entity must be an address; Kafka also accepts a host name it can resolve when the quota is set.",
    ),
    Difference(
        key="auto-create-answered-at-once-acls",
        scenarios=("acl_matrix",),
        kafka=r"(  Metadata auto-create <[a-z-]+-auto>): UNKNOWN_TOPIC_OR_PARTITION\(3\)",
        kafgres=r"(  Metadata auto-create <[a-z-]+-auto>): NO_ERROR\(0\)",
        doc="**Auto-created topics are answered at once.**",
        reason="As in the metadata scenario: Kafka creates the topic asynchronously and answers "
               "UNKNOWN_TOPIC_OR_PARTITION first; Kafgres records it in the catalog and answers with the topic "
               "(whether each principal's topic exists in the end is compared as it is).",
    ),
]


def for_scenario(name: str) -> list[Difference]:
    return [d for d in DIFFERENCES if name in d.scenarios]


def apply(name: str, kafka_lines: list[str], kafgres_lines: list[str]):
    """(Kafka's view, Kafgres's view, the entries that did not occur) for one scenario."""
    entries = for_scenario(name)
    used = {d.key: [[], []] for d in entries}

    def view(lines: list[str], side: int) -> list[str]:
        out: list[str] = []
        for line in lines:
            for d in entries:
                pattern = d.kafka if side == 0 else d.kafgres
                match = re.fullmatch(pattern, line) if pattern is not None else None
                if match:
                    used[d.key][side].append(line)
                    # Lines only one broker writes (the other side's pattern is None) are left out: a
                    # marker on one side would be a difference of its own.
                    one_sided = (d.kafgres if side == 0 else d.kafka) is None
                    marker = " ".join(["~", d.key, *(g for g in match.groups() if g)])
                    if not one_sided and (not out or out[-1] != marker):
                        out.append(marker)
                    break
            else:
                out.append(line)
        return out

    kafka_view, kafgres_view = view(kafka_lines, 0), view(kafgres_lines, 1)
    unused = [d for d in entries if used[d.key][0] == used[d.key][1] and not d.may_not_occur]
    return kafka_view, kafgres_view, unused
