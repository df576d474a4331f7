"""Sarama (IBM/sarama, the other Go client) against Kafgres.

tests/sarama is a Go module (Sarama pinned in go.mod, checksums in go.sum)
whose main.go, sarama-probe, runs a fixed list of checks and prints `ok NAME`
or `FAIL NAME: REASON` for each (main.go's comment says what each does):
the cluster's metadata, CreateTopics with ClusterAdmin (and again), the
idempotent SyncProducer (acks=all, zstd), ListOffsets, a ConsumerGroup
(Sarama's classic group protocol, the range balancer) with commits,
DescribeGroups, ListGroups, OffsetFetch, a second member resuming at the
commit, a transactional producer (a commit, an abort that a read_committed
consumer must not see and a read_uncommitted one does, offsets committed in
a transaction), DeleteGroups and DeleteTopics. All of it runs with
config.Version at Sarama's newest (4.3.1); then the checks named old-* run a
subset again with config.Version = 2.1.0 (snappy), so the old, non-flexible
request versions are covered too (Metadata v7, Produce v7, Fetch v10,
JoinGroup v3, OffsetCommit v6, InitProducerId v1, EndTxn v1).

The session builds it with the `go` on PATH (Go 1.26+, as go.mod says) into
.kafgres/sarama, with GOPATH and GOCACHE there too, so the checkout stays
clean; modules come from the Go module proxy on the first build. The build is
reused while it is newer than go.mod, go.sum and every .go file. The probe
runs once per session; each check is a test of its own, so a broker bug fails
the check it breaks. KAFGRES_SARAMA_LOG=debug puts Sarama's protocol debug
log in the failure messages too (the default, info, is Sarama's own log).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from probe_checks import assert_check_ok, assert_every_check_ran, go_build, run_probe
from support import REPO_ROOT

SARAMA_DIR = REPO_ROOT / "tests" / "sarama"
BUILD_DIR = Path(os.environ.get("KAFGRES_SARAMA_BUILD", REPO_ROOT / ".kafgres" / "sarama"))
PROBE_BIN = BUILD_DIR / "sarama-probe"

# A first build downloads Sarama and its dependencies and compiles them.
BUILD_TIMEOUT_S = 600.0
# The probe bounds each of its 32 checks by 20 s; a healthy run takes about 15 s.
PROBE_TIMEOUT_S = 720.0

# What sarama-probe prints, in order: one line per check.
CHECKS = (
    "cluster",
    "create-topic",
    "create-topic-again",
    "produce-idempotent",
    "end-offsets",
    "consume-group",
    "commit",
    "describe-group-stable",
    "list-groups",
    "fetch-offsets",
    "describe-group-empty",
    "group-resume",
    "txn-commit",
    "txn-abort",
    "txn-read-committed",
    "txn-read-uncommitted",
    "txn-offsets",
    "delete-group",
    "delete-topic",
    # The same again with config.Version = V2_1_0_0.
    "old-cluster",
    "old-create-topic",
    "old-produce-idempotent",
    "old-consume-group",
    "old-commit",
    "old-describe-group-stable",
    "old-fetch-offsets",
    "old-describe-group-empty",
    "old-txn-commit",
    "old-txn-abort",
    "old-txn-read-committed",
    "old-delete-group",
    "old-delete-topic",
)


@pytest.fixture(scope="session")
def sarama_build() -> Path:
    """Builds tests/sarama unless the build is current; fails every test here if it cannot."""
    return go_build(SARAMA_DIR, BUILD_DIR, PROBE_BIN, "Sarama", BUILD_TIMEOUT_S)


@pytest.fixture(scope="module")
def probe_run(sarama_build, bootstrap) -> subprocess.CompletedProcess:
    """One run of sarama-probe against new topics; its output is what every test here reads."""
    topic = f"e2e-sarama-{uuid.uuid4().hex[:10]}"
    cmd = [str(sarama_build), "-log", os.environ.get("KAFGRES_SARAMA_LOG", "info"), bootstrap, topic]
    return run_probe(cmd, PROBE_TIMEOUT_S)


def test_probe_ran_every_check(probe_run):
    """Every check printed one line, in order, and the exit status agrees with them."""
    assert_every_check_ran(probe_run, CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_check(probe_run, check):
    assert_check_ok(probe_run, "sarama-probe", check)
