#!/usr/bin/env bash
# The volume test (cairn bench --workload nhs), side by side in one run:
# a fresh three-node cluster (fsync on) per configuration, in turn — by
# default values separated (the default) and every value inline
# (--value-separation -1) — each loaded with the same objects, then driven
# by the same nhs load; then `cairn report` over the runs draws the three
# charts over time (throughput, p99 update latency, mean 2i query time).
# Prints, per run, the throughput, the update p99, the mean 2i query time,
# the write amplification of the measured phase (disk bytes the three
# nodes wrote per byte acknowledged, times three replicas; a value averages
# 10 KiB), the soft-limit rejections the nodes counted, and the
# refusals (503, waited out and tried again) the load generator counted
# per operation kind. 2i_mean_ms includes the waits after refusals,
# 2i_answ_ms is the mean of the attempts answered (the same when no 2i
# query was refused).
#
#   scripts/volume.sh                                   # 60 s per run, 20000 objects
#   DURATION=30m KEYS=400000 CLIENTS=128 scripts/volume.sh
#   CONFIGS="limit:--shard-soft-limit=64 nolimit:--shard-soft-limit=0" scripts/volume.sh
#   CONFIGS="limit:--shard-soft-limit=4 limit-l:--shard-soft-limit=4:--index-consistency=l" scripts/volume.sh
#
# A configuration is LABEL:SERVE_FLAGS[:BENCH_FLAGS], flags comma-separated:
# SERVE_FLAGS go to the nodes, BENCH_FLAGS to that configuration's bench
# runs (after the global BENCH_FLAGS).
#
# IDLE (default 20s) first measures the 2i query alone on the loaded
# objects (one client, nothing else running): the unloaded figure the
# loaded mean 2i query time is compared with (0 skips it). BENCH_FLAGS
# go to every cairn bench run (e.g. "--consistency s", or
# "--index-consistency l" for linearizable 2i queries). PROFILE=N takes
# an N-second CPU profile of node 1 (/debug/pprof) PROFILE_AT seconds
# (default 30) into each measured run, into $OUT/LABEL.node1.cpu.pprof.
# Every port is BASE.. (HTTP), BASE+100.. (etcd API), BASE+1000.. (peers).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

KEYS=${KEYS:-20000}
DURATION=${DURATION:-60s}
CLIENTS=${CLIENTS:-64}
CAIRN=${CAIRN:-bin/cairn}
BASE=${BASE:-19380}
OUT=${OUT:-/tmp/cairn-volume}
CONFIGS=${CONFIGS:-"separated: inline:--value-separation=-1"}
IDLE=${IDLE:-20s}
BENCH_FLAGS=${BENCH_FLAGS:-}
PROFILE=${PROFILE:-0}
PROFILE_AT=${PROFILE_AT:-30}
[ -x "$CAIRN" ] || make build
mkdir -p "$OUT"

WORK=""
CLUSTER_PIDS=()
cleanup() {
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
}
trap cleanup EXIT INT TERM

# metric BASE NAME [MATCH]: a counter summed over the three nodes (the
# series of NAME whose line contains MATCH).
metric() {
  local base=$1 name=$2 match=${3:-} sum=0 i v
  for i in 0 1 2; do
    v=$(curl -fsS "http://127.0.0.1:$((base + i))/metrics" |
      awk -v n="$name" -v m="$match" 'index($0, n) == 1 && (m == "" || index($0, m)) {s += $2} END {printf "%.0f", s}')
    sum=$((sum + v))
  done
  echo "$sum"
}

printf "%-10s %8s %9s %9s %10s %10s %10s %9s %9s %6s %9s  %s\n" run ops/s refused/s update/s upd_p99_ms 2i_mean_ms 2i_answ_ms 2i_p99_ms 2i_idle_ms WA rejected "refused by kind"
dirs=()
for cfg in $CONFIGS; do
  label=${cfg%%:*}
  rest=${cfg#*:}
  flags=$(tr ',' ' ' <<<"${rest%%:*}")
  cfg_bench=""
  [[ $rest == *:* ]] && cfg_bench=$(tr ',' ' ' <<<"${rest#*:}")
  WORK=$(mktemp -d /tmp/cairn-volume-data.XXXXXX)
  CLUSTER_PIDS=()
  # shellcheck disable=SC2086
  cairn_cluster_start "$CAIRN" "$BASE" "$WORK" $flags
  cairn_cluster_wait "$BASE" || { echo "cluster $label not ready"; tail "$WORK"/*.log; exit 1; }
  target="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
  # Load the objects (and one operation), then measure on its own.
  "$CAIRN" bench --target "$target" --workload nhs --keys "$KEYS" --clients "$CLIENTS" --total 1 --warmup 0s \
    --out "$WORK/load" >"$OUT/$label.load.log" 2>&1
  sleep 5 # let the load's flushes and compactions settle
  if [ "$IDLE" != 0 ]; then
    # shellcheck disable=SC2086
    "$CAIRN" bench --target "$target" --workload nhs --keys "$KEYS" --clients 1 --duration "$IDLE" --warmup 2s \
      --no-preload --mix get=0,head_get=0,update=0,insert=0,index_query=1 $BENCH_FLAGS $cfg_bench \
      --out "$OUT/$label.idle" >"$OUT/$label.idle.log" 2>&1
  fi
  w0=$(metric "$BASE" cairn_storage_bytes_written_total); r0=$(metric "$BASE" cairn_shard_soft_limit_rejections_total)
  "$CAIRN" bench --target "$target" --workload nhs --keys "$KEYS" --clients "$CLIENTS" --duration "$DURATION" --warmup 5s \
    --no-preload --label "cairn $label" $BENCH_FLAGS $cfg_bench --out "$OUT/$label" >"$OUT/$label.log" 2>&1 &
  bench=$!
  if [ "$PROFILE" != 0 ]; then
    # Node 1's CPU profile, once the load has run PROFILE_AT seconds.
    sleep "$PROFILE_AT"
    curl -fsS -o "$OUT/$label.node1.cpu.pprof" "http://127.0.0.1:$BASE/debug/pprof/profile?seconds=$PROFILE" || true
  fi
  wait "$bench"
  w1=$(metric "$BASE" cairn_storage_bytes_written_total); r1=$(metric "$BASE" cairn_shard_soft_limit_rejections_total)
  python3 - "$OUT/$label/results.json" "$label" $((w1 - w0)) $((r1 - r0)) "$OUT/$label.idle/results.json" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
label, disk, rejected = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
idle = float("nan")
if os.path.exists(sys.argv[5]):
    idle = json.load(open(sys.argv[5]))["operations"]["index_query"]["latency_ms"]["mean"]
op = r["operations"]
writes = op.get("update", {}).get("ops", 0) + op.get("insert", {}).get("ops", 0)
user = writes * 10240 * 3  # a value averages 10 KiB; three replicas
iq = op["index_query"]
kinds = " ".join("%s=%d" % (k, op[k].get("refused", 0)) for k in sorted(op))
print("%-10s %8.0f %9.0f %9.0f %10.1f %10.2f %10.2f %9.1f %9.2f %6.2f %9d  %s" % (label, r["throughput"],
      r.get("refused", 0) / r["elapsed_seconds"], op["update"]["throughput"], op["update"]["latency_ms"]["p99"],
      iq["latency_ms"]["mean"], iq.get("answered_latency_ms", iq["latency_ms"])["mean"], iq["latency_ms"]["p99"],
      idle, disk / user if user else 0, rejected, kinds))
PY
  dirs+=("$OUT/$label")
  cleanup
done
"$CAIRN" report --out "$OUT/report" --title "Volume test (nhs, $DURATION, $KEYS objects, $CLIENTS clients)" "${dirs[@]}" >/dev/null
echo "report: $OUT/report/report.md"
