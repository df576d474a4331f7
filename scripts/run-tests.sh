#!/usr/bin/env bash
# Runs every test suite against the cluster that `./kafgres start` left
# running, then prints one summary. Called by `./kafgres test` (and so by CI).
#
# Suites, in order:
#   rust     unit, property and in-process broker tests of the plain crates
#   sql      pg_regress expected-output tests of the SQL surface (tests/regress)
#   sql-api  pg_regress tests of send/read/consume/admin in the database the
#            broker serves (tests/regress_broker)
#   isolation  pg_isolation_regress specs: concurrent consumers of one group,
#            commit order of concurrent senders (tests/isolation)
#   e2e      real clients (librdkafka via confluent-kafka and kcat) against the
#            running cluster, including restarts and kill -9 (tests/e2e)
#   conformance  the reference diff: the same scenarios against Apache Kafka 4.x
#            (started here from Maven Central's jars on 127.0.0.1:19092) and the
#            running cluster, transcripts diffed (tests/conformance; ~2 minutes)
#
# Nothing may hang the run: each suite has a wall-clock limit (SUITE_LIMIT_S
# below; `timeout` stops it, and it counts as failed), and every pytest test
# has one of PYTEST_TEST_LIMIT_S (pytest-timeout: the stacks of every thread
# are printed, then that suite's process ends). The summary gives each
# suite's time, so a slow machine shows where its minutes went.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.kafgres
[ -f "$STATE/env" ] || { echo "no $STATE/env: run ./kafgres start first" >&2; exit 2; }
set -a
# shellcheck disable=SC1091
. "$STATE/env"
set +a
export PATH=$HOME/.cargo/bin:$PATH
LOGS=$STATE/test-logs
mkdir -p "$LOGS"

declare -a SUITES=() STATUS=() SECONDS_TAKEN=()
PASSED=0
FAILED=0

# Wall-clock limits per suite, in seconds: about three times what each takes
# on this project's 2-core machine, so that together they stay inside CI's
# 90 minutes with the build.
declare -A SUITE_LIMIT_S=([rust]=1800 [sql]=300 [sql-api]=300 [isolation]=300 [e2e]=3000 [conformance]=900)
# The longest a single e2e or conformance test may take, its fixtures'
# set-up included (a first Maven or Go build downloads its dependencies).
PYTEST_TEST_LIMIT_S=900

# count_from LOG KIND: adds the suite's test counts to PASSED/FAILED.
count_from() {
    local log=$1 kind=$2 p=0 f=0
    case $kind in
        cargo)
            # Only libtest's summary lines: a test's own output may say "N failed".
            p=$(grep -E '^test result: ' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
            f=$(grep -E '^test result: ' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
            ;;
        regress)
            if grep -Eq 'All [0-9]+ tests passed' "$log"; then
                p=$(grep -Eo 'All [0-9]+ tests' "$log" | grep -Eo '[0-9]+')
            else
                f=$(grep -Eo '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
                p=$(($(grep -Eo '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $3}') - f))
            fi
            ;;
        pytest)
            # Only pytest's summary line ("1 failed, 23 passed in 150.2s"): a
            # client library may log after it ("Connect to 127.0.0.1:19092 failed").
            local summary
            summary=$(grep -E '[0-9]+ (passed|failed|errors?)(,.*)? in [0-9.]+s' "$log" | tail -n 1)
            p=$(grep -Eo '[0-9]+ passed' <<<"$summary" | grep -Eo '[0-9]+' || echo 0)
            f=$(grep -Eo '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{s+=$1} END {print s+0}')
            ;;
    esac
    PASSED=$((PASSED + ${p:-0}))
    FAILED=$((FAILED + ${f:-0}))
}

# run_suite NAME KIND FUNCTION: runs the suite's function in a shell of its
# own under `timeout` (the functions and settings are exported below).
run_suite() {
    local name=$1 kind=$2 fn=$3 log=$LOGS/$1.log limit=${SUITE_LIMIT_S[$1]} started
    started=$(date +%s)
    printf '\n\033[1m=== %s\033[0m (log: %s; started %s, limit %ss)\n' "$name" "$log" "$(date +%T)" "$limit"
    if timeout --kill-after=30 "$limit" bash -c "$fn" 2>&1 | tee "$log"; then
        STATUS+=("pass")
    else
        local rc=${PIPESTATUS[0]}
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            echo "kafgres: the $name suite did not finish within ${limit}s and was stopped" | tee -a "$log"
            STATUS+=("TIMEOUT")
        else
            STATUS+=("FAIL")
        fi
        # A suite that failed without reporting a failed test still counts as one.
        grep -Eq '[1-9][0-9]* (failed|error)|tests failed' "$log" || FAILED=$((FAILED + 1))
    fi
    SUITES+=("$name")
    SECONDS_TAKEN+=("$(($(date +%s) - started))")
    count_from "$log" "$kind"
}

suite_rust() {
    cd "$ROOT" && cargo test --workspace --exclude kafgres --exclude kafgres-bench 2>&1
}

suite_sql() {
    local regress
    regress=$("$KAFGRES_PG_BIN/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
    rm -rf "$STATE/sql-results"
    mkdir -p "$STATE/sql-results"
    # pg_regress --use-existing neither creates nor drops the database.
    psql -q -c "DROP DATABASE IF EXISTS kafgres_regression" -c "CREATE DATABASE kafgres_regression" || return 1
    "$regress" --use-existing --host="$PGHOST" --port="$PGPORT" --user="$PGUSER" \
        --dbname=kafgres_regression --inputdir="$ROOT/tests/regress" --outputdir="$STATE/sql-results" \
        $(cd "$ROOT/tests/regress/sql" && ls ./*.sql | xargs -n1 basename | sed 's/\.sql$//' | sort)
    local rc=$?
    [ $rc = 0 ] || cat "$STATE/sql-results/regression.diffs" 2>/dev/null | head -n 80
    return $rc
}

# The SQL API works only in the broker's database (kafgres.database): these
# run there, on topics they create and delete themselves.
suite_sql_api() {
    local regress
    regress=$("$KAFGRES_PG_BIN/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
    rm -rf "$STATE/sql-api-results"
    mkdir -p "$STATE/sql-api-results"
    "$regress" --use-existing --host="$PGHOST" --port="$PGPORT" --user="$PGUSER" \
        --dbname="$PGDATABASE" --inputdir="$ROOT/tests/regress_broker" --outputdir="$STATE/sql-api-results" \
        $(cd "$ROOT/tests/regress_broker/sql" && ls ./*.sql | xargs -n1 basename | sed 's/\.sql$//' | sort)
    local rc=$?
    [ $rc = 0 ] || cat "$STATE/sql-api-results/regression.diffs" 2>/dev/null | head -n 80
    return $rc
}

suite_isolation() {
    local isolation
    isolation=$("$KAFGRES_PG_BIN/pg_config" --pkglibdir 2>/dev/null || pg_config --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
    rm -rf "$STATE/isolation-results"
    mkdir -p "$STATE/isolation-results"
    "$isolation" --use-existing --host="$PGHOST" --port="$PGPORT" --user="$PGUSER" \
        --dbname="$PGDATABASE" --inputdir="$ROOT/tests/isolation" --outputdir="$STATE/isolation-results" \
        $(cd "$ROOT/tests/isolation/specs" && ls ./*.spec | xargs -n1 basename | sed 's/\.spec$//' | sort)
    local rc=$?
    [ $rc = 0 ] || cat "$STATE/isolation-results/regression.diffs" 2>/dev/null | head -n 80
    return $rc
}

# The Python environment of the e2e and conformance suites.
python_env() {
    local venv=$STATE/venv req=$ROOT/tests/requirements.txt
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" || return 1
    fi
    if ! cmp -s "$req" "$venv/requirements.installed"; then
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" || return 1
        cp "$req" "$venv/requirements.installed"
    fi
}

# pytest with the per-test limit: the thread method prints every thread's
# stack (where a test hung) before it ends the process.
run_pytest() {
    python_env || return 1
    cd "$ROOT" && "$STATE/venv/bin/python" -m pytest -q -p no:cacheprovider \
        --timeout="$PYTEST_TEST_LIMIT_S" --timeout-method=thread "$@"
}

suite_conformance() {
    run_pytest tests/conformance
}

suite_e2e() {
    run_pytest tests/e2e
}

export ROOT STATE LOGS PYTEST_TEST_LIMIT_S
export -f suite_rust suite_sql suite_sql_api suite_isolation suite_conformance suite_e2e python_env run_pytest

run_suite rust cargo suite_rust
run_suite sql regress suite_sql
run_suite sql-api regress suite_sql_api
run_suite isolation regress suite_isolation
run_suite e2e pytest suite_e2e
run_suite conformance pytest suite_conformance

printf '\n\033[1m=== summary\033[0m\n'
for i in "${!SUITES[@]}"; do
    printf '  %-11s %-7s %4ss\n' "${SUITES[$i]}" "${STATUS[$i]}" "${SECONDS_TAKEN[$i]}"
done
echo "kafgres: $PASSED passed, $FAILED failed"
for s in "${STATUS[@]}"; do
    [ "$s" = pass ] || exit 1
done
[ "$FAILED" = 0 ]
