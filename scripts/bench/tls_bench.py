"""What TLS costs: produce throughput and sync latency over SSL against PLAINTEXT, Kafgres
next to Apache Kafka with the same certificate, in one run (issue 20's figures).

    scripts/bench/tls_bench.py [--rounds 3] [--seconds 10]

Needs what `./kafgres bench` prepares (scripts/bench-compare.sh: Kafka's jars under
.kafgres/bench/kafka-lib, a kafgres-bench built with OpenSSL) and the cluster of `./kafgres
start`. It makes a CA and a server certificate for 127.0.0.1 with openssl; gives the Kafgres
cluster an SSL listener on 127.0.0.1:9093 with that certificate (ALTER SYSTEM, restart), and
puts the settings back at the end; and starts Kafka 4.x (KRaft, one node) with PLAINTEXT on
127.0.0.1:29092 and SSL on 127.0.0.1:29093, the same certificate as a PEM keystore. Each round
runs, on each broker and transport, the workloads of `./kafgres bench` that the issue names:
produce 1 KiB and 256 KiB (one producer, acks=all) and sync send p50 (100 B). Prints one line
per run and the medians, with each broker's TLS cost (SSL / PLAINTEXT).

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apache_kafka import KafkaBroker  # noqa: E402
from kafgres_cluster import KafgresCluster  # noqa: E402
from runs import Broker, run_bench  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KAFGRES_SSL_PORT = 9093
KAFKA_PORT, KAFKA_SSL_PORT, KAFKA_CONTROLLER_PORT = 29092, 29093, 29094


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
            if line.startswith("listeners="):
                line = (f"listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},SSL://127.0.0.1:{KAFKA_SSL_PORT},"
                        f"CONTROLLER://127.0.0.1:{KAFKA_CONTROLLER_PORT}")
            elif line.startswith("advertised.listeners="):
                line = f"advertised.listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},SSL://127.0.0.1:{KAFKA_SSL_PORT}"
            elif line.startswith("listener.security.protocol.map="):
                line = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"
            out.append(line)
        out += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.keystore}", "ssl.client.auth=none", ""]
        return "\n".join(out)


def workloads(seconds: int) -> list[tuple[str, list[str], str]]:
    produce = ["--producers", "1", "--seconds", str(seconds), "--acks", "all"]
    return [
        ("produce-1k", ["produce", "--size", "1024", *produce], "records_per_s"),
        ("produce-256k", ["produce", "--size", "262144", *produce], "mb_per_s"),
        ("sync-p50", ["sync", "--count", "1000", "--warmup", "100", "--size", "100"], "p50"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--strict", action="store_true", help="Kafka topics with flush.messages=1")
    parser.add_argument("--bench-bin", default=os.environ.get("KAFGRES_BENCH_BIN",
                                                              str(ROOT / "target/release/kafgres-bench")))
    args = parser.parse_args()
    state = ROOT / ".kafgres/bench/tls"
    state.mkdir(parents=True, exist_ok=True)
    cert_dir = Path(tempfile.mkdtemp(prefix="tls-bench-", dir=state))
    os.chmod(cert_dir, 0o755)  # the broker reads the files as the postgres user
    certs = make_certificates(cert_dir)

    cluster = KafgresCluster(ROOT)
    cluster.psql(f"ALTER SYSTEM SET kafgres.listeners = 'SSL://127.0.0.1:{KAFGRES_SSL_PORT}'")
    cluster.psql(f"ALTER SYSTEM SET kafgres.ssl_cert_file = '{certs['cert']}'")
    cluster.psql(f"ALTER SYSTEM SET kafgres.ssl_key_file = '{certs['key']}'")
    kafka = TlsKafka(state / "kafka", certs["keystore"], args.strict)
    results: dict[tuple[str, str, str], list[float]] = {}
    try:
        cluster.restart()
        kafka.start()
        kafgres_pid = cluster.worker_pid
        sides = [
            ("kafgres", "PLAINTEXT", Broker("kafgres", cluster.bootstrap, kafgres_pid)),
            ("kafgres", "SSL", Broker("kafgres", f"127.0.0.1:{KAFGRES_SSL_PORT}", kafgres_pid)),
            ("kafka", "PLAINTEXT", Broker("kafka", kafka.bootstrap, lambda: kafka.pid)),
            ("kafka", "SSL", Broker("kafka", f"127.0.0.1:{KAFKA_SSL_PORT}", lambda: kafka.pid)),
        ]
        for round_index in range(args.rounds):
            for key, command, metric in workloads(args.seconds):
                for name, transport, broker in sides:
                    topic = f"tls-bench-{key}-{transport.lower()}-{round_index}"
                    # Each topic keeps at most about 1.25 GiB: at a GB/s, unbounded runs filled the disk.
                    cmd = [args.bench_bin, command[0], "--bootstrap", broker.bootstrap, "--topic", topic,
                           "--create-partitions", "1", "--topic-config", "segment.bytes=268435456",
                           "--topic-config", "retention.bytes=1073741824", *command[1:]]
                    if name == "kafka" and args.strict:
                        cmd += ["--topic-config", "flush.messages=1"]
                    if transport == "SSL":
                        cmd += ["--set", "security.protocol=SSL", "--set", f"ssl.ca.location={certs['ca']}"]
                    run = run_bench(cmd, workload=key, broker=broker, mode=transport, round_index=round_index,
                                    timeout_s=args.seconds * 6 + 60, log_path=state / f"{topic}-{name}.log")
                    value = run.fields.get(metric)
                    print(f"[tls-bench] round {round_index + 1} {key:<13} {name:<8} {transport:<9} "
                          f"{metric}={value} (broker CPU {run.broker_cpu_s:.1f} s)"
                          if run.ok and run.broker_cpu_s is not None else
                          f"[tls-bench] round {round_index + 1} {key} {name} {transport} FAILED: {run.stderr_tail}",
                          flush=True)
                    if run.ok and isinstance(value, float):
                        results.setdefault((key, name, transport), []).append(value)
                    subprocess.run([args.bench_bin, "delete-topics", "--bootstrap", broker.bootstrap, topic],
                                   capture_output=True, timeout=60)
    finally:
        kafka.stop()
        for setting in ("kafgres.listeners", "kafgres.ssl_cert_file", "kafgres.ssl_key_file"):
            cluster.psql(f"ALTER SYSTEM RESET {setting}")
        cluster.restart()

    print("\n| workload | broker | PLAINTEXT | SSL | SSL / PLAINTEXT |")
    print("|---|---|---|---|---|")
    for key, _, metric in workloads(args.seconds):
        for name in ("kafgres", "kafka"):
            plain = results.get((key, name, "PLAINTEXT"))
            ssl = results.get((key, name, "SSL"))
            if not plain or not ssl:
                print(f"| {key} | {name} | (missing) | (missing) | |")
                continue
            p, s = statistics.median(plain), statistics.median(ssl)
            print(f"| {key} ({metric}) | {name} | {p:,.2f} | {s:,.2f} | {s / p:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
