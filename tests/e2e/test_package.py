"""The Debian package (docs/operations.md, "Installing from the Debian package").

`scripts/package-deb.sh` builds `kafgres_<version>-pg15_<arch>.deb` from this
checkout (reusing the release build of `./kafgres start`); the test checks
its fields and contents, that the library needs nothing but the C runtime (no
Rust on the target machine), installs it with `apt-get install ./...deb` as a
user would, and starts a throwaway cluster of its own (Postgres on
127.0.0.1:5489, Kafka on 127.0.0.1:9489) on the installed files: CREATE
EXTENSION, a produced record read back.

The package stays installed: its files are the ones `./kafgres start`
installs from the same checkout (removing it would delete the library the dev
cluster runs on). Every wait has a deadline.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support import ThrowawayCluster, port_is_free, produce_all

PG_PORT = 5489
KAFKA_PORT = 9489
PACKAGE = "postgresql-15-kafgres"


def run(*cmd: str, timeout_s: float = 120.0, **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def deb(kafgres, tmp_path_factory) -> Path:
    if os.geteuid() != 0:
        pytest.fail("this test must run as root (it installs a package)")
    out = tmp_path_factory.mktemp("deb")
    path = Path(run(str(kafgres.root / "scripts" / "package-deb.sh"), str(out), timeout_s=1800).strip().splitlines()[-1])
    assert path.is_file() and re.fullmatch(r"kafgres_[0-9.]+-pg15_[a-z0-9]+\.deb", path.name), path
    return path


def test_the_package_installs_with_apt_and_serves_a_fresh_cluster(deb: Path):
    fields = {name: run("dpkg-deb", "--field", str(deb), name).strip() for name in ("Package", "Depends", "Version")}
    assert fields["Package"] == PACKAGE
    assert "postgresql-15" in fields["Depends"]
    contents = run("dpkg-deb", "--contents", str(deb))
    for expected in ("/usr/lib/postgresql/15/lib/kafgres.so", "/usr/share/postgresql/15/extension/kafgres.control",
                     f"/usr/share/postgresql/15/extension/kafgres--{fields['Version']}.sql",
                     "/usr/share/postgresql/15/extension/kafgres--0.1.0.sql",
                     "/usr/share/postgresql/15/extension/kafgres--0.1.0--0.2.0.sql"):
        assert f".{expected}\n" in contents, f"{expected} is not in the package:\n{contents}"

    extracted = deb.parent / "extracted"
    run("dpkg-deb", "--extract", str(deb), str(extracted))
    needed = run("ldd", str(extracted / "usr/lib/postgresql/15/lib/kafgres.so"))
    libraries = {line.split()[0] for line in needed.splitlines() if line.strip()}
    allowed = re.compile(r"linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|lib(c|m|gcc_s|pthread|dl|rt)\.so\.[0-9]+")
    assert all(allowed.fullmatch(lib) for lib in libraries), f"the library needs more than the C runtime: {libraries}"

    run("apt-get", "install", "-y", "--reinstall", str(deb), timeout_s=300,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    status = run("dpkg-query", "--show", "--showformat=${Status} ${Version}", PACKAGE)
    assert status == f"install ok installed {fields['Version']}", status
    assert PACKAGE in run("dpkg", "--search", "/usr/lib/postgresql/15/lib/kafgres.so")

    for port in (PG_PORT, KAFKA_PORT):
        assert port_is_free(port), f"port {port} is in use: is a package-test cluster from an earlier run still up?"
    cluster = ThrowawayCluster("package", PG_PORT, KAFKA_PORT)
    try:
        cluster.init({})
        cluster.start()
        cluster.sql("CREATE EXTENSION kafgres")
        cluster.wait_until_serving(60)
        cluster.sql("SELECT kafgres.create_topic('packaged', 1)")
        assert cluster.sql("SELECT extversion FROM pg_extension WHERE extname = 'kafgres'") == [(fields["Version"],)]
        produce_all(Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}),
                    [dict(topic="packaged", partition=0, value=b"from the package")])
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "packaged", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("packaged", 0, 0)])
            deadline, message = time.monotonic() + 30, None
            while message is None and time.monotonic() < deadline:
                polled = consumer.poll(0.5)
                if polled is not None and polled.error() is None:
                    message = polled
            assert message is not None and message.value() == b"from the package"
        finally:
            consumer.close()
    finally:
        cluster.destroy()
