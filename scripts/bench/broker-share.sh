#!/usr/bin/env bash
# How much of a client's latency the Kafgres broker itself spends: runs
# kafgres-bench `sync` and `e2e`, and the same two patterns without
# librdkafka (`bare --pattern sync|e2e`), against the running dev cluster
# (started with ./kafgres start) and reads kafgres.broker_metrics before and
# after each run. Prints, per run, the client's percentiles and the broker's mean
# time per Produce (last byte read to answer written) and per woken Fetch
# (the waking append's publish to the answer's last byte sent).
#
#   scripts/bench/broker-share.sh [runs]     (default 3; about 12 s per e2e run, 10 s per bare e2e)
#
# It measures under the cluster's kafgres.flush_policy (printed first; the
# relaxed figures of docs/benchmarks.md use page_cache). Topics are created
# per run and deleted afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNS=${1:-3}
BENCH=${KAFGRES_BENCH_BIN:-$ROOT/target/release/kafgres-bench}
set -a
# shellcheck source=/dev/null
source "$ROOT/.kafgres/env"
set +a
BOOTSTRAP=$KAFGRES_BOOTSTRAP

counters() {
    psql -Atc "select string_agg(value::text, ' ' order by name) from kafgres.broker_metrics
               where name in ('fetch_woken', 'fetch_woken_micros_total', 'produce_answered', 'produce_micros_total')"
}

# The span's histogram as "bound:count ..." (bound 0 = the open last bucket).
histogram() {
    psql -Atc "select string_agg(coalesce(below_micros, 0)::text || ':' || requests, ' ' order by below_micros nulls last)
               from kafgres.request_latency where span = '$1'"
}

# The bucket holding quantile Q of the requests between two histograms.
quantile() { # Q before after
    python3 - "$@" <<'PY'
import sys
q, before, after = float(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
grown = [(int(a.split(":")[0]), int(a.split(":")[1]) - int(b.split(":")[1])) for b, a in zip(before, after)]
total = sum(n for _, n in grown)
seen = 0
for bound, n in grown:
    seen += n
    if total and seen >= q * total:
        print(f"<{bound}" if bound else "slower than 8 s")
        break
else:
    print("-")
PY
}

per() { # total-before total-after count-before count-after
    local n=$(($4 - $3))
    if [ "$n" -gt 0 ]; then echo $((($2 - $1) / n)); else echo "-"; fi
}

echo "kafgres.flush_policy = $(psql -Atc 'show kafgres.flush_policy')"
topics=()
for i in $(seq 1 "$RUNS"); do
    for workload in sync e2e bare-sync bare-e2e; do
        topic=broker-share-$$-$workload-$i
        topics+=("$topic")
        read -r fw0 fwm0 pa0 pm0 <<<"$(counters)"
        hp0=$(histogram produce) hf0=$(histogram fetch_woken)
        common=(--bootstrap "$BOOTSTRAP" --topic "$topic" --create-partitions 1 --size 100)
        case $workload in
            sync) line=$("$BENCH" sync "${common[@]}" --count 2000 --warmup 200 2>/dev/null) ;;
            e2e) line=$("$BENCH" e2e "${common[@]}" --rate 1000 --seconds 10 --warmup-s 1 2>/dev/null) ;;
            bare-sync) line=$("$BENCH" bare "${common[@]}" --pattern sync --count 2000 --warmup 200 2>/dev/null) ;;
            bare-e2e) line=$("$BENCH" bare "${common[@]}" --pattern e2e --rate 1000 --count 10000 --warmup 1000 2>/dev/null) ;;
        esac
        read -r fw1 fwm1 pa1 pm1 <<<"$(counters)"
        hp1=$(histogram produce) hf1=$(histogram fetch_woken)
        percentiles=$(grep -o 'p50=[^ ]*\|p99=[^ ]*' <<<"$line" | tr '\n' ' ')
        echo "$workload run $i: ${percentiles}broker per produce $(per "$pm0" "$pm1" "$pa0" "$pa1") us" \
            "(p50 $(quantile 0.5 "$hp0" "$hp1"), p99 $(quantile 0.99 "$hp0" "$hp1")), per woken fetch" \
            "$(per "$fwm0" "$fwm1" "$fw0" "$fw1") us (p50 $(quantile 0.5 "$hf0" "$hf1"), p99 $(quantile 0.99 "$hf0" "$hf1"))"
    done
done
"$BENCH" delete-topics --bootstrap "$BOOTSTRAP" "${topics[@]}" >/dev/null 2>&1
