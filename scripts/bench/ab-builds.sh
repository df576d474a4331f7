#!/usr/bin/env bash
# A/B of two builds of the extension library on the dev cluster: installs
# each in turn (alternating which goes first per round), restarts the
# cluster, and runs kafgres-bench `produce` with one producer and one
# partition for each record size. Prints one line per run.
#
#   scripts/bench/ab-builds.sh A.so B.so [rounds] [sizes...]
#       (default 3 rounds, sizes 1024 262144; 10 s per run)
#
# Build the two libraries with `cargo pgrx install --release` from each
# revision and copy $(pg_config --pkglibdir)/kafgres.so aside after each.
# The library installed last stays installed: reinstall the one you want
# (./kafgres stop; ./kafgres start rebuilds and installs the checkout's).
# The cluster keeps its settings (kafgres.flush_policy included). The runs
# go with the VM's memory settled, as in bench-compare (host_memory.py),
# and each starts on a quiet disk (disk_quiet.py).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 2 ] || { sed -n 2,16p "$0"; exit 2; }
[ -n "${KAFGRES_MEMORY_SETTLED:-}" ] || exec python3 "$ROOT/scripts/bench/host_memory.py" -- "$0" "$@"
A=$1 B=$2
ROUNDS=${3:-3}
shift $(($# < 3 ? $# : 3))
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1024 262144)
BENCH=${KAFGRES_BENCH_BIN:-$ROOT/target/release/kafgres-bench}
set -a
# shellcheck source=/dev/null
source "$ROOT/.kafgres/env"
set +a
LIB="$(pg_config --pkglibdir)/kafgres.so"

wait_for_broker() {
    for _ in $(seq 1 100); do
        "$BENCH" delete-topics --bootstrap "$KAFGRES_BOOTSTRAP" ab-builds-probe >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "the broker did not come back after the restart" >&2
    return 1
}

echo "kafgres.flush_policy = $(psql -Atc 'show kafgres.flush_policy')"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order=("$A" "$B"); else order=("$B" "$A"); fi
    for lib in "${order[@]}"; do
        # A new inode, renamed into place: rewriting the library file that
        # the running postmaster has mapped would crash it.
        install -m 755 "$lib" "$LIB.ab-builds.tmp"
        mv -f "$LIB.ab-builds.tmp" "$LIB"
        "$ROOT/kafgres" restart >/dev/null
        wait_for_broker
        for size in "${SIZES[@]}"; do
            topic=ab-builds-$$-$round-$size-$(basename "$lib" .so)
            line=$("$BENCH" produce --bootstrap "$KAFGRES_BOOTSTRAP" --topic "$topic" --create-partitions 1 \
                --size "$size" --producers 1 --seconds 10 2>/dev/null || true)
            echo "round $round $(basename "$lib") size $size: $(grep -o 'errors=[^ ]*\|records_per_s=[^ ]*\|mb_per_s=[^ ]*' <<<"$line" | tr '\n' ' ')"
            "$BENCH" delete-topics --bootstrap "$KAFGRES_BOOTSTRAP" "$topic" >/dev/null 2>&1 || true
            # The next run starts once the deleted topic's discards and the
            # write-back are over (an fsync run would wait for them).
            python3 -c "import sys; sys.path.insert(0, '$ROOT/scripts/bench'); from disk_quiet import settle_disk; settle_disk()"
        done
    done
done
