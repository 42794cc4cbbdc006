#!/usr/bin/env bash
# Before/after: start a fresh three-node cluster of each given cairn binary in
# turn on 127.0.0.1, run the same `cairn bench` against it, stop it. Used to
# justify each performance change with a measurement (docs/performance.md).
#
#   scripts/ab.sh /tmp/cairn-before bin/cairn -- --workload put --clients 1000 --conns 100 --duration 8s
#   ROUNDS=2 scripts/ab.sh A B -- …     # A B A B: shows the run-to-run noise
#
# Every run's results land in $OUT/<n>-<binary name>/ (default /tmp/cairn-ab).
# Extra `cairn serve` flags for every node: SERVE_FLAGS="--shards 8".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#bins[@]} -ge 1 ] || { echo "usage: $0 BIN [BIN…] -- BENCH-FLAGS…"; exit 2; }
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-/tmp/cairn-ab}
BASE=${BASE:-18280} # HTTP on +0..+2, peers on +1000..+1002
BENCH=${BENCH:-${bins[-1]}}
mkdir -p "$OUT"

PIDS=()
WORK=""
stop() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
}
trap stop EXIT INT TERM

# metric_sums: leader-applied writes and WAL fsyncs summed over the nodes.
metric_sums() {
  local w=0 f=0 i v
  for i in 0 1 2; do
    v=$(curl -fsS "http://127.0.0.1:$((BASE + i))/metrics" 2>/dev/null) || continue
    w=$((w + $(awk '/^cairn_leader_writes_applied_total /{printf "%d", $2}' <<<"$v")))
    f=$((f + $(awk '/^cairn_storage_wal_fsyncs_total /{printf "%d", $2}' <<<"$v")))
  done
  echo "$w $f"
}

n=0
for _ in $(seq 1 "$ROUNDS"); do
  for bin in "${bins[@]}"; do
    n=$((n + 1))
    WORK=$(mktemp -d /tmp/cairn-ab-data.XXXXXX)
    CLUSTER_PIDS=()
    # shellcheck disable=SC2086
    cairn_cluster_start "$bin" "$BASE" "$WORK" ${SERVE_FLAGS:-}
    PIDS=("${CLUSTER_PIDS[@]}")
    target="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
    cairn_cluster_wait "$BASE" || { echo "cluster of $bin did not become ready"; tail "$WORK"/*.log; exit 1; }
    dir="$OUT/$n-$(basename "$bin")"
    echo "== run $n: $bin"
    m0=$(metric_sums)
    cpu0=$(cpu_ticks "${PIDS[@]}")
    TIMEFORMAT='%U %S'
    { time "$BENCH" bench --target "$target" --out "$dir" "$@" 2>/dev/null |
      grep -E "throughput|  (50|99)%|errors"; } 2>"$dir.time" || true
    cpu1=$(cpu_ticks "${PIDS[@]}")
    m1=$(metric_sums)
    ops=$(grep -m1 -o '"ops": *[0-9]*' "$dir/results.json" | grep -o '[0-9]*$')
    # CPU of the three nodes (user + system, warm-up included) per
    # measured operation: steadier than throughput on a saturated machine.
    awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v ops="$ops" \
      'BEGIN { if (ops > 0) printf "  nodes CPU: %.1f s, %.1f µs per op\n", t / hz, t / hz / ops * 1e6 }'
    # The load generator's CPU (user + system) per measured operation.
    awk -v ops="$ops" '{ if (ops > 0) printf "  load generator CPU: %.1f s, %.1f µs per op\n", $1 + $2, ($1 + $2) / ops * 1e6 }' "$dir.time"
    # Writes acknowledged by leaders per WAL fsync, over all three nodes.
    read -r w0 f0 <<<"$m0"
    read -r w1 f1 <<<"$m1"
    awk -v w=$((w1 - w0)) -v f=$((f1 - f0)) \
      'BEGIN { if (f > 0) printf "  leader writes %d, WAL fsyncs %d: %.1f writes per fsync\n", w, f, w / f }'
    stop
  done
done
