"""franz-go (the Go client: kgo and kadm) against Kafgres.

tests/franz is a Go module (franz-go pinned in go.mod, checksums in go.sum)
whose main.go, franz-probe, runs a fixed list of checks against one new topic
and prints `ok NAME` or `FAIL NAME: REASON` for each (main.go's comment says
what each does): the cluster's metadata, CreateTopics (and again), Metadata,
DescribeConfigs, the idempotent producer with lz4 and with zstd, ListOffsets
(start, end, max timestamp, by timestamp), a group consumer with commits,
DescribeGroups, ListGroups, OffsetFetch, lag, a second member resuming at the
commit, DeleteGroups and DeleteTopics.

The session builds it with the `go` on PATH (Go 1.26+, as go.mod says) into
.kafgres/franz, with GOPATH and GOCACHE there too, so the checkout stays
clean; modules come from the Go module proxy on the first build. The build is
reused while it is newer than go.mod, go.sum and every .go file. The probe
runs once per session; each check is a test of its own, so a broker bug fails
the check it breaks. KAFGRES_FRANZ_LOG=debug puts franz-go's debug log in the
failure messages (the default is warn).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from probe_checks import assert_check_ok, assert_every_check_ran, go_build, run_probe
from support import REPO_ROOT

FRANZ_DIR = REPO_ROOT / "tests" / "franz"
BUILD_DIR = Path(os.environ.get("KAFGRES_FRANZ_BUILD", REPO_ROOT / ".kafgres" / "franz"))
PROBE_BIN = BUILD_DIR / "franz-probe"

# A first build downloads franz-go and its dependencies and compiles them.
BUILD_TIMEOUT_S = 600.0
# The probe bounds each check by 20 s; a healthy run takes a few seconds.
PROBE_TIMEOUT_S = 420.0

# What franz-probe prints, in order: one line per check.
CHECKS = (
    "cluster",
    "create-topic",
    "create-topic-again",
    "list-topics",
    "describe-topic-configs",
    "produce-lz4-idempotent",
    "produce-zstd-idempotent",
    "list-offsets",
    "consume-group",
    "commit",
    "describe-group-stable",
    "list-groups",
    "fetch-offsets",
    "lag",
    "describe-group-empty",
    "group-resume",
    "delete-group",
    "delete-topic",
)


@pytest.fixture(scope="session")
def franz_build() -> Path:
    """Builds tests/franz unless the build is current; fails every test here if it cannot."""
    return go_build(FRANZ_DIR, BUILD_DIR, PROBE_BIN, "franz-go", BUILD_TIMEOUT_S)


@pytest.fixture(scope="module")
def probe_run(franz_build, bootstrap) -> subprocess.CompletedProcess:
    """One run of franz-probe against new topics; its output is what every test here reads."""
    topic = f"e2e-franz-{uuid.uuid4().hex[:10]}"
    cmd = [str(franz_build), "-log", os.environ.get("KAFGRES_FRANZ_LOG", "warn"), bootstrap, topic]
    return run_probe(cmd, PROBE_TIMEOUT_S)


def test_probe_ran_every_check(probe_run):
    """Every check printed one line, in order, and the exit status agrees with them."""
    assert_every_check_ran(probe_run, CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_check(probe_run, check):
    assert_check_ok(probe_run, "franz-probe", check)
