#!/usr/bin/env bash
# Replication to a standby, measured (issue 19; docs/benchmarks.md): throughput
# and latency with no, an asynchronous and a synchronous standby, lag under
# load, catch-up, the WAL path's cost, promotion. Against the dev cluster
# (started here if needed) and a standby it makes and removes itself.
#
#   scripts/bench-replication.sh [--rounds N] [--seconds S] [--backlog-mb MB]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$HOME/.cargo/bin:$PATH
"$ROOT/kafgres" start >/dev/null
(cd "$ROOT" && cargo build --release -q -p kafgres-bench)
exec python3 "$ROOT/scripts/bench/replication.py" "$@"
