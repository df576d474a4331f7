#!/usr/bin/env bash
# Implementation of ./kafgres (see that file for usage). Idempotent: every step
# checks what is already there, so running `start` again is fast and safe.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_CONFIG=$PG_BIN/pg_config
PGRX_VERSION=0.18.1
PG_PORT=${KAFGRES_PG_PORT:-5433}
KAFKA_PORT=${KAFGRES_KAFKA_PORT:-9092}
STANDBY_PG_PORT=${KAFGRES_STANDBY_PG_PORT:-5434}
STANDBY_KAFKA_PORT=${KAFGRES_STANDBY_KAFKA_PORT:-9093}
METRICS_PORT=${KAFGRES_METRICS_PORT:-9190}
STANDBY_METRICS_PORT=${KAFGRES_STANDBY_METRICS_PORT:-9191}
STANDBY_NAME=kafgres_standby
STATE=$ROOT/.kafgres
APT_PACKAGES=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev clang build-essential pkg-config kcat python3-venv cmake zlib1g-dev openjdk-17-jdk-headless maven)

say() { printf '\033[1m[kafgres]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[kafgres] %s\033[0m\n' "$*" >&2; exit 1; }

as_postgres() { runuser -u postgres -- "$@"; }

# --- installation -----------------------------------------------------------

install_packages() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        [ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); run as root or install them"
        say "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

install_cargo_pgrx() {
    export PATH=$HOME/.cargo/bin:$PATH
    command -v cargo >/dev/null || die "cargo is not installed (rustc 1.95 expected)"
    if [ "$(cargo pgrx --version 2>/dev/null | awk '{print $2}')" != "$PGRX_VERSION" ]; then
        say "installing cargo-pgrx $PGRX_VERSION (a few minutes, once)"
        # A debug build of the CLI installs in a third of the time and is fast
        # enough for what it does (building, not running, the extension).
        cargo install cargo-pgrx --version "$PGRX_VERSION" --locked --debug --quiet
    fi
    if ! grep -q "pg$PG_MAJOR" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" 2>/dev/null; then
        cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG" >/dev/null
    fi
}

installed_library() { echo "$($PG_CONFIG --pkglibdir)/kafgres.so"; }

build_extension() {
    say "building the extension (release)"
    # cargo pgrx install overwrites the library in place, and a running
    # server has it mapped: its processes would run the new bytes at the old
    # offsets. Moved aside first, the old file lives on for them (a rename
    # keeps the inode) and the install writes a new one.
    local library
    library=$(installed_library)
    [ -f "$library" ] && mv -f "$library" "$library.replaced"
    if ! (cd "$ROOT/crates/kafgres" && cargo pgrx install --release --pg-config "$PG_CONFIG" >"$STATE/build.log" 2>&1); then
        [ -f "$library" ] || { [ -f "$library.replaced" ] && mv -f "$library.replaced" "$library"; }
        tail -n 40 "$STATE/build.log" >&2
        die "extension build failed (full log: $STATE/build.log)"
    fi
    rm -f "$library.replaced"
    # cargo pgrx install copies the upgrade scripts only. The first release's
    # full script goes next to them, so that the upgrade test can install
    # 0.1.0 and update it (tests/e2e/test_upgrade.py).
    install -m 644 "$ROOT/crates/kafgres/sql/kafgres--0.1.0.sql" "$($PG_CONFIG --sharedir)/extension/"
}

library_hash() { sha256sum "$(installed_library)" | cut -d' ' -f1; }

# The library a running server loaded is remembered at each (re)start, so a
# newer build is noticed even if an earlier run installed it.
remember_loaded_library() { library_hash >"$CLUSTER/loaded-library.sha256"; }
loaded_library_is_current() { [ "$(cat "$CLUSTER/loaded-library.sha256" 2>/dev/null)" = "$(library_hash)" ]; }

# --- the cluster --------------------------------------------------------------

# The cluster lives in the checkout when the postgres user can reach it, else
# under /var/lib/kafgres (a checkout under /root is not traversable).
cluster_home() {
    if as_postgres test -x "$ROOT" 2>/dev/null && as_postgres test -x "$STATE" 2>/dev/null; then
        echo "$STATE/cluster"
    else
        echo "/var/lib/kafgres/$(echo -n "$ROOT" | sha256sum | cut -c1-12)"
    fi
}

setup_paths() {
    mkdir -p "$STATE"
    chmod 755 "$STATE"
    CLUSTER=$(cluster_home)
    PGDATA_DIR=$CLUSTER/pgdata
    PG_LOG=$CLUSTER/postgres.log
    SOCKET_DIR=$CLUSTER/run
    mkdir -p "$CLUSTER" "$SOCKET_DIR"
    chown postgres:postgres "$CLUSTER" "$SOCKET_DIR"
    export PGHOST=127.0.0.1 PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=postgres
}

pg_running() { as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; }

init_cluster() {
    [ -f "$PGDATA_DIR/PG_VERSION" ] && return
    say "creating a cluster in $PGDATA_DIR"
    as_postgres "$PG_BIN/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$CLUSTER/initdb.log"
    echo "include_if_exists = 'kafgres.conf'" >>"$PGDATA_DIR/postgresql.conf"
}

write_config() {
    cat >"$PGDATA_DIR/kafgres.conf" <<CONF
# Written by ./kafgres start; edit scripts/kafgres.sh rather than this file.
port = $PG_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCKET_DIR'
shared_preload_libraries = 'kafgres'
# kafgres.send() logs records as logical messages that the SQL bridge reads
# from the WAL (replica is enough; it is also what a standby needs).
wal_level = replica
# pg_rewind needs it to bring a failed primary back as a standby.
wal_log_hints = on
kafgres.port = $KAFKA_PORT
kafgres.listen_address = '127.0.0.1'
kafgres.database = 'postgres'
# Prometheus: http://127.0.0.1:$METRICS_PORT/metrics (off unless set).
kafgres.metrics_port = $METRICS_PORT
CONF
    chown postgres:postgres "$PGDATA_DIR/kafgres.conf"
}

wait_for_kafka() {
    local deadline=$((SECONDS + ${1:-60}))
    until (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null; do
        ((SECONDS < deadline)) || { tail -n 30 "$PG_LOG" >&2; die "the Kafka listener did not come up on 127.0.0.1:$KAFKA_PORT"; }
        sleep 0.1
    done
}

write_env() {
    cat >"$STATE/env" <<ENV
KAFGRES_ROOT=$ROOT
KAFGRES_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
KAFGRES_METRICS_URL=http://127.0.0.1:$METRICS_PORT/metrics
KAFGRES_PGDATA=$PGDATA_DIR
KAFGRES_PG_LOG=$PG_LOG
KAFGRES_PG_BIN=$PG_BIN
PGHOST=127.0.0.1
PGPORT=$PG_PORT
PGUSER=postgres
PGDATABASE=postgres
ENV
}

cmd_start() {
    install_packages
    install_cargo_pgrx
    setup_paths
    build_extension
    init_cluster
    write_config
    if pg_running; then
        if ! loaded_library_is_current || [ "$(psql -Atc 'SHOW wal_level' 2>/dev/null)" != replica ] ||
            [ "$(psql -Atc 'SHOW wal_log_hints' 2>/dev/null)" != on ]; then
            say "restarting Postgres to load the new library and settings"
            as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -m fast -w restart >/dev/null
            remember_loaded_library
        fi
    else
        as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -w start >/dev/null ||
            { tail -n 30 "$PG_LOG" >&2; die "Postgres did not start"; }
        remember_loaded_library
    fi
    psql -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS kafgres" >/dev/null
    # A cluster made by an earlier checkout keeps its data: its schema is
    # brought to the library's version (ALTER EXTENSION runs the upgrade scripts).
    local installed available
    installed=$(psql -Atc "SELECT extversion FROM pg_extension WHERE extname = 'kafgres'")
    available=$(psql -Atc "SELECT default_version FROM pg_available_extensions WHERE name = 'kafgres'")
    if [ "$installed" != "$available" ]; then
        say "updating the kafgres schema from $installed to $available (ALTER EXTENSION kafgres UPDATE)"
        psql -q -v ON_ERROR_STOP=1 -c "ALTER EXTENSION kafgres UPDATE" >/dev/null
    fi
    wait_for_kafka
    write_env
    say "Postgres: postgresql://postgres@127.0.0.1:$PG_PORT/postgres  (data $PGDATA_DIR, log $PG_LOG)"
    say "Kafka:    127.0.0.1:$KAFKA_PORT  (bootstrap.servers)"
    say "environment for tools and tests: $STATE/env"
}

cmd_stop() {
    setup_paths
    if pg_running; then
        as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null
        say "stopped"
    else
        say "not running"
    fi
}

cmd_restart() {
    setup_paths
    as_postgres "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -m fast -w restart >/dev/null
    remember_loaded_library
    wait_for_kafka
    say "restarted"
}

cmd_status() {
    setup_paths
    if pg_running; then
        say "Postgres running on 127.0.0.1:$PG_PORT ($PGDATA_DIR)"
        psql -Atc "SELECT backend_type || ' pid ' || pid FROM pg_stat_activity WHERE backend_type IN ('kafgres broker', 'kafgres sql bridge')" || true
        psql -Atc "SELECT 'sql bridge: ' || state || coalesce(' (' || message || ')', '') FROM kafgres.sql_bridge_status" 2>/dev/null || true
    else
        say "not running"
        return 1
    fi
}

cmd_psql() {
    setup_paths
    exec psql "$@"
}

cmd_test() {
    cmd_start
    exec "$ROOT/scripts/run-tests.sh"
}

# --- a standby (docs/replication.md) -----------------------------------------

# A hot standby of the cluster above, on its own ports: pg_basebackup -R copies
# the data directory (topic data included) and streams the WAL; its broker
# copies topic data from the primary's.
standby_paths() {
    setup_paths
    STANDBY=$CLUSTER-standby
    STANDBY_PGDATA=$STANDBY/pgdata
    STANDBY_LOG=$STANDBY/postgres.log
    STANDBY_SOCKETS=$STANDBY/run
}

standby_running() { as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY_PGDATA" status >/dev/null 2>&1; }

write_standby_config() {
    cat >"$STANDBY_PGDATA/kafgres.conf" <<CONF
# Written by ./kafgres standby start; edit scripts/kafgres.sh rather than this file.
port = $STANDBY_PG_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$STANDBY_SOCKETS'
shared_preload_libraries = 'kafgres'
wal_level = replica
wal_log_hints = on
hot_standby = on
# The walreceiver's name: what synchronous_standby_names on the primary names,
# for the WAL and for topic data alike.
cluster_name = '$STANDBY_NAME'
kafgres.port = $STANDBY_KAFKA_PORT
kafgres.listen_address = '127.0.0.1'
kafgres.database = 'postgres'
kafgres.node_id = 2
kafgres.metrics_port = $STANDBY_METRICS_PORT
CONF
    chown postgres:postgres "$STANDBY_PGDATA/kafgres.conf"
}

cmd_standby_start() {
    local sync=no
    [ "${1:-}" = --sync ] && sync=yes
    standby_paths
    pg_running || die "the primary is not running: ./kafgres start first"
    if [ ! -f "$STANDBY_PGDATA/PG_VERSION" ]; then
        say "copying the primary into $STANDBY_PGDATA (pg_basebackup -R)"
        mkdir -p "$STANDBY" "$STANDBY_SOCKETS"
        chown postgres:postgres "$STANDBY" "$STANDBY_SOCKETS"
        as_postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PG_PORT" -U postgres -D "$STANDBY_PGDATA" -R -X stream \
            -c fast >"$STANDBY/basebackup.log" 2>&1 || { cat "$STANDBY/basebackup.log" >&2; die "pg_basebackup failed"; }
        rm -f "$STANDBY_PGDATA/postmaster.pid" "$STANDBY_PGDATA/postmaster.opts"
    fi
    write_standby_config
    if ! standby_running; then
        as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY_PGDATA" -l "$STANDBY_LOG" -w start >/dev/null ||
            { tail -n 30 "$STANDBY_LOG" >&2; die "the standby did not start"; }
    fi
    if [ "$sync" = yes ]; then
        psql -q -c "ALTER SYSTEM SET synchronous_standby_names = '$STANDBY_NAME'" -c "SELECT pg_reload_conf()" >/dev/null
        say "acks=all produces and commits on the primary now wait for $STANDBY_NAME"
    fi
    say "standby: postgresql://postgres@127.0.0.1:$STANDBY_PG_PORT/postgres  (data $STANDBY_PGDATA, log $STANDBY_LOG)"
    say "its broker: 127.0.0.1:$STANDBY_KAFKA_PORT (give clients both: bootstrap.servers=127.0.0.1:$KAFKA_PORT,127.0.0.1:$STANDBY_KAFKA_PORT)"
}

cmd_standby_stop() {
    standby_paths
    if pg_running && [ -n "$(psql -Atc "SELECT 1 FROM pg_settings WHERE name = 'synchronous_standby_names' AND setting = '$STANDBY_NAME'")" ]; then
        # Otherwise every commit and acks=all produce on the primary would wait for it.
        psql -q -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
        say "the primary no longer waits for $STANDBY_NAME"
    fi
    if standby_running; then
        as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY_PGDATA" -m fast -w stop >/dev/null
        say "standby stopped"
    else
        say "standby not running"
    fi
}

cmd_standby_promote() {
    standby_paths
    standby_running || die "the standby is not running"
    as_postgres "$PG_BIN/pg_ctl" -D "$STANDBY_PGDATA" -w promote >/dev/null
    say "promoted: the broker at 127.0.0.1:$STANDBY_KAFKA_PORT now leads"
}

cmd_standby_status() {
    standby_paths
    standby_running || { say "standby not running"; return 1; }
    PGPORT=$STANDBY_PG_PORT psql -c "SELECT * FROM kafgres.replication" || true
    if pg_running; then
        psql -c "SELECT * FROM kafgres.replicas" || true
        psql -c "SELECT * FROM kafgres.replica_partitions WHERE lag_records > 0 OR caught_up_at IS NULL" || true
    fi
}

cmd_standby() {
    case "${1:-}" in
        start) shift; cmd_standby_start "$@" ;;
        stop) cmd_standby_stop ;;
        promote) cmd_standby_promote ;;
        status) cmd_standby_status ;;
        destroy) cmd_standby_stop; standby_paths; rm -rf "$STANDBY"; say "standby removed" ;;
        *) die "usage: ./kafgres standby start [--sync] | stop | promote | status | destroy" ;;
    esac
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart) cmd_restart ;;
    status) cmd_status ;;
    psql) shift; cmd_psql "$@" ;;
    test) cmd_test ;;
    standby) shift; cmd_standby "$@" ;;
    bench) shift; exec "$ROOT/scripts/bench-compare.sh" "$@" ;;  # side by side with Apache Kafka (docs/benchmarks.md)
    bench-replication) shift; exec "$ROOT/scripts/bench-replication.sh" "$@" ;;  # with a standby (docs/benchmarks.md)
    *) sed -n '2,11p' "$ROOT/kafgres" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
