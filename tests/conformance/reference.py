"""The reference broker: Apache Kafka 4.4.0, one node, KRaft, from Maven Central's jars.

It is scripts/bench's `KafkaBroker` (apache_kafka.py: the same classpath,
settings and JVM flags as the benchmark's Kafka, but for the benchmark's
`log.segment.delete.delay.ms`, which DescribeConfigs would show: here every
setting a client can see is Kafka's default) on its own ports, 19092 for
clients and 19093 for the controller (KAFGRES_REFERENCE_PORT moves both),
with its home in a fresh temporary directory. `ReferenceKafka` is a context
manager: whatever happens, the broker is stopped (SIGTERM, SIGKILL after 30 s),
its server log copied to .kafgres/conformance/kafka-server.log and the
temporary directory removed. The JVM also gets SIGTERM from the kernel if the
Python process that started it dies (`die_with_parent`), so a killed test run
leaves no broker behind.

The version is `REFERENCE_KAFKA_VERSION` (KAFGRES_REFERENCE_KAFKA_VERSION
overrides it): the newest Kafka, while the e2e suite keeps testing the 4.1.1
clients and the benchmarks compare with the Kafka their page names. Its
classpath (.kafgres/conformance/kafka-<version>/classpath.txt) is resolved with
Maven from scripts/bench/pom.xml at that version when it is missing or older
than the pom (scripts/bench/apache_kafka.py's `resolve_classpath`).

KAFGRES_REFERENCE_BOOTSTRAP=host:port uses an Apache Kafka that is already
running instead (nothing is started or stopped): handy while writing a
scenario, with `python tests/conformance/reference.py` serving one until ^C.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = REPO_ROOT / ".kafgres" / "conformance"
BENCH_DIR = REPO_ROOT / "scripts" / "bench"
REFERENCE_KAFKA_VERSION = os.environ.get("KAFGRES_REFERENCE_KAFKA_VERSION", "4.4.0")
# Relative to the repository root, as KafkaBroker.classpath_file is.
CLASSPATH_PATH = f".kafgres/conformance/kafka-{REFERENCE_KAFKA_VERSION}/classpath.txt"
DEFAULT_PORT = 19092
SERVE_S = 3600

sys.path.insert(0, str(BENCH_DIR))
# scripts/bench is not a package.
from apache_kafka import KafkaBroker, port_open, resolve_classpath  # noqa: E402


class ConformanceKafkaBroker(KafkaBroker):
    """The benchmark's broker with Kafka's defaults for everything clients can observe."""

    BENCHMARK_ONLY = ("log.segment.delete.delay.ms=",)
    classpath_file = CLASSPATH_PATH

    def server_properties(self, data_dir: Path) -> str:
        lines = super().server_properties(data_dir).splitlines()
        kept = [line for line in lines if not line.startswith(self.BENCHMARK_ONLY)]
        return "\n".join(kept) + "\n"


def ensure_classpath() -> None:
    """Resolves the reference Kafka's runtime classpath from Maven Central unless it is current."""
    resolve_classpath(REPO_ROOT, REFERENCE_KAFKA_VERSION, CLASSPATH_PATH)


class ReferenceKafka:
    """`with ReferenceKafka() as bootstrap:` a running Apache Kafka for the block's duration."""

    # What a subclass changes: the broker's setup, where its server log is kept, and the variable that
    # names an already running broker to use instead (None: always start one).
    broker_class = ConformanceKafkaBroker
    log_name = "kafka-server.log"
    external_env: str | None = "KAFGRES_REFERENCE_BOOTSTRAP"

    def __init__(self, port: int | None = None):
        self.port = port or int(os.environ.get("KAFGRES_REFERENCE_PORT", DEFAULT_PORT))
        self.external = os.environ.get(self.external_env) if self.external_env else None
        self.broker: KafkaBroker | None = None
        self.home: Path | None = None
        self.version = ""
        self.start_s = 0.0

    def __enter__(self) -> str:
        if self.external:
            return self.external
        ensure_classpath()
        self.home = Path(tempfile.mkdtemp(prefix="kafgres-conformance-kafka-"))
        self.broker = self.broker_class(REPO_ROOT, self.home, self.port, self.port + 1, die_with_parent=True)
        started = time.monotonic()
        try:
            self.broker.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.start_s = time.monotonic() - started
        self.version = self.broker.version
        return self.broker.bootstrap

    def __exit__(self, *exc) -> None:
        if self.broker is not None:
            try:
                self.broker.stop()
            finally:
                log = self.home / "server.log" if self.home else None
                if log is not None and log.is_file():
                    STATE_DIR.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(log, STATE_DIR / self.log_name)
                self.broker = None
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


def main() -> None:
    """Serves a reference Kafka until interrupted, for an hour at most (for writing scenarios)."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with ReferenceKafka() as bootstrap:
        print(f"Apache Kafka listening on {bootstrap} for an hour; ^C (or SIGTERM) stops it", flush=True)
        host, port = bootstrap.rsplit(":", 1)
        deadline = time.monotonic() + SERVE_S
        try:
            while time.monotonic() < deadline and port_open(host, int(port)):
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
