"""Scenarios of the operator's tools: kafka-transactions, kafka-leader-election,
kafka-reassign-partitions, kafka-features, kafka-metadata-quorum and kafka-configs'
client quotas, and the admin APIs behind them as kafka-python calls them (see
framework.py)."""

from __future__ import annotations

import dataclasses
import re

from confluent_kafka import OFFSET_BEGINNING, Producer

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
    """kafka-transactions list, describe, find-hanging and abort, and kafka-python's list_transactions with each
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
    # The open transaction's partition 0 as a hanging one: abort finds its producer with
    # DescribeProducers and ends it there with WriteTxnMarkers; partition 1 stays open.
    ctx.cli("kafka-transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    _table(ctx, "$ kafka-transactions find-hanging, after abort:",
           ctx.cli("kafka-transactions", "find-hanging", "--broker-id", str(ctx.norm.node_id), show=False), ours)
    try:
        producers["open"].commit_transaction(20)
        ctx.out("commit the open one: ok")
    except Exception as e:  # noqa: BLE001
        ctx.out("commit the open one:", error_text(e, message=False))
    # Partition 0's record of the open transaction was aborted first: its commit marker came after.
    ctx.consume(topic, 0, OFFSET_BEGINNING, 1, config={"isolation.level": "read_committed"},
                show=lambda m: f"read_committed p0 @{m.offset()} {m.value()!r}")


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
            ("the current levels", {"group.version": 1, "metadata.version": 33}),
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


# Quota configs are printed from the Admin client's maps (HashMaps): the entities and, within one, the keys
# come in the broker's hash order, which no client relies on, so both are written sorted.
QUOTA_LINE = re.compile(r"(Quota configs for .* are )(.*)")


def _quota_line(text: str) -> str:
    match = QUOTA_LINE.fullmatch(text)
    return match.group(1) + ", ".join(sorted(match.group(2).split(", "))) if match else text


@scenario
def scenario_client_quotas(ctx: Context) -> None:
    """kafka-configs quotas round trips (issue 20): a user, a client id, both, their defaults and ip entities
    (an address, an IPv6 address as typed, the default) set, described every way, deleted and described
    again; the tool's refusals; AlterClientQuotas (validate only) and DescribeClientQuotas refusals as an
    Admin client sends them. Quotas are global: names and addresses are this run's, default entities get
    values no client of the suite reaches, and everything set is removed at the end whatever happens."""
    import ipaddress

    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

    import kafka_raw

    user, client = ctx.name("user", kind="quota"), ctx.name("client", kind="quota")
    other, cmr_user = ctx.name("other-user", kind="quota"), ctx.name("cmr-user", kind="quota")
    prefix = user.removesuffix("user")
    r = ctx.run_id
    ip4 = f"10.{int(r[0:2], 16)}.{int(r[2:4], 16)}.{int(r[4:6], 16)}"
    # Typed with its zeros: Kafka keeps an ip entity's name as given.
    ip6 = f"fd00:0:0:0:0:0:{r[0:4]}:{r[4:8]}"
    ip6_compressed = str(ipaddress.IPv6Address(ip6))
    for address, placeholder in ((ip4, "<ip>"), (ip6, "<ip6>"), (ip6_compressed, "<ip6 compressed>")):
        ctx.norm.register(address, placeholder)
    ours = (prefix, ip4, ip6, ip6_compressed)

    users, clients, ips, default = ("--entity-type", "users"), ("--entity-type", "clients"), \
        ("--entity-type", "ips"), ("--entity-default",)

    def named(name: str) -> tuple[str, str]:
        return ("--entity-name", name)

    # entity -> (its arguments, what is set). Values on default entities are far above anything the suite
    # sends (they are in force for every client of the broker while the scenario runs).
    quotas = {
        "user": ((*users, *named(user)),
                 "producer_byte_rate=1048576,consumer_byte_rate=2097152,request_percentage=12.5"),
        "default user": ((*users, *default),
                         "producer_byte_rate=1073741824,consumer_byte_rate=1073741824,request_percentage=10000"),
        "user and client": ((*users, *named(user), *clients, *named(client)),
                            "producer_byte_rate=524288,request_percentage=50"),
        "user and default client": ((*users, *named(user), *clients, *default), "consumer_byte_rate=65536"),
        "default user and default client": ((*users, *default, *clients, *default), "request_percentage=10000"),
        "client": ((*clients, *named(client)),
                   "producer_byte_rate=8192,consumer_byte_rate=16384,request_percentage=25"),
        "default client": ((*clients, *default), "consumer_byte_rate=1073741824"),
        "ip": ((*ips, *named(ip4)), "connection_creation_rate=7"),
        "default ip": ((*ips, *default), "connection_creation_rate=1000"),
        "ip6": ((*ips, *named(ip6)), "connection_creation_rate=9"),
    }
    # Refused by the tool (before any request) or by the broker: nothing is stored on either.
    refused = [
        (*ips, *named(ip4), "--alter", "--add-config", "producer_byte_rate=100"),
        (*users, *named(other), "--alter", "--add-config", "connection_creation_rate=7"),
        (*users, *named(other), "--alter", "--add-config", "producer_byte_rate=abc"),
        (*users, *named(other), "--alter", "--add-config", "producer_byte_rate=1.5"),
        (*ips, *named("999.1.2.3"), "--alter", "--add-config", "connection_creation_rate=7"),
    ]

    def write(runs, keep_ours: bool = False) -> None:
        """Writes tool runs, quota lines sorted; `keep_ours`: only the lines of this run's entities and of the
        default ones (a describe of every entity of a type also lists other tests' quotas)."""
        for run in runs:
            lines = run.stdout
            if keep_ours:
                lines = [line for line in lines if "the default" in line or any(n in line for n in ours)]
            ctx.write_tool(dataclasses.replace(run, stdout=sorted(_quota_line(line) for line in lines)))

    try:
        ctx.out("# set, and refused")
        runs = ctx.run_tools([(*args, "--alter", "--add-config", configs) for args, configs in quotas.values()]
                             + refused)
        write(runs)

        ctx.out("# described")
        every = [(*users,), (*users, *clients), (*clients,), (*ips,)]
        write(ctx.run_tools([(*e, "--describe") for e in every]), keep_ours=True)
        write(ctx.run_tools([(*quotas[e][0], "--describe") for e in quotas if e != "user and default client"]
                            + [(*users, *named(user), *clients, "--describe")]))

        ctx.out("# deleted")
        deleted = {"user": "producer_byte_rate,consumer_byte_rate"}
        write(ctx.run_tools([(*args, "--alter", "--delete-config",
                              deleted.get(e, ",".join(c.split("=")[0] for c in configs.split(","))))
                             for e, (args, configs) in quotas.items()]))
        ctx.out("# described again; a deleted config deleted again")
        write(ctx.run_tools([(*e, "--describe") for e in every]
                            + [(*quotas["user"][0], "--alter", "--delete-config", "producer_byte_rate")]),
              keep_ours=True)
        write(ctx.run_tools([(*quotas["user"][0], "--alter", "--delete-config", "request_percentage")]))

        ctx.out("# refusals as an Admin client sends them (validate only: nothing is stored)")
        session = kafka_raw.Session(ctx.bootstrap, {})
        try:
            _quota_refusals(ctx, session, AlterClientQuotasRequest, DescribeClientQuotasRequest,
                            user=user, client=client, cmr_user=cmr_user, ip4=ip4)
        finally:
            session.close()
    finally:
        _remove_quotas(ctx, ours, {args: configs for args, configs in quotas.values()})


def _quota_err(code: int, message: str | None) -> str:
    import kafka.errors

    return f"{kafka.errors.for_code(code).__name__}({code}) {message!r}"


def _quota_refusals(ctx: Context, session, alter_request, describe_request, *, user: str, client: str,
                    cmr_user: str, ip4: str) -> None:
    """AlterClientQuotas with validate_only and DescribeClientQuotas filters, one line per request: what
    the broker answers to what kafka-configs never sends (its own checks come first)."""
    import kafka_raw

    def entity(*parts: tuple[str, str | None]) -> list[dict]:
        return [{"entity_type": t, "entity_name": n} for t, n in parts]

    def op(key: str, value: float, remove: bool = False) -> dict:
        return {"key": key, "value": value, "remove": remove}

    u, c, i = ("user", user), ("client-id", client), ("ip", ip4)
    alterations = [
        ("ip producer_byte_rate", entity(i), [op("producer_byte_rate", 100.0)]),
        ("default ip producer_byte_rate", entity(("ip", None)), [op("producer_byte_rate", 100.0)]),
        ("user connection_creation_rate", entity(u), [op("connection_creation_rate", 7.0)]),
        ("client connection_creation_rate", entity(c), [op("connection_creation_rate", 7.0)]),
        ("user fancy_rate (unknown)", entity(u), [op("fancy_rate", 1.0)]),
        ("user producer_byte_rate 1.5", entity(u), [op("producer_byte_rate", 1.5)]),
        ("ip connection_creation_rate 2.5", entity(i), [op("connection_creation_rate", 2.5)]),
        ("user producer_byte_rate -1", entity(u), [op("producer_byte_rate", -1.0)]),
        ("user request_percentage 0", entity(u), [op("request_percentage", 0.0)]),
        ("ip connection_creation_rate 0", entity(i), [op("connection_creation_rate", 0.0)]),
        ("user producer_byte_rate 1e30", entity(u), [op("producer_byte_rate", 1e30)]),
        ("ip connection_creation_rate 2147483648", entity(i), [op("connection_creation_rate", 2147483648.0)]),
        ("user request_percentage 1e300", entity(u), [op("request_percentage", 1e300)]),
        ("ip 999.1.2.3", entity(("ip", "999.1.2.3")), [op("connection_creation_rate", 7.0)]),
        ("ip localhost (a host name)", entity(("ip", "localhost")), [op("connection_creation_rate", 7.0)]),
        ("empty ip", entity(("ip", "")), [op("connection_creation_rate", 7.0)]),
        ("empty user", entity(("user", "")), [op("producer_byte_rate", 7.0)]),
        ("empty client id", entity(("client-id", "")), [op("producer_byte_rate", 7.0)]),
        ("ip and user", entity(("ip", None), u), [op("connection_creation_rate", 7.0)]),
        ("no entity", [], [op("producer_byte_rate", 7.0)]),
        ("entity type group", entity(("group", "g")), [op("producer_byte_rate", 7.0)]),
        ("user given twice", entity(("user", ""), u), [op("producer_byte_rate", 7.0)]),
        ("user controller_mutation_rate", entity(("user", cmr_user)), [op("controller_mutation_rate", 10.0)]),
        ("user removes fancy_rate (unknown)", entity(u), [op("fancy_rate", 0.0, remove=True)]),
        ("ip removes producer_byte_rate", entity(i), [op("producer_byte_rate", 0.0, remove=True)]),
    ]
    for label, parts, ops in alterations:
        answer = session.send(kafka_raw.request(alter_request, 1, entries=[{"entity": parts, "ops": ops}],
                                                validate_only=True))
        ctx.out(f"AlterClientQuotas (validate only) {label}:",
                " ".join(_quota_err(e.error_code, e.error_message) for e in answer.entries))

    def component(kind: str, match_type: int, match: str | None = None) -> dict:
        return {"entity_type": kind, "match_type": match_type, "match": match}

    exact, default, specified = 0, 1, 2
    filters = [
        ("ip and user", [component("ip", default), component("user", default)]),
        ("entity type group", [component("group", default)]),
        ("empty entity type", [component("", default)]),
        ("exact without a name", [component("user", exact)]),
        ("default with a name", [component("user", default, user)]),
        ("specified with a name", [component("user", specified, user)]),
        ("match type 7", [component("user", 7)]),
        ("user twice", [component("user", default), component("user", 7)]),
    ]
    for label, components in filters:
        answer = session.send(kafka_raw.request(describe_request, 1, components=components, strict=False))
        ctx.out(f"DescribeClientQuotas {label}:", _quota_err(answer.error_code, answer.error_message),
                f"entries={len(answer.entries or [])}")


def _remove_quotas(ctx: Context, ours: tuple[str, ...], defaults: dict[tuple[str, ...], str]) -> None:
    """Removes every quota of this run's entities, and the keys it set on default entities, through
    AlterClientQuotas (kafka-configs cannot name every spelling of an address); then writes what is left
    of them, waiting up to WAIT_TIMEOUT_S for the broker to show their removal."""
    import time

    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

    import kafka_raw
    from framework import WAIT_TIMEOUT_S

    # The default entities this run set, as (type, None) tuples, with the keys it set there.
    kinds = {"users": "user", "clients": "client-id", "ips": "ip"}
    default_keys: dict[frozenset, set[str]] = {}
    for args, configs in defaults.items():
        if "--entity-name" in args:
            continue
        entity = frozenset((kinds[args[i + 1]], None) for i, a in enumerate(args) if a == "--entity-type")
        default_keys[entity] = {c.split("=")[0] for c in configs.split(",")}

    def left(session) -> list[tuple[frozenset, list[str]]]:
        answer = session.send(kafka_raw.request(DescribeClientQuotasRequest, 1, components=[], strict=False))
        found = []
        for entry in answer.entries or []:
            entity = frozenset((e.entity_type, e.entity_name) for e in entry.entity)
            keys = sorted(v.key for v in entry.values)
            if any(name and any(o in name for o in ours) for _, name in entity):
                found.append((entity, keys))
            elif entity in default_keys and set(keys) & default_keys[entity]:
                found.append((entity, sorted(set(keys) & default_keys[entity])))
        return found

    def shown(found: list[tuple[frozenset, list[str]]]) -> list[str]:
        return sorted(ctx.norm.line(f"{sorted(entity, key=str)} {keys}") for entity, keys in found)

    session = kafka_raw.Session(ctx.bootstrap, {})
    try:
        remaining = left(session)
        ctx.out("quotas of this run still set before removing them:", shown(remaining))
        if remaining:
            entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in sorted(entity, key=str)],
                        "ops": [{"key": k, "value": 0.0, "remove": True} for k in keys]}
                       for entity, keys in remaining]
            session.send(kafka_raw.request(AlterClientQuotasRequest, 1, entries=entries, validate_only=False))
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while remaining and time.monotonic() < deadline:
            remaining = left(session)
            if remaining:
                time.sleep(0.2)
        ctx.out("quotas of this run left after removing them:", shown(remaining))
    finally:
        session.close()
