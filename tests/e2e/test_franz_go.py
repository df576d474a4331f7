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
import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support import REPO_ROOT

FRANZ_DIR = REPO_ROOT / "tests" / "franz"
BUILD_DIR = Path(os.environ.get("KAFGRES_FRANZ_BUILD", REPO_ROOT / ".kafgres" / "franz"))
PROBE_BIN = BUILD_DIR / "franz-probe"
# Written after a successful build; the build is reused while it is newer than every source.
BUILD_STAMP = BUILD_DIR / "build.stamp"

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
CHECK_LINE = re.compile(r"(ok|FAIL) ([a-z0-9-]+)(?:: (.*))?")


def _sources() -> list[Path]:
    return [FRANZ_DIR / "go.mod", FRANZ_DIR / "go.sum", *sorted(FRANZ_DIR.rglob("*.go"))]


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
def franz_build() -> Path:
    """Builds tests/franz unless the build is current; fails every test here if it cannot."""
    # The official tarball's place, for a PATH that lacks it.
    go = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if go is None:
        pytest.fail("`go` not found on PATH: the franz-go e2e tests need Go 1.26 or newer", pytrace=False)
    if not _build_is_current():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        started = time.time()  # a source edited during the build makes the next session rebuild
        cmd = [go, "build", "-trimpath", "-o", str(PROBE_BIN), "."]
        try:
            result = subprocess.run(cmd, cwd=FRANZ_DIR, env=_go_env(), capture_output=True, text=True,
                                    timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {BUILD_TIMEOUT_S:.0f}s", pytrace=False)
        if result.returncode != 0:
            pytest.fail(f"building tests/franz failed (exit {result.returncode}):\n"
                        f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}", pytrace=False)
        BUILD_STAMP.write_text(f"tests/franz built from sources as of {time.ctime(started)}\n")
        os.utime(BUILD_STAMP, (started, started))
    return PROBE_BIN


@pytest.fixture(scope="module")
def probe_run(franz_build, bootstrap) -> subprocess.CompletedProcess:
    """One run of franz-probe against a new topic; its output is what every test here reads."""
    topic = f"e2e-franz-{uuid.uuid4().hex[:10]}"
    cmd = [str(franz_build), "-log", os.environ.get("KAFGRES_FRANZ_LOG", "warn"), bootstrap, topic]
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
        f"franz-probe check {check}: {verdict}\nstderr (tail):\n{probe_run.stderr[-6000:]}")
