"""Apache Kafka 4.x as a single-node KRaft broker, from Maven Central's jars.

No Kafka distribution is downloaded: scripts/bench/pom.xml resolves the
runtime classpath of `kafka_2.13` (the server, `kafka.Kafka`, and the storage
tool, `kafka.tools.StorageTool`) into .kafgres/bench/kafka-lib/classpath.txt.
The broker is started the way bin/kafka-server-start.sh starts it: a 1 GiB
heap (-Xms1G -Xmx1G) and the JVM flags of kafka-run-class.sh. Its settings
are Kafka's defaults except what a one-node KRaft broker on loopback needs
(roles, listeners, replication factors of the internal topics) and
`log.segment.delete.delay.ms=1000`, so a deleted benchmark topic frees its
disk space within a second instead of a minute. Every run formats a fresh
data directory; the process is stopped (SIGTERM, then SIGKILL after 30 s)
and the data removed when the comparison ends, whatever happened.

Another Kafka version runs from its own classpath file: `resolve_classpath`
has Maven resolve the same pom at that version into another directory
(`-Dkafka.version`, `-Dkafgres.bench.dir`), and the broker takes that file
(`classpath_file`); scripts/bench/share_bench.py runs Kafka 4.4.0 that way,
next to the 4.1.1 of the other benchmarks.

Also the reference broker of tests/conformance, which passes
`die_with_parent=True`: the kernel sends the broker SIGTERM when the Python
process that started it dies, even by SIGKILL (Linux PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import base64
import ctypes
import shutil
import subprocess
import signal
import socket
import time
import uuid
from pathlib import Path

# kafka-server-start.sh's default heap and kafka-run-class.sh's default JVM flags.
JVM_FLAGS = [
    "-Xms1G",
    "-Xmx1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
MAVEN_TIMEOUT_S = 900
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def terminate(process: subprocess.Popen | None, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stops a JVM the way its scripts do: SIGTERM, then SIGKILL after `timeout_s`. True if it had to be killed."""
    if process is None or process.poll() is not None:
        return False
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        return True


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def resolve_classpath(root: Path, version: str, classpath_file: str) -> None:
    """Writes the runtime classpath of Kafka `version` (scripts/bench/pom.xml at that version) to
    `classpath_file` (relative to `root`), unless it is there, newer than the pom, and its jars exist."""
    pom = root / "scripts/bench/pom.xml"
    path = root / classpath_file
    if path.is_file() and path.stat().st_mtime >= pom.stat().st_mtime:
        if all(Path(jar).is_file() for jar in path.read_text().strip().split(":") if jar):
            return
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise RuntimeError("Apache Kafka's jars need Java 17+ and Maven (Debian: openjdk-17-jdk-headless maven)")
    subprocess.run(["mvn", "-B", "-q", "-f", str(pom), f"-Dkafka.version={version}",
                    f"-Dkafgres.bench.dir={path.parent}", "dependency:build-classpath"], check=True,
                   stdout=subprocess.DEVNULL, timeout=MAVEN_TIMEOUT_S)


class KafkaBroker:
    # Where Maven wrote the broker's runtime classpath, under the repository root; the reference diff's
    # broker (tests/conformance/reference.py) resolves another Kafka version into its own file.
    classpath_file = ".kafgres/bench/kafka-lib/classpath.txt"

    def __init__(self, root: Path, home: Path, port: int, controller_port: int, die_with_parent: bool = False,
                 classpath_file: str | None = None):
        self.root = root
        if classpath_file is not None:
            self.classpath_file = classpath_file
        self.die_with_parent = die_with_parent
        self.home = home
        self.port = port
        self.controller_port = controller_port
        self.process: subprocess.Popen | None = None
        self.version = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.poll() is None else None

    def classpath(self) -> str:
        path = self.root / self.classpath_file
        text = path.read_text().strip()
        jars = text.split(":")
        server = next((j for j in jars if "/kafka_2.13-" in j), "")
        self.version = server.rsplit("kafka_2.13-", 1)[-1].removesuffix(".jar")
        return text

    def server_properties(self, data_dir: Path) -> str:
        return "\n".join(
            [
                "# Written by scripts/bench/kafka.py: Kafka's defaults but for what a",
                "# single-node KRaft broker on loopback needs.",
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={data_dir}",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "log.segment.delete.delay.ms=1000",
                "",
            ]
        )

    def java(self, classpath: str, *args: str, heap: bool = False) -> list[str]:
        flags = JVM_FLAGS if heap else ["-Xmx256m", "-XX:TieredStopAtLevel=1"]
        return [
            "java",
            *flags,
            f"-Dkafka.logs.dir={self.home}",
            f"-Dlog4j2.configurationFile={self.root / 'scripts/bench/kafka-log4j2.properties'}",
            "-cp",
            classpath,
            *args,
        ]

    def start(self) -> None:
        for port in (self.port, self.controller_port):
            if port_open("127.0.0.1", port):
                raise RuntimeError(f"127.0.0.1:{port} is already in use; is another Kafka running?")
        classpath = self.classpath()
        data_dir = self.data_dir
        shutil.rmtree(data_dir, ignore_errors=True)
        self.home.mkdir(parents=True, exist_ok=True)
        properties = self.home / "server.properties"
        properties.write_text(self.server_properties(data_dir))
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        subprocess.run(
            # `--cluster-id=…` in one argument: an id starting with '-' (1 in 64) would read as an option.
            self.java(classpath, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c",
                      str(properties)),
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=120,
        )
        self.launch()

    def launch(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Starts the broker on the data directory as it is (`start` formats a fresh one first) and waits
        until it listens; a relaunch after `stop_keeping_data` or `kill` recovers what the last run left."""
        classpath = self.classpath()
        properties = self.home / "server.properties"
        stdout = open(self.home / "stdout.log", "a")
        self.process = subprocess.Popen(
            self.java(classpath, "kafka.Kafka", str(properties), heap=True),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )
        deadline = time.monotonic() + timeout_s
        while not port_open("127.0.0.1", self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}; see {self.home}/server.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not listen on {self.bootstrap} within {timeout_s:.0f} s")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stops the broker and removes its data (the logs stay in `home`)."""
        terminate(self.process)
        shutil.rmtree(self.home / "data", ignore_errors=True)

    def stop_keeping_data(self) -> bool:
        """SIGTERM (a controlled shutdown), SIGKILL after STOP_TIMEOUT_S; True if it had to be killed."""
        return terminate(self.process)

    def kill(self) -> None:
        """SIGKILL, as a crash: the next `launch` recovers the logs."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)
