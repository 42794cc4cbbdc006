#!/usr/bin/env bash
# Write amplification with and without value separation, side by side in
# one run: two three-node clusters (fsync on), one with every value inline
# (--value-separation -1), one with the default (values of 1 KiB and more in
# blob files), each driven in turn by the same update-heavy load of large
# values; then bytes written to disk (WAL, flushes, compactions, summed over
# the three nodes, from /metrics) per byte acknowledged (replicated three
# times).
#
#   scripts/write-amp.sh                       # 8 KiB values over 20000 keys, 60 s each
#   VAL=16384 KEYS=10000 DURATION=120s scripts/write-amp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

VAL=${VAL:-8192}
KEYS=${KEYS:-20000}
DURATION=${DURATION:-60s}
CLIENTS=${CLIENTS:-100}
CAIRN=${CAIRN:-bin/cairn}
BASE=${BASE:-19280}
[ -x "$CAIRN" ] || make build

WORK=$(mktemp -d /tmp/cairn-write-amp.XXXXXX)
CLUSTER_PIDS=()
cleanup() {
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# written BASE [KIND]: bytes written to disk by the three nodes so far (of
# one kind: wal, flush, compaction, ingest; default all).
written() {
  local base=$1 kind=${2:-} sum=0 i v
  for i in 0 1 2; do
    v=$(curl -fsS "http://127.0.0.1:$((base + i))/metrics" |
      awk -v k="$kind" '/^cairn_storage_bytes_written_total/ && (k == "" || index($0, "kind=\"" k "\"")) {s += $2} END {printf "%.0f", s}')
    sum=$((sum + v))
  done
  echo "$sum"
}

printf "%-9s %8s %9s %9s %6s %8s %8s %8s %8s\n" label ops/s user_MB disk_MB WA p99_ms wal_MB flush_MB comp_MB
for label in inline separated; do
  sep=-1; [ "$label" = separated ] && sep=1024
  base=$BASE; [ "$label" = separated ] && base=$((BASE + 10))
  mkdir -p "$WORK/$label"
  CLUSTER_PIDS=()
  cairn_cluster_start "$CAIRN" "$base" "$WORK/$label" --value-separation "$sep"
  cairn_cluster_wait "$base" || { echo "cluster $label not ready"; exit 1; }
  target="http://127.0.0.1:$base,http://127.0.0.1:$((base + 1)),http://127.0.0.1:$((base + 2))"
  w0=$(written "$base"); l0=$(written "$base" wal); f0=$(written "$base" flush); c0=$(written "$base" compaction)
  "$CAIRN" bench --target "$target" --workload put --keys "$KEYS" --val-size "$VAL" --key-size 16 \
    --clients "$CLIENTS" --duration "$DURATION" --warmup 0s --out "$WORK/$label/bench" >"$WORK/$label/bench.log" 2>&1
  sleep 5 # let flushes and compactions the load started finish
  w1=$(written "$base"); l1=$(written "$base" wal); f1=$(written "$base" flush); c1=$(written "$base" compaction)
  python3 - "$WORK/$label/bench/results.json" "$w0" "$w1" "$VAL" "$label" $((l1 - l0)) $((f1 - f0)) $((c1 - c0)) <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w0, w1, val, label = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
wal, flush, comp = (int(x) / 1e6 for x in sys.argv[6:9])
ops = r["ops"]
user = ops * (val + 16) * 3  # three replicas of every acknowledged byte
print("%-9s %8.0f %9.1f %9.1f %6.2f %8.1f %8.1f %8.1f %8.1f" % (label, r["throughput"], user / 1e6, (w1 - w0) / 1e6, (w1 - w0) / user, r["latency_ms"]["p99"], wal, flush, comp))
PY
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
done
