"""What the client probes' tests share (franz-go, Sarama, kafkajs): a build kept while it is newer than
its sources, a Go build into .kafgres with its module cache there too, one bounded run of the probe, and
the probe's output, one `ok NAME` or `FAIL NAME: REASON` line per check, read into per-check tests."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CHECK_LINE = re.compile(r"(ok|FAIL) ([a-z0-9-]+)(?:: (.*))?")


def build_is_current(stamp: Path, built: Path, sources: list[Path]) -> bool:
    """Whether `built` exists and `stamp` (written after a successful build) is newer than every source."""
    if not (stamp.is_file() and built.exists()):
        return False
    at = stamp.stat().st_mtime
    return all(p.stat().st_mtime <= at for p in sources)


def mark_built(stamp: Path, what: str, started: float) -> None:
    """Writes the stamp with the time the build started: a source edited during it makes the next run rebuild."""
    stamp.write_text(f"{what} built from sources as of {time.ctime(started)}\n")
    os.utime(stamp, (started, started))


def go_env(build_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GOPATH": str(build_dir / "gopath"),  # the module cache lives under it
        "GOCACHE": str(build_dir / "gocache"),
        # -mod=mod: no vendor directory (go.sum is complete, so nothing is rewritten);
        # -modcacherw: a cache that `rm -rf .kafgres` can remove; -buildvcs=false: no git stamping.
        "GOFLAGS": "-mod=mod -modcacherw -buildvcs=false",
        "GOWORK": "off",
        # The go.mod's Go version must be the installed one: never download a toolchain.
        "GOTOOLCHAIN": "local",
    }


def go_build(src: Path, build_dir: Path, binary: Path, client: str, timeout_s: float) -> Path:
    """Builds the Go module `src` into `binary` unless the build is current; fails the tests if it cannot."""
    # The official tarball's place, for a PATH that lacks it.
    go = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if go is None:
        pytest.fail(f"`go` not found on PATH: the {client} e2e tests need Go 1.26 or newer", pytrace=False)
    stamp = build_dir / "build.stamp"
    sources = [src / "go.mod", src / "go.sum", *sorted(src.rglob("*.go"))]
    if not build_is_current(stamp, binary, sources):
        build_dir.mkdir(parents=True, exist_ok=True)
        started = time.time()
        cmd = [go, "build", "-trimpath", "-o", str(binary), "."]
        try:
            result = subprocess.run(cmd, cwd=src, env=go_env(build_dir), capture_output=True, text=True,
                                    timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s", pytrace=False)
        if result.returncode != 0:
            pytest.fail(f"building {src.relative_to(src.parents[1])} failed (exit {result.returncode}):\n"
                        f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}", pytrace=False)
        mark_built(stamp, str(src.relative_to(src.parents[1])), started)
    return binary


def run_probe(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One run of a probe; fails the tests when it does not end within `timeout_s`."""
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`{shlex.join(cmd)}` did not finish within {timeout_s:.0f}s\n"
                    f"stdout:\n{e.stdout}\nstderr (tail):\n{(e.stderr or '')[-6000:]}")


def verdicts(run: subprocess.CompletedProcess) -> list[tuple[str, str, str | None]]:
    """(check, "ok" or "FAIL", reason) for every line the probe printed; any other line fails."""
    out = []
    for line in run.stdout.splitlines():
        match = CHECK_LINE.fullmatch(line)
        assert match, f"not a check line: {line!r}\nstdout:\n{run.stdout}"
        out.append((match.group(2), match.group(1), match.group(3)))
    return out


def assert_every_check_ran(run: subprocess.CompletedProcess, checks: tuple[str, ...]) -> None:
    """Every check printed one line, in order, and the exit status agrees with them."""
    found = verdicts(run)
    assert [name for name, _, _ in found] == list(checks), (
        f"exit {run.returncode}\nstdout:\n{run.stdout}\nstderr (tail):\n{run.stderr[-6000:]}")
    failed = [name for name, verdict, _ in found if verdict == "FAIL"]
    assert run.returncode == (1 if failed else 0), (
        f"exit {run.returncode} with failed checks {failed}\nstderr (tail):\n{run.stderr[-6000:]}")


def assert_check_ok(run: subprocess.CompletedProcess, probe: str, check: str) -> None:
    verdict = {name: (v, reason) for name, v, reason in verdicts(run)}.get(check)
    assert verdict == ("ok", None), f"{probe} check {check}: {verdict}\nstderr (tail):\n{run.stderr[-6000:]}"
