"""Share groups (KIP-932) on both brokers: the Java KafkaShareConsumer (tests/java's probe, run as the
`kafgres-probe` tool) and kafka-share-groups.sh, as a Kafka 4.4 node serves them with its defaults
(share.version 2)."""

from __future__ import annotations

from framework import Context, scenario

# KafgresProbe's steps print exact lines (tests/java: ShareGroupScenario, ShareAdminScenario); their topic
# is the name given, their group that name + "-group".
PROBE = "kafgres-probe"
SHARE_GROUPS = "kafka-share-groups"
PROBE_TIMEOUT_S = 150.0


@scenario
def scenario_share_groups(ctx: Context) -> None:
    """Two share consumers split a queue, one acknowledges explicitly (accept, release, reject); a consumer
    in record_limit mode renews its records' locks past the lock duration while another takes the rest; then the
    tool describes a group's offsets and state, resets it to the earliest offset (the records come again),
    deletes its offsets (the group reads from share.auto.offset.reset again) and deletes it."""
    split = ctx.name("split")
    ctx.name("split-group", kind="group")
    ctx.cli(PROBE, "share-group", split, timeout_s=PROBE_TIMEOUT_S)

    # ShareFetch/ShareAcknowledge v2: record_limit acquires at most max.poll.records, and RENEW keeps
    # records past the lock duration without a redelivery.
    renew = ctx.name("renew")
    ctx.name("renew-group", kind="group")
    ctx.cli(PROBE, "share-renew", renew, timeout_s=PROBE_TIMEOUT_S)

    topic = ctx.name("admin")
    group = ctx.name("admin-group", kind="group")
    ctx.cli(PROBE, "share-admin-consume", topic, timeout_s=PROBE_TIMEOUT_S)
    # The coordinator column names the broker (host:port and id, normalized).
    ctx.cli(SHARE_GROUPS, "--describe", "--group", group, "--offsets")
    ctx.cli(SHARE_GROUPS, "--describe", "--group", group, "--state")
    ctx.cli(SHARE_GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run")
    ctx.cli(SHARE_GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    ctx.cli(PROBE, "share-admin-reread", topic, timeout_s=PROBE_TIMEOUT_S)
    ctx.cli(SHARE_GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "7", "--execute")
    ctx.cli(SHARE_GROUPS, "--describe", "--group", group, "--offsets")
    ctx.cli(SHARE_GROUPS, "--delete-offsets", "--group", group, "--topic", topic)
    ctx.cli(SHARE_GROUPS, "--describe", "--group", group, "--offsets")
    ctx.cli(SHARE_GROUPS, "--delete-offsets", "--group", group, "--topic", ctx.name("missing"))
    ctx.cli(SHARE_GROUPS, "--delete", "--group", group)
    ctx.cli(SHARE_GROUPS, "--describe", "--group", group, "--state")
    ctx.cli(SHARE_GROUPS, "--delete", "--group", ctx.name("unknown-group", kind="group"))
