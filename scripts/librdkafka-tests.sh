#!/usr/bin/env bash
# Runs librdkafka's own test suite (tests/ of its source tree) against a
# running Kafgres broker: the single-broker produce, consume, consumer-group
# and admin tests. Not part of ./kafgres test; see docs/conformance.md
# ("librdkafka's test suite") for the results and the reason of every failure.
#
#   scripts/librdkafka-tests.sh                 # the list below
#   scripts/librdkafka-tests.sh 0012 0081       # chosen test numbers
#
# The source comes from Debian's package registry at run time, never from this
# repository: a private apt configuration (its own sources.list with one
# deb-src line for bookworm, its own state and cache directories, so the
# system's apt configuration is neither read for sources nor changed) runs
# `apt-get source librdkafka` into .kafgres/librdkafka/ (git-ignored), which is
# then configured and built there once; later runs reuse the build.
#
# Most tests let their first produce auto-create a topic and expect it to have
# 4 partitions, as the suite's own clusters (num.partitions=4) do. Run against
# a broker with kafgres.default_partitions = 4: with the default (1, as
# Kafka's) those tests fail with "Local: Unknown partition". Two runs against
# the same broker must not overlap: -D deletes every rdkafkatest_* topic.
#
# Environment:
#   KAFGRES_KAFKA_PORT           broker port on 127.0.0.1 (default 9092)
#   LIBRDKAFKA_TESTS_DIR         work directory (default .kafgres/librdkafka)
#   LIBRDKAFKA_TESTS_LOGS        log directory (default .kafgres/test-logs/librdkafka)
#   LIBRDKAFKA_TEST_TIMEOUT_S    wall-clock limit of one test (default 300)
#   LIBRDKAFKA_DEBIAN_SUITE      Debian suite to take the source from (default bookworm)
#   LIBRDKAFKA_TESTS_QUICK=1     the suite's quick mode (-Q): fewer messages, and
#                                the sub-tests not marked quick are skipped
#
# Output: one `PASS|FAIL|SKIP <test>` line per test of the suite (a number
# can hold several tests, e.g. 0045; a failure comes with its assertion), the
# log of each number in <log directory>/<number>.log, then a
# summary line. Exit status 0 when nothing failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${LIBRDKAFKA_TESTS_DIR:-$ROOT/.kafgres/librdkafka}
LOGS=${LIBRDKAFKA_TESTS_LOGS:-$ROOT/.kafgres/test-logs/librdkafka}
PORT=${KAFGRES_KAFKA_PORT:-9092}
BOOTSTRAP=127.0.0.1:$PORT
TEST_TIMEOUT_S=${LIBRDKAFKA_TEST_TIMEOUT_S:-300}
SUITE=${LIBRDKAFKA_DEBIAN_SUITE:-bookworm}
RUNNER_FLAGS=(-E -L -D)   # no socket emulator, no local-only tests, delete the topics
[ "${LIBRDKAFKA_TESTS_QUICK:-0}" = 1 ] && RUNNER_FLAGS+=(-Q)
# What Kafgres answers as: the suite gates tests on the broker version.
BROKER_VERSION=4.0.0

# The chosen tests: every one of librdkafka's broker tests that a single plain
# Kafka 4.x broker can pass. Left out, with their reason:
#   needs a local Kafka install (KAFKA_PATH, kafka-topics.sh): 0052 0077 0109
#   needs transactions and three brokers (replication factor 3): 0098 0103
#   needs auto-creation off (scenario noautocreate): 0107 0111, two of 0045
#   needs the socket emulator: 0049 0068 0075 0076 0088 0094
#   needs TLS, SASL, ACLs or OIDC: 0097 0115 0119 0126 0133 0134 0135
#   needs several brokers: 0101 (fetch from follower)
#   cannot pass on Kafka 4.x: 0092 (sets message.format.version, removed in 4.0)
#   not a conformance test: 0028 (known issue upstream), 0038 (performance)
# Local-only tests (no broker; the mock cluster ones such as 0009 and 0105
# included) are skipped with -L.
DEFAULT_TESTS=(
    # produce
    0001 0002 0003 0005 0007 0008 0011 0013 0017 0039 0048 0053 0064 0065
    0070 0073 0084 0085 0086 0090 0110 0114 0125
    # consume
    0012 0014 0015 0021 0022 0029 0031 0034 0036 0040 0041 0054 0059 0060
    0067 0082 0083 0093 0112 0137
    # consumer groups
    0018 0019 0020 0026 0030 0033 0045 0050 0051 0056 0069 0089 0091 0099
    0102 0113 0118 0122 0130 0132
    # admin, metadata, client
    0016 0035 0042 0044 0057 0063 0081 0123
    # transactions
    0055 0061 0129
)
if [ $# -gt 0 ]; then TESTS_LIST=("$@"); else TESTS_LIST=("${DEFAULT_TESTS[@]}"); fi

say() { printf '[librdkafka-tests] %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }
now() { date +%s; }

mkdir -p "$WORK" "$LOGS"

# Build dependencies: compiler, dpkg-source (dpkg-dev), the libraries
# librdkafka's configure looks for, and RapidJSON (0053 and 0110 check the
# statistics JSON with it). Installed with the system's apt configuration,
# only when missing.
DEPS=(build-essential pkg-config dpkg-dev libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev rapidjson-dev)
need=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    timeout 600 $SUDO apt-get install -y --no-install-recommends "${need[@]}" >"$WORK/apt-install.log" 2>&1 \
        || { timeout 300 $SUDO apt-get update >>"$WORK/apt-install.log" 2>&1 &&
             timeout 600 $SUDO apt-get install -y --no-install-recommends "${need[@]}" >>"$WORK/apt-install.log" 2>&1; } \
        || die "apt-get install failed: see $WORK/apt-install.log"
fi

# Fetch: a private apt configuration, then `apt-get source`.
t_fetch0=$(now)
SRC=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'librdkafka-*' 2>/dev/null | sort | tail -n 1)
if [ -z "$SRC" ] || [ ! -f "$SRC/tests/test.c" ]; then
    APT=$WORK/apt
    mkdir -p "$APT/sources.list.d" "$APT/state/lists/partial" "$APT/cache/archives/partial" "$WORK/src"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" \
        >"$APT/sources.list"
    APT_OPTS=(
        -o "Dir::Etc::SourceList=$APT/sources.list"
        -o "Dir::Etc::SourceParts=$APT/sources.list.d"
        -o "Dir::State=$APT/state"
        -o "Dir::Cache=$APT/cache"
        -o "APT::Sandbox::User=root"
    )
    say "fetching librdkafka's source package from Debian $SUITE"
    timeout 300 apt-get "${APT_OPTS[@]}" update >"$WORK/apt-source.log" 2>&1 \
        || die "apt-get update (private configuration) failed: see $WORK/apt-source.log"
    (cd "$WORK/src" && timeout 300 apt-get "${APT_OPTS[@]}" source librdkafka) >>"$WORK/apt-source.log" 2>&1 \
        || die "apt-get source librdkafka failed: see $WORK/apt-source.log"
    SRC=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'librdkafka-*' | sort | tail -n 1)
    [ -n "$SRC" ] && [ -f "$SRC/tests/test.c" ] || die "no tests/ in the unpacked source under $WORK/src"
fi
VERSION=$(sed -n 's/^#define RD_KAFKA_VERSION *0x\(..\)\(..\)\(..\)..$/\1 \2 \3/p' "$SRC/src/rdkafka.h" \
    | { read -r a b c && printf '%d.%d.%d' "0x$a" "0x$b" "0x$c"; })
DEB_VERSION=$(sed -n 's/^Version: //p' "$WORK"/src/librdkafka_*.dsc 2>/dev/null | tail -n 1)
t_fetch=$(($(now) - t_fetch0))

# Build once: the libraries and the test runner. The stamp holds the
# dependency list configure saw; a different list configures again.
t_build0=$(now)
STAMP=$SRC/.kafgres-built
if [ ! -x "$SRC/tests/test-runner" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "${DEPS[*]}" ]; then
    say "building librdkafka $VERSION and its test runner (log: $WORK/build.log)"
    (
        cd "$SRC" &&
        timeout 300 ./configure --disable-curl &&
        timeout 1800 make -j2 libs &&
        timeout 1800 make -j2 -C tests build
    ) >"$WORK/build.log" 2>&1 || die "build failed: see $WORK/build.log"
    echo "${DEPS[*]}" >"$STAMP"
fi
t_build=$(($(now) - t_build0))

# Test configuration, one per broker so that runs against two brokers can go
# on at once. Topics get a random suffix so reruns start from empty topics;
# -D deletes the suite's topics (prefix rdkafkatest) after each test number.
CONF=$WORK/test-$PORT.conf
cat >"$CONF" <<EOF
bootstrap.servers=$BOOTSTRAP
test.topic.random=true
EOF

# The broker may be restarting: wait up to 60 s for the port.
for _ in $(seq 60); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 1
done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || die "nothing listens on $BOOTSTRAP"

say "librdkafka $VERSION (Debian $DEB_VERSION), broker $BOOTSTRAP, ${#TESTS_LIST[@]} test numbers, ${TEST_TIMEOUT_S}s each at most"
say "logs in $LOGS"

# outcomes LOG: one "STATE<TAB>test<TAB>reason" line per test the runner
# started, from its log: "Test X PASSED", "SKIPPING TEST: why", and
# '### Test "X (sub-test)" failed at file:line:func() at date: ###' followed by
# the failed assertion. A test that started and has none of these was killed
# by the wall-clock limit. Failures of <MAIN> (threads left over by a failed
# test) come last as MAIN.
outcomes() {
    awk '
    function clean(l) { gsub(/\033\[[0-9;]*m/, "", l); gsub(/\033\([A-Z]/, "", l); return l }
    function seen(n) { if (!(n in st)) { order[++k] = n; st[n] = "" } }
    { $0 = clean($0) }
    /================= Running test / {
        n = $0; sub(/.*Running test /, "", n); sub(/ =+.*/, "", n); seen(n)
        if (st[n] == "") st[n] = "RUN"; next }
    /================= Test .* PASSED =/ {
        n = $0; sub(/.*= Test /, "", n); sub(/ PASSED.*/, "", n); seen(n)
        if (st[n] != "FAIL") st[n] = "PASS"; next }
    /WARN: SKIPPING TEST: / {
        n = $0; sub(/^\[/, "", n); sub(/[ \/].*/, "", n); r = $0; sub(/.*SKIPPING TEST: /, "", r)
        seen(n); if (st[n] != "FAIL") { st[n] = "SKIP"; why[n] = r }; next }
    /^### Test "/ {
        label = $0; sub(/^### Test "/, "", label); sub(/" failed at .*/, "", label)
        n = label; sub(/ .*/, "", n); subt = label; if (subt == n) subt = ""; else sub(/^[^ ]* /, "", subt)
        loc = $0; sub(/.* failed at /, "", loc); sub(/\(\) at .*/, "()", loc)
        if ((getline r) > 0) r = clean(r); else r = ""
        if (n == "<MAIN>") { if (main == "") main = r; next }
        seen(n)
        if (st[n] != "FAIL") { st[n] = "FAIL"; why[n] = (subt != "" ? subt " " : "") loc ": " r }
        next }
    END {
        for (i = 1; i <= k; i++) {
            n = order[i]; s = st[n]
            if (s == "RUN") { s = "FAIL"; why[n] = "no result: killed at the wall-clock limit" }
            print s "\t" n "\t" why[n]
        }
        if (main != "") print "MAIN\t<MAIN>\t" main
    }' "$1"
}

PASS=0 FAIL=0 SKIP=0
FAILED_NAMES=()
t_run0=$(now)
for num in "${TESTS_LIST[@]}"; do
    log=$LOGS/$num.log
    t0=$(now)
    # The brace group keeps the shell's "Aborted" notice (the runner aborts
    # on a failed test) out of the output.
    {
        (
            cd "$SRC/tests" &&
            RDKAFKA_TEST_CONF=$CONF TESTS=$num TEST_KAFKA_VERSION=$BROKER_VERSION \
            LD_LIBRARY_PATH=../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            exec timeout -k 10 "$TEST_TIMEOUT_S" ./test-runner "${RUNNER_FLAGS[@]}"
        ) >"$log" 2>&1
    } 2>/dev/null
    rc=$?
    secs=$(($(now) - t0))
    failed_here=0 main_why=
    while IFS=$'\t' read -r state name why; do
        case $state in
            PASS) echo "PASS $name (${secs}s)"; PASS=$((PASS + 1)) ;;
            SKIP) [ "$why" = "Filtered due to negative test flags" ] && why="local-only (-L) or socket emulator (-E)"
                  echo "SKIP $name: $why"; SKIP=$((SKIP + 1)) ;;
            FAIL) echo "FAIL $name (${secs}s): $why"; FAIL=$((FAIL + 1)); FAILED_NAMES+=("$name"); failed_here=1 ;;
            MAIN) main_why=$why ;;
        esac
    done < <(outcomes "$log")
    # A runner that exited non-zero with no failed test of its own (killed,
    # crashed, or a <MAIN> check failed) is a failure of the number.
    if [ "$rc" -ne 0 ] && [ "$failed_here" -eq 0 ]; then
        echo "FAIL $num (${secs}s): runner exit status $rc${main_why:+: $main_why}"
        FAIL=$((FAIL + 1)); FAILED_NAMES+=("$num")
    fi
done
t_run=$(($(now) - t_run0))

echo
echo "librdkafka $VERSION test suite against $BOOTSTRAP: $PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ] || echo "failed: ${FAILED_NAMES[*]}"
echo "timings: fetch ${t_fetch}s, build ${t_build}s, tests ${t_run}s"
[ "$FAIL" -eq 0 ]
