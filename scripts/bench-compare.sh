#!/usr/bin/env bash
# Kafgres next to Apache Kafka on this machine, in one run (issue 7); also
# `./kafgres bench`. Prepares what the comparison needs, then runs
# scripts/bench/compare.py, which does the work and explains it:
#
#   scripts/bench-compare.sh                  3 rounds of everything, both durability modes (about 30 min)
#   scripts/bench-compare.sh --rounds 1 --quick   a short smoke run
#   scripts/bench-compare.sh --no-start ...   against the Kafgres cluster already running
#   scripts/bench-compare.sh --help           every option
#
# KAFGRES_BENCH_BIN names the kafgres-bench binary to use; without it,
# target/release/kafgres-bench is built (incrementally) first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.kafgres/bench
VENV=$STATE/venv

say() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[bench] %s\033[0m\n' "$*" >&2; exit 1; }

mkdir -p "$STATE"

case " $* " in *" --help "* | *" -h "*) exec python3 "$ROOT/scripts/bench/compare.py" --help ;; esac

missing=()
for tool in fio:fio iperf3:iperf3 java:openjdk-17-jdk-headless mvn:maven; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
# kafgres-bench links librdkafka with OpenSSL (the TLS figures, scripts/bench/tls_bench.py).
for package in libssl-dev pkg-config; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
    [ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); run as root or install them"
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python with matplotlib for the charts, in a venv of its own.
if ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
    say "creating $VENV with matplotlib"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'matplotlib>=3.7,<4'
fi

# Apache Kafka's runtime classpath from Maven Central (the jars are cached in ~/.m2).
classpath=$STATE/kafka-lib/classpath.txt
if [ ! -s "$classpath" ] || [ "$ROOT/scripts/bench/pom.xml" -nt "$classpath" ]; then
    say "resolving Apache Kafka's jars (mvn, scripts/bench/pom.xml)"
    mvn -B -q -f "$ROOT/scripts/bench/pom.xml" dependency:build-classpath >/dev/null
fi

bench_bin=${KAFGRES_BENCH_BIN:-}
if [ -z "$bench_bin" ]; then
    export PATH=$HOME/.cargo/bin:$PATH
    say "building kafgres-bench (cargo build --release -p kafgres-bench)"
    (cd "$ROOT" && cargo build --release -q -p kafgres-bench)
    bench_bin=$ROOT/target/release/kafgres-bench
fi
[ -x "$bench_bin" ] || die "no kafgres-bench at $bench_bin"

export KAFGRES_BENCH_BIN=$bench_bin
exec "$VENV/bin/python" "$ROOT/scripts/bench/compare.py" "$@"
