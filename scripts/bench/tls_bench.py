"""What TLS costs: produce throughput and sync latency over SSL and SASL_SSL against PLAINTEXT,
Kafgres next to Apache Kafka with the same certificate, in one run (issue 20's figures).

    scripts/bench/tls_bench.py [--rounds 3] [--seconds 10]

Needs what `./kafgres bench` prepares (scripts/bench-compare.sh: Kafka's jars under
.kafgres/bench/kafka-lib, a kafgres-bench built with OpenSSL) and the cluster of `./kafgres
start`. It makes a CA and a server certificate for 127.0.0.1 with openssl; gives the Kafgres
cluster an SSL listener on 127.0.0.1:9093 and a SASL_SSL one on 127.0.0.1:9094 with that
certificate (ALTER SYSTEM, restart) and a login role for SCRAM-SHA-256, and puts the settings
back and drops the role at the end; and starts Kafka 4.x (KRaft, one node) with PLAINTEXT on
127.0.0.1:29092, SSL on 29093 and SASL_SSL (SCRAM-SHA-256, the same user) on 29095, the same
certificate as a PEM keystore. Each round runs, on each broker and transport, the workloads of
`./kafgres bench` that the issue names: produce 1 KiB and 256 KiB (one producer, acks=all; 1 KiB
with four producers too, each its own librdkafka client and connection, so that one client's TLS
is not all that is measured) and sync send p50 (100 B). Prints one line per run and the medians,
with each broker's TLS cost: SSL and SASL_SSL over PLAINTEXT, and the broker's CPU time per GB
produced over each.

The VM's memory is settled first (host_memory.py: no host faults on fresh page-cache pages);
--keep-page-reporting runs the machine as it is.

The flush policy is what the cluster runs (fsync by default); Kafka runs with its defaults
(page cache), as in the `relaxed` mode of the comparison, unless --strict adds flush.messages=1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_memory  # noqa: E402
from apache_kafka import KafkaBroker  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402
from runs import Broker, run_bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFGRES_SSL_PORT, KAFGRES_SASL_SSL_PORT = 9093, 9094
KAFKA_PORT, KAFKA_SSL_PORT, KAFKA_CONTROLLER_PORT, KAFKA_SASL_SSL_PORT = 29092, 29093, 29094, 29095
TRANSPORTS = ("PLAINTEXT", "SSL", "SASL_SSL")
# The SASL_SSL clients' user: a Postgres login role on Kafgres, a SCRAM credential written at format time on Kafka.
BENCH_USER, BENCH_PASSWORD = "tls_bench", "tls-bench-secret"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(dir: Path) -> dict[str, Path]:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench CA",
            "-keyout", "ca.key", "-out", "ca.crt", cwd=dir)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=bench broker", "-keyout", "server.key",
            "-out", "server.csr", cwd=dir)
    (dir / "server.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "server.ext", "-out", "server.crt", cwd=dir)
    # Kafka's PEM keystore: the (unencrypted PKCS#8) key and the chain in one file.
    (dir / "keystore.pem").write_text((dir / "server.key").read_text() + (dir / "server.crt").read_text())
    for name in ("server.key", "server.crt"):
        os.chmod(dir / name, 0o644)
    return {"ca": dir / "ca.crt", "cert": dir / "server.crt", "key": dir / "server.key",
            "keystore": dir / "keystore.pem"}


class TlsKafka(KafkaBroker):
    def __init__(self, home: Path, keystore: Path, strict: bool):
        super().__init__(ROOT, home, KAFKA_PORT, KAFKA_CONTROLLER_PORT, die_with_parent=True)
        self.keystore = keystore
        self.strict = strict

    def server_properties(self, data_dir: Path) -> str:
        lines = super().server_properties(data_dir).splitlines()
        out = []
        for line in lines:
            served = (f"PLAINTEXT://127.0.0.1:{KAFKA_PORT},SSL://127.0.0.1:{KAFKA_SSL_PORT},"
                      f"SASL_SSL://127.0.0.1:{KAFKA_SASL_SSL_PORT}")
            if line.startswith("listeners="):
                line = f"listeners={served},CONTROLLER://127.0.0.1:{KAFKA_CONTROLLER_PORT}"
            elif line.startswith("advertised.listeners="):
                line = f"advertised.listeners={served}"
            elif line.startswith("listener.security.protocol.map="):
                line = ("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                        "CONTROLLER:PLAINTEXT")
            out.append(line)
        out += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.keystore}", "ssl.client.auth=none",
                "sasl.enabled.mechanisms=SCRAM-SHA-256",
                "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                # A deleted topic's files go within a second, and retention runs every 2 s: at over a GB/s
                # the defaults (60 s, 5 min) let the runs fill the disk.
                "file.delete.delay.ms=1000", "log.retention.check.interval.ms=2000", ""]
        return "\n".join(out)

    def java(self, classpath: str, *args: str, heap: bool = False) -> list[str]:
        if args and args[0] == "kafka.tools.StorageTool":
            args = (*args, "--add-scram", f"SCRAM-SHA-256=[name={BENCH_USER},password={BENCH_PASSWORD}]")
        return super().java(classpath, *args, heap=heap)


def client_settings(transport: str, ca: Path) -> list[str]:
    """kafgres-bench's librdkafka settings for a transport."""
    tls = ["--set", f"security.protocol={transport}", "--set", f"ssl.ca.location={ca}"]
    if transport == "SSL":
        return tls
    if transport == "SASL_SSL":
        return [*tls, "--set", "sasl.mechanism=SCRAM-SHA-256", "--set", f"sasl.username={BENCH_USER}",
                "--set", f"sasl.password={BENCH_PASSWORD}"]
    return []


def workloads(seconds: int) -> list[tuple[str, int, list[str], str]]:
    """(name, partitions, kafgres-bench arguments, the figure it reports)."""
    produce = ["--seconds", str(seconds), "--acks", "all"]
    return [
        ("produce-1k", 1, ["produce", "--size", "1024", "--producers", "1", *produce], "records_per_s"),
        ("produce-1k-4p", 4, ["produce", "--size", "1024", "--producers", "4", *produce], "records_per_s"),
        ("produce-256k", 1, ["produce", "--size", "262144", "--producers", "1", *produce], "mb_per_s"),
        ("sync-p50", 1, ["sync", "--count", "1000", "--warmup", "100", "--size", "100"], "p50"),
    ]


def cpu_per_gb(run) -> float | None:
    """The broker's CPU seconds per GB a produce run moved."""
    mb_per_s, seconds = run.fields.get("mb_per_s"), run.fields.get("seconds")
    if run.broker_cpu_s is None or not isinstance(mb_per_s, float) or not isinstance(seconds, float):
        return None
    gb = mb_per_s * seconds / 1000
    return run.broker_cpu_s / gb if gb > 0 else None


def wait_for_files_gone(data_dir: Path, topic: str, timeout_s: float = 120.0) -> None:
    """Waits until Kafka has removed a deleted topic's partition directories (it renames them, then
    deletes them after file.delete.delay.ms), so the next run has the disk space back."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(entry.name.startswith(f"{topic}-") for entry in data_dir.iterdir()):
            return
        time.sleep(0.5)
    print(f"[tls-bench] Kafka still holds files of {topic} after {timeout_s:.0f} s", flush=True)


def say_memory(text: str) -> None:
    print(f"[host_memory] {text}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--strict", action="store_true", help="Kafka topics with flush.messages=1")
    parser.add_argument("--keep-page-reporting", action="store_true",
                        help="leave the VM's free page reporting on (host_memory.py)")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    state = ROOT / ".kafgres/bench/tls"
    state.mkdir(parents=True, exist_ok=True)
    cert_dir = Path(tempfile.mkdtemp(prefix="tls-bench-", dir=state))
    os.chmod(cert_dir, 0o755)  # the broker reads the files as the postgres user
    certs = make_certificates(cert_dir)

    cluster = KafgresCluster(ROOT)
    cluster.psql(f"ALTER SYSTEM SET kafgres.listeners = "
                 f"'SSL://127.0.0.1:{KAFGRES_SSL_PORT},SASL_SSL://127.0.0.1:{KAFGRES_SASL_SSL_PORT}'")
    cluster.psql(f"DROP ROLE IF EXISTS {BENCH_USER}; SET password_encryption = 'scram-sha-256'; "
                 f"CREATE ROLE {BENCH_USER} LOGIN PASSWORD '{BENCH_PASSWORD}'")
    cluster.psql(f"ALTER SYSTEM SET kafgres.ssl_cert_file = '{certs['cert']}'")
    cluster.psql(f"ALTER SYSTEM SET kafgres.ssl_key_file = '{certs['key']}'")
    kafka = TlsKafka(state / "kafka", certs["keystore"], args.strict)
    results: dict[tuple[str, str, str], list[float]] = {}
    cpu: dict[tuple[str, str, str], list[float]] = {}
    with host_memory.settled(not args.keep_page_reporting, say_memory):
        measure(args, cluster, kafka, certs, results, cpu)

    print_table(args, results, cpu)
    return 0


def print_table(args: argparse.Namespace, results: dict[tuple[str, str, str], list[float]],
                cpu: dict[tuple[str, str, str], list[float]]) -> None:
    """Medians: each transport's figure, SSL and SASL_SSL over PLAINTEXT, and broker CPU per GB."""
    def median(values: list[float] | None, digits: int) -> str:
        return f"{statistics.median(values):,.{digits}f}" if values else "(missing)"

    def ratio(key: str, name: str, transport: str) -> str:
        plain, secured = results.get((key, name, "PLAINTEXT")), results.get((key, name, transport))
        return f"{statistics.median(secured) / statistics.median(plain):.2f}" if plain and secured else ""

    print("\n| workload | broker | PLAINTEXT | SSL | SASL_SSL | SSL / PLAINTEXT | SASL_SSL / PLAINTEXT "
          "| broker CPU s/GB: PLAINTEXT | SSL | SASL_SSL |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, _, _, metric in workloads(args.seconds):
        for name in ("kafgres", "kafka"):
            digits = 3 if metric == "p50" else 2
            figures = " | ".join(median(results.get((key, name, t)), digits) for t in TRANSPORTS)
            cpu_cells = " | ".join(median(cpu.get((key, name, t)), 2) if cpu.get((key, name, t)) else ""
                                   for t in TRANSPORTS)
            print(f"| {key} ({metric}) | {name} | {figures} | {ratio(key, name, 'SSL')} "
                  f"| {ratio(key, name, 'SASL_SSL')} | {cpu_cells} |")


def measure(args: argparse.Namespace, cluster: KafgresCluster, kafka: TlsKafka, certs: dict[str, Path],
            results: dict[tuple[str, str, str], list[float]], cpu: dict[tuple[str, str, str], list[float]]) -> None:
    """Every round on both brokers and transports; each run's figure into `results`, its broker CPU
    per GB into `cpu`."""
    try:
        cluster.restart()
        kafka.start()
        kafgres_pid = cluster.worker_pid
        sides = [
            ("kafgres", "PLAINTEXT", Broker("kafgres", cluster.bootstrap, kafgres_pid)),
            ("kafgres", "SSL", Broker("kafgres", f"127.0.0.1:{KAFGRES_SSL_PORT}", kafgres_pid)),
            ("kafgres", "SASL_SSL", Broker("kafgres", f"127.0.0.1:{KAFGRES_SASL_SSL_PORT}", kafgres_pid)),
            ("kafka", "PLAINTEXT", Broker("kafka", kafka.bootstrap, lambda: kafka.pid)),
            ("kafka", "SSL", Broker("kafka", f"127.0.0.1:{KAFKA_SSL_PORT}", lambda: kafka.pid)),
            ("kafka", "SASL_SSL", Broker("kafka", f"127.0.0.1:{KAFKA_SASL_SSL_PORT}", lambda: kafka.pid)),
        ]
        for round_index in range(args.rounds):
            for key, partitions, command, metric in workloads(args.seconds):
                for name, transport, broker in sides:
                    topic = f"tls-bench-{key}-{transport.lower()}-{round_index}"
                    # Each topic keeps at most about 1.25 GiB: at a GB/s, unbounded runs filled the disk.
                    cmd = [args.bench_bin, command[0], "--bootstrap", broker.bootstrap, "--topic", topic,
                           "--create-partitions", str(partitions), "--topic-config", "segment.bytes=268435456",
                           "--topic-config", "retention.bytes=1073741824", *command[1:]]
                    if name == "kafka" and args.strict:
                        cmd += ["--topic-config", "flush.messages=1"]
                    cmd += client_settings(transport, certs["ca"])
                    run = run_bench(cmd, workload=key, broker=broker, mode=transport, round_index=round_index,
                                    timeout_s=args.seconds * 6 + 60, log_path=ROOT / ".kafgres/bench/tls" / f"{topic}-{name}.log")
                    value = run.fields.get(metric)
                    per_gb = cpu_per_gb(run) if run.ok else None
                    print(f"[tls-bench] round {round_index + 1} {key:<13} {name:<8} {transport:<9} "
                          f"{metric}={value} (broker CPU {run.broker_cpu_s:.1f} s"
                          + (f", {per_gb:.2f} s per GB)" if per_gb is not None else ")")
                          if run.ok and run.broker_cpu_s is not None else
                          f"[tls-bench] round {round_index + 1} {key} {name} {transport} FAILED: {run.stderr_tail}",
                          flush=True)
                    if run.ok and isinstance(value, float):
                        results.setdefault((key, name, transport), []).append(value)
                    if per_gb is not None:
                        cpu.setdefault((key, name, transport), []).append(per_gb)
                    # Deleted through the broker's PLAINTEXT listener: delete-topics speaks no TLS.
                    plaintext = cluster.bootstrap if name == "kafgres" else kafka.bootstrap
                    subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", plaintext, topic],
                                   capture_output=True, timeout=60)
                    if name == "kafka":
                        wait_for_files_gone(kafka.data_dir, topic)
    finally:
        kafka.stop()
        for setting in ("kafgres.listeners", "kafgres.ssl_cert_file", "kafgres.ssl_key_file"):
            cluster.psql(f"ALTER SYSTEM RESET {setting}")
        cluster.restart()
        cluster.psql(f"DROP ROLE IF EXISTS {BENCH_USER}")


if __name__ == "__main__":
    sys.exit(main())
