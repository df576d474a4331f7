"""Share-group administration (KIP-932) with Kafka 4.4.0's kafka-share-groups.sh
(ShareGroupCommand, from tests/java's build) and the Java Admin client, around
share consumers of tests/java's `share-admin-*` steps (ShareAdminScenario):

- a share consumer reads a one-partition topic's 10 records and leaves; the
  tool lists the group, describes its offsets (start offset 10) and its state
  (Empty, no members); kafgres.share_group_partitions shows the same, no lag;
- while a consumer is in the group the tool describes it (--members, --state
  Stable) and --delete-offsets is refused: the group is not empty;
- --reset-offsets --to-earliest --execute (AlterShareGroupOffsets; 4.1's
  tool did not implement it), and then Admin.alterShareGroupOffsets to the
  earliest offset, each make the group read the 10 records again, as first
  deliveries;
- --delete-offsets --topic removes the group's state of the topic: no offsets
  described, and the group reads from share.auto.offset.reset (earliest) again;
- --delete removes the empty group.

Expected lines follow ShareGroupCommand's output format (Kafka 4.1.1's and 4.4.0's: the
tables' headers, "Successful", "Deletion of requested share groups (...) was
successful."); not yet run against Apache Kafka by the reference diff.
"""

from __future__ import annotations

import subprocess
import threading

from test_java_client import (  # noqa: F401 (java_build is a fixture)
    JAVA_BIN,
    PROBE_TIMEOUT_S,
    _tool_env,
    java_build,
    ok,
    probe,
    run_java,
    table,
)

ALL_READ = "10 records, 10 distinct, 10 first deliveries"


def start_member(bootstrap: str, topic: str) -> subprocess.Popen:
    """Starts the `share-admin-member` step: one consumer that stays in the group for a while."""
    cmd = [str(JAVA_BIN / "kafka-run-class"), "kafgres.probe.KafgresProbe", "share-admin-member", bootstrap, topic]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_tool_env())


def next_line(proc: subprocess.Popen, timeout_s: float) -> str:
    """The process's next stdout line, waited for at most timeout_s ('' if none came)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return got[0].strip() if got else ""


def offsets(tool: tuple[str, ...], group: str) -> list[tuple[str, str, str]]:
    """(topic, partition, start offset) of each row of `--describe --offsets` (none: Kafka 4.4's tool says
    the group "has no offset information" instead of a table)."""
    out = ok(run_java(*tool, "--describe", "--group", group, "--offsets"))
    if out.strip() == f"Share group '{group}' has no offset information.":
        return []
    rows = table(out)
    assert all(r["GROUP"] == group for r in rows), rows
    return [(r["TOPIC"], r["PARTITION"], r["START-OFFSET"]) for r in rows]


def state(tool: tuple[str, ...], group: str) -> tuple[str, str]:
    """(STATE, #MEMBERS) of `--describe --state`."""
    [row] = table(ok(run_java(*tool, "--describe", "--group", group, "--state")))
    assert row["GROUP"] == group, row
    return row["STATE"], row["#MEMBERS"]


def test_kafka_share_groups_cli_lists_describes_resets_and_deletes(
    java_build, bootstrap, topic_name, pg_connect  # noqa: F811
):
    topic = topic_name("shareadmin")
    group = f"{topic}-group"
    tool = ("kafka-share-groups", "--bootstrap-server", bootstrap)

    assert probe("share-admin-consume", bootstrap, topic) == [f"consumed: {ALL_READ}"]
    assert group in ok(run_java(*tool, "--list")).split()
    assert offsets(tool, group) == [(topic, "0", "10")]
    assert state(tool, group) == ("Empty", "0")
    with pg_connect(autocommit=True) as conn:
        row = conn.execute(
            "SELECT start_offset, log_end_offset, in_flight, acknowledged, archived, lag "
            "FROM kafgres.share_group_partitions WHERE group_id = %s AND topic = %s AND partition = 0",
            (group, topic),
        ).fetchone()
    assert row == (10, 10, 0, 0, 0, 0)

    # A live member: described, and its group's offsets may not be deleted.
    member = start_member(bootstrap, topic)
    try:
        assert next_line(member, PROBE_TIMEOUT_S) == "joined", member.stderr.read() if member.poll() is not None else ""
        [m] = table(ok(run_java(*tool, "--describe", "--group", group, "--members")))
        assert (m["GROUP"], m["#PARTITIONS"], m["ASSIGNMENT"]) == (group, "1", f"{topic}:0"), m
        assert m["HOST"].startswith("/"), m
        assert state(tool, group) == ("Stable", "1")
        refused = run_java(*tool, "--delete-offsets", "--group", group, "--topic", topic)
        assert "The group is not empty." in refused.stdout, refused.stdout + refused.stderr
        assert offsets(tool, group) == [(topic, "0", "10")], "nothing deleted"
    finally:
        try:
            out, err = member.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            member.kill()
            out, err = member.communicate()
    assert member.returncode == 0 and out.strip().splitlines()[-1:] == ["left"], out + err

    # Reset to earliest with the tool (Kafka 4.2+ implements --reset-offsets: AlterShareGroupOffsets), and
    # every record comes again; then the same through the Admin client.
    reset = ok(run_java(*tool, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"))
    assert [line.split() for line in reset.splitlines() if line.split()[:1] == [group]] == [[group, topic, "0", "0"]], reset
    assert probe("share-admin-reread", bootstrap, topic) == [f"read again: {ALL_READ}"]
    assert offsets(tool, group) == [(topic, "0", "10")]
    assert probe("share-admin-reset", bootstrap, topic) == ["reset to earliest: 0", f"after reset: {ALL_READ}"]
    assert offsets(tool, group) == [(topic, "0", "10")]

    # Delete the topic's offsets: none left, and the group starts again from earliest.
    deleted = ok(run_java(*tool, "--delete-offsets", "--group", group, "--topic", topic))
    statuses = [line.split(None, 1) for line in deleted.splitlines() if line.split()[:1] == [topic]]
    assert statuses == [[topic, "Successful"]], deleted
    assert offsets(tool, group) == []
    with pg_connect(autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM kafgres.share_group_partitions WHERE group_id = %s", (group,))
        assert left.fetchone() == (0,)
    assert probe("share-admin-reread", bootstrap, topic) == [f"read again: {ALL_READ}"]

    # Delete the (empty) group.
    gone = ok(run_java(*tool, "--delete", "--group", group))
    assert f"Deletion of requested share groups ('{group}') was successful." in gone
    assert group not in ok(run_java(*tool, "--list")).split()
