"""Scenarios of the operator's tools: kafka-transactions, kafka-leader-election,
kafka-reassign-partitions, kafka-features and kafka-metadata-quorum, and the
admin APIs behind them as kafka-python calls them (see framework.py)."""

from __future__ import annotations

import re

from confluent_kafka import Producer

from framework import Context, error_text, scenario

TXN_TIMEOUT_MS = 60000


def _transactional_producer(ctx: Context, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": transactional_id, "log_level": 4,
                  "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": 20000})
    p.init_transactions(20)

    def close() -> None:
        try:
            p.abort_transaction(10)
        except Exception:  # noqa: BLE001  (nothing open, or already ended)
            pass

    ctx._closers.append(close)
    return p


def _table(ctx: Context, label: str, lines: list[str], keep: re.Pattern[str] | None = None) -> None:
    """A tool's tab-separated table: the header, then the rows (sorted; only those `keep` matches), with
    producer ids, node ids and times written through the normalizer."""
    if not lines:
        ctx.out(label, "(no output)")
        return
    header, *rows = lines
    ctx.out(label, header)
    columns = header.split(" ")
    for row in sorted(rows):
        if keep is not None and not keep.search(row):
            continue
        cells = row.split(" ")
        shown = []
        for name, value in zip(columns, cells):
            if name in ("ProducerId",) and value.lstrip("-").isdigit():
                value = ctx.norm.producer_id(int(value))
            elif name in ("Coordinator", "CoordinatorId") and value.isdigit():
                value = ctx.norm.node(int(value))
            elif name.endswith("TimeMs") and value.isdigit():
                value = ctx.norm.clock_ms(int(value))
            elif name == "TransactionDurationMs" and value.isdigit():
                value = "<duration>"
            elif name == "TopicPartitions":
                value = ",".join(sorted(value.split(",")))  # in the coordinator's hash order on Kafka
            shown.append(f"{name}={value}")
        shown.extend(cells[len(columns):])
        ctx.out("  ", " ".join(shown))


@scenario
def scenario_transaction_admin(ctx: Context) -> None:
    """kafka-transactions list, describe and find-hanging, and kafka-python's list_transactions with each
    filter (state, producer id, duration, id pattern, a bad pattern) and describe_transactions: an open, a
    committed and an initialised transactional id."""
    from kafka import KafkaAdminClient

    topic = ctx.create_topic(ctx.name("t"), 2)
    ids = {tag: ctx.name(tag, kind="txn") for tag in ("open", "done", "idle")}
    prefix = ids["open"].removesuffix("open")
    producers = {tag: _transactional_producer(ctx, txn) for tag, txn in ids.items()}
    for tag in ("open", "done"):
        p = producers[tag]
        p.begin_transaction()
        p.produce(topic, b"a", partition=0)
        p.produce(topic, b"b", partition=1)
        p.flush(20)
    producers["done"].commit_transaction(20)
    ctx.out("transactions: one open over 2 partitions, one committed, one initialised")

    ours = re.compile(re.escape(prefix))
    pattern = re.escape(prefix) + ".*"
    _table(ctx, "$ kafka-transactions list:", ctx.cli("kafka-transactions", "list", "--transactional-id-pattern",
                                                     pattern, show=False), ours)
    for tag in ("open", "done", "idle"):
        _table(ctx, f"$ kafka-transactions describe {tag}:",
               ctx.cli("kafka-transactions", "describe", "--transactional-id", ids[tag], show=False))
    ctx.cli("kafka-transactions", "describe", "--transactional-id", ctx.name("unknown", kind="txn"))
    _table(ctx, "$ kafka-transactions find-hanging:",
           ctx.cli("kafka-transactions", "find-hanging", "--broker-id", str(ctx.norm.node_id), show=False), ours)

    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        described = admin.describe_transactions([ids["open"]])[ids["open"]]
        open_pid = described.producer_id
        filters = [
            ("no filter", {}),
            ("state Ongoing", {"state_filters": ["Ongoing"]}),
            ("states CompleteCommit and Empty", {"state_filters": ["CompleteCommit", "Empty"]}),
            ("state Dead", {"state_filters": ["Dead"]}),
            ("the open one's producer id", {"producer_id_filters": [open_pid]}),
            ("running longer than 0 ms", {"duration_filter_ms": 0}),
            ("running longer than an hour", {"duration_filter_ms": 3_600_000}),
            ("id pattern open|idle", {"transactional_id_pattern": f"{pattern[:-2]}(open|idle)"}),
        ]
        for label, kwargs in filters:
            listed = admin.list_transactions(**kwargs)
            found = sorted((t.transactional_id, t.state.value) for node in listed.values() for t in node
                           if t.transactional_id.startswith(prefix))
            ctx.out(f"kafka-python list_transactions {label}:", [f"{ctx.norm.line(i)}={s}" for i, s in found])
        try:
            admin.list_transactions(transactional_id_pattern="(")
            ctx.out("kafka-python list_transactions bad pattern: ok")
        except Exception as e:  # noqa: BLE001  (the error is what is compared)
            ctx.out("kafka-python list_transactions bad pattern:", re.sub(r"\(.*", "", str(e)).strip())
        for tag in ("open", "idle"):
            d = admin.describe_transactions([ids[tag]])[ids[tag]]
            partitions = sorted(f"{ctx.norm.line(tp.topic)}-{tp.partition}" for tp in d.topic_partitions)
            ctx.out(f"kafka-python describe_transactions {tag}: state={d.state.value} "
                    f"pid={ctx.norm.producer_id(d.producer_id)} epoch={d.producer_epoch} "
                    f"timeout={d.transaction_timeout_ms} start={ctx.norm.clock_ms(d.transaction_start_time_ms)} "
                    f"partitions={partitions}")
    finally:
        admin.close()
    try:
        producers["open"].commit_transaction(20)
        ctx.out("commit the open one: ok")
    except Exception as e:  # noqa: BLE001
        ctx.out("commit the open one:", error_text(e, message=False))


@scenario
def scenario_replica_placement(ctx: Context) -> None:
    """What a single node answers to the replica placement tools: kafka-leader-election (preferred and
    unclean, one partition, every partition, an unknown one), kafka-reassign-partitions (execute onto the
    broker the partitions are on, verify, list, cancel) and kafka-python's elect_leaders,
    alter_partition_reassignments (same broker, cancel, a broker twice, an unknown broker, unknown
    partitions), list_partition_reassignments and alter_replica_log_dirs (the directory the replica is in,
    another one, an unknown partition)."""
    import json
    import tempfile

    import kafka.errors as Errors
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.structs import TopicPartitionReplica

    topic = ctx.create_topic(ctx.name("t"), 4)
    node = ctx.norm.node_id
    for election, partition in (("PREFERRED", "0"), ("UNCLEAN", "1"), ("PREFERRED", "7")):
        ctx.cli("kafka-leader-election", "--election-type", election, "--topic", topic, "--partition", partition)
    ctx.cli("kafka-leader-election", "--election-type", "PREFERRED", "--all-topic-partitions")

    plan = {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": [node], "log_dirs": ["any"]}
                                         for p in (0, 1)]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    ctx.norm.register(f.name, "<plan.json>")
    ctx.cli("kafka-reassign-partitions", "--reassignment-json-file", f.name, "--execute")
    ctx.cli("kafka-reassign-partitions", "--reassignment-json-file", f.name, "--verify")
    ctx.cli("kafka-reassign-partitions", "--list")
    ctx.cli("kafka-reassign-partitions", "--reassignment-json-file", f.name, "--cancel", "--preserve-throttles")

    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        response = admin.elect_leaders(0, {topic: [0, 3, 9]}, raise_errors=False)
        for result in response.replica_election_results:
            for p in sorted(result.partition_result, key=lambda p: p.partition_id):
                ctx.out(f"kafka-python elect_leaders {ctx.norm.line(result.topic)}-{p.partition_id}:",
                        error_text(Errors.for_code(p.error_code)(p.error_message)))
        ctx.out("kafka-python elect_leaders top-level:", Errors.for_code(response.error_code).__name__)
        unknown = ctx.name("unknown")
        altered = admin.alter_partition_reassignments({
            TopicPartition(topic, 0): [node], TopicPartition(topic, 1): None, TopicPartition(topic, 2): [node, node],
            TopicPartition(topic, 3): [node + 1], TopicPartition(topic, 9): [node], TopicPartition(unknown, 0): [node],
        })
        for tp, error in sorted(altered.items()):
            ctx.out(f"kafka-python alter_partition_reassignments {ctx.norm.line(tp.topic)}-{tp.partition}:",
                    "ok" if error is None else error.__name__)
        ctx.out("kafka-python list_partition_reassignments:", admin.list_partition_reassignments())
        ctx.out("kafka-python list_partition_reassignments of the topic:",
                admin.list_partition_reassignments({topic: [0, 1]}))
        dirs = [d["log_dir"] for broker in admin.describe_log_dirs() for d in broker["log_dirs"]]
        ctx.out("log directories:", len(dirs))
        ctx.norm.register(dirs[0], "<log dir>")
        moved = admin.alter_replica_log_dirs({
            TopicPartitionReplica(topic, 0, node): dirs[0], TopicPartitionReplica(topic, 9, node): dirs[0],
            TopicPartitionReplica(topic, 1, node): dirs[0] + "-elsewhere",
        })
        for tpr, error in sorted(moved.items()):
            ctx.out(f"kafka-python alter_replica_log_dirs {ctx.norm.line(tpr.topic)}-{tpr.partition}:",
                    error.__name__)
    finally:
        admin.close()


@scenario
def scenario_user_scram_credentials(ctx: Context) -> None:
    """kafka-python's describe_user_scram_credentials and alter_user_scram_credentials where a Kafka
    without credentials and Kafgres without authentication answer alike: unknown and repeated users, an
    empty name, an unknown mechanism, too few and too many iterations, a user altered twice, a user whose
    first alteration is refused (the later ones are ignored). Credentials that are set are the e2e test's
    (tests/e2e/test_sasl.py): on Kafgres only a superuser role may set one."""
    from kafka import KafkaAdminClient
    from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion

    users = {tag: ctx.name(tag, kind="user") for tag in ("unknown", "dup", "few", "many", "twice", "refused")}
    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        for label, asked in (("an unknown user", [users["unknown"]]), ("a user twice", [users["dup"]] * 2)):
            described = admin.describe_user_scram_credentials(asked)
            ctx.out(f"kafka-python describe_user_scram_credentials {label}:",
                    {ctx.norm.line(u): d for u, d in sorted(described.items())})
        altered = admin.alter_user_scram_credentials([
            UserScramCredentialDeletion(users["unknown"], "SCRAM-SHA-256"),
            UserScramCredentialDeletion("", "SCRAM-SHA-256"),
            UserScramCredentialDeletion(users["dup"], 0),
            UserScramCredentialDeletion(users["refused"], "SCRAM-SHA-256"),
            UserScramCredentialUpsertion(users["refused"], "SCRAM-SHA-256", "secret"),
            UserScramCredentialUpsertion(users["few"], "SCRAM-SHA-256", "secret", iterations=4095),
            UserScramCredentialUpsertion(users["many"], "SCRAM-SHA-256", "secret", iterations=16385),
            UserScramCredentialUpsertion(users["twice"], "SCRAM-SHA-256", "secret"),
            UserScramCredentialUpsertion(users["twice"], "SCRAM-SHA-256", "secret"),
        ])
        for user, error in sorted(altered.items()):
            ctx.out(f"kafka-python alter_user_scram_credentials {ctx.norm.line(user) or '(empty name)'}:",
                    error or "ok")
        described = admin.describe_user_scram_credentials([users["twice"]])
        ctx.out("kafka-python describe_user_scram_credentials after:",
                {ctx.norm.line(u): d for u, d in sorted(described.items())})
    finally:
        admin.close()


@scenario
def scenario_features(ctx: Context) -> None:
    """The feature flags (KIP-584) as kafka-features describe and kafka-python's describe_features read them
    from ApiVersions, and UpdateFeatures: kafka-features upgrade --dry-run to the current level, kafka-python's
    update_features to the current levels, to a level past the supported range and of an unknown feature."""
    from kafka import KafkaAdminClient

    epoch = re.compile(r"Epoch: \d+")
    for line in ctx.cli("kafka-features", "describe", show=False, sort=True):
        ctx.out("  " + epoch.sub("Epoch: <epoch>", line))
    ctx.cli("kafka-features", "upgrade", "--feature", "group.version=1", "--dry-run")
    ctx.cli("kafka-features", "upgrade", "--feature", "group.version=7", "--dry-run")
    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        for name, levels in sorted(admin.describe_features().items()):
            ctx.out(f"kafka-python describe_features {name}: supported={levels.get('supported')} "
                    f"finalized={levels.get('finalized')}")
        updates = [
            ("the current levels", {"group.version": 1, "metadata.version": 27}),
            ("past the supported range", {"group.version": 5}),
            ("an unknown feature", {"no.such.version": 1}),
        ]
        for label, update in updates:
            try:
                ctx.out(f"kafka-python update_features {label}:", admin.update_features(update, validate_only=True))
            except Exception as e:  # noqa: BLE001  (the refusal is what is compared)
                ctx.out(f"kafka-python update_features {label}:", type(e).__name__, str(e))
    finally:
        admin.close()


@scenario
def scenario_config_resources(ctx: Context) -> None:
    """kafka-python's list_config_resources (ListConfigResources v1, KIP-1142) for every type and for each
    one: this scenario's topic and the broker, no groups or client metrics subscriptions with configs."""
    from kafka import KafkaAdminClient

    topic = ctx.create_topic(ctx.name("t"), 1)
    admin = KafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=20000)
    try:
        for types in (None, ["TOPIC"], ["BROKER"], ["GROUP"], ["CLIENT_METRICS"], ["BROKER_LOGGER"],
                      ["TOPIC", "BROKER"]):
            listed = admin.list_config_resources(types)
            shown = {}
            for resource_type, names in sorted(listed.items()):
                kept = sorted(ctx.norm.line(n) for n in names if n == topic or resource_type.upper() != "TOPIC")
                shown[resource_type] = [ctx.norm.node(int(n)) if n.isdigit() else n for n in kept]
            ctx.out(f"kafka-python list_config_resources {types}:", shown)
    finally:
        admin.close()
