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
import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support import REPO_ROOT

SARAMA_DIR = REPO_ROOT / "tests" / "sarama"
BUILD_DIR = Path(os.environ.get("KAFGRES_SARAMA_BUILD", REPO_ROOT / ".kafgres" / "sarama"))
PROBE_BIN = BUILD_DIR / "sarama-probe"
# Written after a successful build; the build is reused while it is newer than every source.
BUILD_STAMP = BUILD_DIR / "build.stamp"

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
CHECK_LINE = re.compile(r"(ok|FAIL) ([a-z0-9-]+)(?:: (.*))?")


def _sources() -> list[Path]:
    return [SARAMA_DIR / "go.mod", SARAMA_DIR / "go.sum", *sorted(SARAMA_DIR.rglob("*.go"))]


def _build_is_current() -> bool:
    if not (BUILD_STAMP.is_file() and PROBE_BIN.is_file()):
        return False
    built = BUILD_STAMP.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in _sources())


def _go_env() -> dict[str, str]:
    return {
        **os.environ,
        "GOPATH": str(BUILD_DIR / "gopath"),  # the module cache lives under it
        "GOCACHE": str(BUILD_DIR / "gocache"),
        # -mod=mod: no vendor directory (go.sum is complete, so nothing is rewritten);
        # -modcacherw: a cache that `rm -rf .kafgres` can remove; -buildvcs=false: no git stamping.
        "GOFLAGS": "-mod=mod -modcacherw -buildvcs=false",
        "GOWORK": "off",
        # The go.mod's Go version must be the installed one: never download a toolchain.
        "GOTOOLCHAIN": "local",
    }


@pytest.fixture(scope="session")
def sarama_build() -> Path:
    """Builds tests/sarama unless the build is current; fails every test here if it cannot."""
    # The official tarball's place, for a PATH that lacks it.
    go = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if go is None:
        pytest.fail("`go` not found on PATH: the Sarama e2e tests need Go 1.26 or newer", pytrace=False)
    if not _build_is_current():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        started = time.time()  # a source edited during the build makes the next session rebuild
        cmd = [go, "build", "-trimpath", "-o", str(PROBE_BIN), "."]
        try:
            result = subprocess.run(cmd, cwd=SARAMA_DIR, env=_go_env(), capture_output=True, text=True,
                                    timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {BUILD_TIMEOUT_S:.0f}s", pytrace=False)
        if result.returncode != 0:
            pytest.fail(f"building tests/sarama failed (exit {result.returncode}):\n"
                        f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}", pytrace=False)
        BUILD_STAMP.write_text(f"tests/sarama built from sources as of {time.ctime(started)}\n")
        os.utime(BUILD_STAMP, (started, started))
    return PROBE_BIN


@pytest.fixture(scope="module")
def probe_run(sarama_build, bootstrap) -> subprocess.CompletedProcess:
    """One run of sarama-probe against new topics; its output is what every test here reads."""
    topic = f"e2e-sarama-{uuid.uuid4().hex[:10]}"
    cmd = [str(sarama_build), "-log", os.environ.get("KAFGRES_SARAMA_LOG", "info"), bootstrap, topic]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`{shlex.join(cmd)}` did not finish within {PROBE_TIMEOUT_S:.0f}s\n"
                    f"stdout:\n{e.stdout}\nstderr (tail):\n{(e.stderr or '')[-6000:]}")


def _verdicts(run: subprocess.CompletedProcess) -> list[tuple[str, str, str | None]]:
    verdicts = []
    for line in run.stdout.splitlines():
        match = CHECK_LINE.fullmatch(line)
        assert match, f"not a check line: {line!r}\nstdout:\n{run.stdout}"
        verdicts.append((match.group(2), match.group(1), match.group(3)))
    return verdicts


def test_probe_ran_every_check(probe_run):
    """Every check printed one line, in order, and the exit status agrees with them."""
    verdicts = _verdicts(probe_run)
    assert [name for name, _, _ in verdicts] == list(CHECKS), (
        f"exit {probe_run.returncode}\nstdout:\n{probe_run.stdout}\nstderr (tail):\n{probe_run.stderr[-6000:]}")
    failed = [name for name, verdict, _ in verdicts if verdict == "FAIL"]
    assert probe_run.returncode == (1 if failed else 0), (
        f"exit {probe_run.returncode} with failed checks {failed}\nstderr (tail):\n{probe_run.stderr[-6000:]}")


@pytest.mark.parametrize("check", CHECKS)
def test_check(probe_run, check):
    verdict = {name: (v, reason) for name, v, reason in _verdicts(probe_run)}.get(check)
    assert verdict == ("ok", None), (
        f"sarama-probe check {check}: {verdict}\nstderr (tail):\n{probe_run.stderr[-6000:]}")
