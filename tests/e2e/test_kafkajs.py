"""kafkajs (the Node.js client: admin, producer, consumer) against Kafgres.

tests/kafkajs is an npm package (kafkajs pinned in package.json, the lock in
package-lock.json) whose probe.js, kafkajs-probe, runs a fixed list of checks
against one new topic and prints `ok NAME` or `FAIL NAME: REASON` for each
(probe.js's comment says what each does): the cluster's metadata,
createTopics (and again), fetchTopicMetadata, describeConfigs, the idempotent
producer with gzip, fetchTopicOffsets, a group consumer with commits,
describeGroups, listGroups, fetchOffsets, a second member resuming at the
commit, transactions (a commit, an abort that a read_committed consumer must
not see and a read_uncommitted one does, offsets sent in a transaction),
deleteGroups and deleteTopics. kafkajs knows no flexible request version, so
every request goes in the old encodings (Metadata v6, Produce v7, Fetch v11,
JoinGroup v5, OffsetFetch v4…).

The session installs it with the `npm` on PATH (`npm ci`, Node 18 or newer)
into .kafgres/kafkajs: package.json and package-lock.json are copied there and
npm runs there, with its cache there too, so the checkout gets no
node_modules; kafkajs comes from the npm registry on the first install. The
install is reused while it is newer than package.json and package-lock.json;
probe.js runs from tests/kafkajs with NODE_PATH pointing at the install. The
probe runs once per session; each check is a test of its own, so a broker
bug fails the check it breaks. KAFGRES_KAFKAJS_LOG=debug puts kafkajs's debug
log (every request with its version) in the failure messages (the default is
warn).
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

from probe_checks import assert_check_ok, assert_every_check_ran, build_is_current, mark_built, run_probe
from support import REPO_ROOT

KAFKAJS_DIR = REPO_ROOT / "tests" / "kafkajs"
BUILD_DIR = Path(os.environ.get("KAFGRES_KAFKAJS_BUILD", REPO_ROOT / ".kafgres" / "kafkajs"))
PROBE_JS = KAFKAJS_DIR / "probe.js"
# Written after a successful install; the install is reused while it is newer than every source.
BUILD_STAMP = BUILD_DIR / "install.stamp"
# What `npm ci` installs from; probe.js is read where it is and needs no install.
INSTALL_SOURCES = ("package.json", "package-lock.json")
NODE_MAJOR_MIN = 18

# A first install downloads kafkajs (one package, no dependencies).
INSTALL_TIMEOUT_S = 300.0
# The probe bounds each of its 20 checks by 20 s; a healthy run takes about 15 s.
PROBE_TIMEOUT_S = 480.0

# What kafkajs-probe prints, in order: one line per check.
CHECKS = (
    "cluster",
    "create-topic",
    "create-topic-again",
    "describe-topic-configs",
    "produce-gzip-idempotent",
    "fetch-topic-offsets",
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
    "delete-groups",
    "delete-topics",
)


def _install_is_current() -> bool:
    installed = BUILD_DIR / "node_modules" / "kafkajs" / "package.json"
    return build_is_current(BUILD_STAMP, installed, [KAFKAJS_DIR / name for name in INSTALL_SOURCES])


def _npm_env() -> dict[str, str]:
    return {
        **os.environ,
        "npm_config_cache": str(BUILD_DIR / "npm-cache"),  # a cache that `rm -rf .kafgres` removes
        "npm_config_update_notifier": "false",
    }


def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


@pytest.fixture(scope="session")
def node() -> str:
    """The `node` that runs the probe, once tests/kafkajs is installed; fails every test here if it cannot be."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(f"`node` or `npm` not found on PATH (node={node}, npm={npm}): the kafkajs e2e tests need "
                    f"Node.js {NODE_MAJOR_MIN} or newer with npm (Debian: apt-get install nodejs npm)", pytrace=False)
    major = _node_major(node)
    if major is None or major < NODE_MAJOR_MIN:
        pytest.fail(f"{node} is Node.js {major}: the kafkajs e2e tests need {NODE_MAJOR_MIN} or newer", pytrace=False)
    if not _install_is_current():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        started = time.time()  # a source edited during the install makes the next session reinstall
        for name in INSTALL_SOURCES:
            shutil.copy2(KAFKAJS_DIR / name, BUILD_DIR / name)
        cmd = [npm, "ci", "--no-audit", "--no-fund"]
        try:
            result = subprocess.run(cmd, cwd=BUILD_DIR, env=_npm_env(), capture_output=True, text=True,
                                    timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` in {BUILD_DIR} did not finish within {INSTALL_TIMEOUT_S:.0f}s",
                        pytrace=False)
        if result.returncode != 0:
            pytest.fail(f"installing tests/kafkajs failed (`{shlex.join(cmd)}` in {BUILD_DIR}, exit "
                        f"{result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}", pytrace=False)
        mark_built(BUILD_STAMP, "tests/kafkajs", started)
    return node


@pytest.fixture(scope="module")
def probe_run(node, bootstrap) -> subprocess.CompletedProcess:
    """One run of kafkajs-probe against a new topic; its output is what every test here reads."""
    topic = f"e2e-kafkajs-{uuid.uuid4().hex[:10]}"
    cmd = [node, str(PROBE_JS), "--log", os.environ.get("KAFGRES_KAFKAJS_LOG", "warn"), bootstrap, topic]
    env = {**os.environ, "NODE_PATH": str(BUILD_DIR / "node_modules")}
    return run_probe(cmd, PROBE_TIMEOUT_S, env)


def test_probe_ran_every_check(probe_run):
    """Every check printed one line, in order, and the exit status agrees with them."""
    assert_every_check_ran(probe_run, CHECKS)


@pytest.mark.parametrize("check", CHECKS)
def test_check(probe_run, check):
    assert_check_ok(probe_run, "kafkajs-probe", check)
