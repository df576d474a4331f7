#!/usr/bin/env bash
# A flame graph of the Kafgres broker, or of the benchmark client, during a
# one-producer `kafgres-bench produce` against the running dev cluster
# (./kafgres start): the profiles docs/benchmarks.md reads, as pictures.
#
#   scripts/bench/flamegraph.sh broker|client SIZE OUT.svg [seconds]
#       (default 5 s of samples at 499 Hz, DWARF call graphs)
#
# It needs perf and inferno (`cargo install inferno --locked`, from
# crates.io; installed on first use). The cluster keeps its settings
# (kafgres.flush_policy included: the docs' relaxed profiles use
# page_cache); the run goes with the VM's memory settled, as in
# bench-compare (host_memory.py). The topic is deleted afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 3 ] || { sed -n 2,13p "$0"; exit 2; }
[ -n "${KAFGRES_MEMORY_SETTLED:-}" ] || exec python3 "$ROOT/scripts/bench/host_memory.py" -- "$0" "$@"
WHO=$1 SIZE=$2 OUT=$3 SECONDS_SAMPLED=${4:-5}
case $WHO in broker | client) ;; *) echo "first argument: broker or client" >&2; exit 2 ;; esac
[[ $SIZE =~ ^[0-9]+$ && $SECONDS_SAMPLED =~ ^[0-9]+$ && $SECONDS_SAMPLED -ge 1 && $SECONDS_SAMPLED -le 60 ]] ||
    { echo "SIZE must be a byte count and seconds 1-60" >&2; exit 2; }
BENCH=${KAFGRES_BENCH_BIN:-$ROOT/target/release/kafgres-bench}
command -v inferno-flamegraph >/dev/null || cargo install inferno --version 0.12.8 --locked
set -a
# shellcheck source=/dev/null
source "$ROOT/.kafgres/env"
set +a

topic=flamegraph-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/kafgres-flamegraph.XXXXXX")
bench_pid=
cleanup() {
    [ -z "$bench_pid" ] || kill "$bench_pid" 2>/dev/null || true
    "$BENCH" delete-topics --bootstrap "$KAFGRES_BOOTSTRAP" "$topic" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Two seconds of warm-up before the samples, one after.
"$BENCH" produce --bootstrap "$KAFGRES_BOOTSTRAP" --topic "$topic" --create-partitions 1 --size "$SIZE" \
    --producers 1 --seconds $((SECONDS_SAMPLED + 3)) >"$work/line" 2>"$work/bench.log" &
bench_pid=$!
sleep 2
if [ "$WHO" = broker ]; then
    pid=$(psql -Atc "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kafgres broker'")
else
    pid=$bench_pid
fi
[ -n "$pid" ] || { echo "no $WHO process found" >&2; exit 1; }
perf record -q -F 499 --call-graph dwarf,16384 -p "$pid" -o "$work/perf.data" -- sleep "$SECONDS_SAMPLED" 2>"$work/perf.log"
wait "$bench_pid" || { cat "$work/bench.log" >&2; exit 1; }
bench_pid=
line=$(cat "$work/line")
echo "$line"
perf script -i "$work/perf.data" --no-inline 2>/dev/null | inferno-collapse-perf --all >"$work/folded"
# In a VM without a PMU perf samples cpu-clock, whose weights are nanoseconds
# on CPU: their sum says how busy the process was.
event=$(perf evlist -i "$work/perf.data" 2>/dev/null | head -n 1)
busy=""
if [[ $event == cpu-clock* ]]; then
    busy=$(awk -v s="$SECONDS_SAMPLED" '{w += $NF} END {printf ", on CPU %.2f s of %d s", w / 1e9, s}' "$work/folded")
fi
title="Kafgres: the $WHO during kafgres-bench produce --size $SIZE, kafgres.flush_policy = $(psql -Atc 'show kafgres.flush_policy'), $(grep -o 'records_per_s=[^ ]*' <<<"$line" | tr = ' ') under perf$busy"
inferno-flamegraph --title "$title" --width 1200 <"$work/folded" >"$OUT"
echo "wrote $OUT: $title"
