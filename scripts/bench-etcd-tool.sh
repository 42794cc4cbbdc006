#!/usr/bin/env bash
# etcd's own benchmark tool (go.etcd.io/etcd/v3 tools/benchmark, built by
# `make etcd-benchmark` from the Go module proxy) against etcd (Debian's
# etcd-server) and Cairn's etcd API, side by side in one run, at 3 and 5
# nodes, fsync on, defaults: the same unmodified client drives both.
#
#   scripts/bench-etcd-tool.sh                    # writes docs/benchmarks/etcd-tool/
#   NODES="3" CASES="put-1 put-1000" OUT=/tmp/r scripts/bench-etcd-tool.sh
#   SCALE=0.1 ...                                  # a tenth of the requests
#
# Cases (the tool's flags as in etcd's own performance docs): put-1 (1
# client, 1 connection), put-1000 (1000 clients over 100 connections),
# range-l and range-s (one key, linearizable and serializable, 1000 clients
# over 100 connections), txn-put (one put per txn, 1000 clients over 100
# connections). Keys of 8 bytes, values of 256, 100,000 keys.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

NODES=${NODES:-3 5}
CASES=${CASES:-put-1 put-1000 range-l range-s txn-put}
OUT=${OUT:-docs/benchmarks/etcd-tool}
SCALE=${SCALE:-1}
CAIRN=${CAIRN:-bin/cairn}
TOOL=${TOOL:-bin/etcd-benchmark}
ETCD_BASE=${ETCD_BASE:-32370}   # clients on +1..+5, peers on +11..+15
CAIRN_BASE=${CAIRN_BASE:-18180} # HTTP on +0..+4, etcd API on +100..+104, peers on +1000..+1004

[ -x "$CAIRN" ] || make build
[ -x "$TOOL" ] || make etcd-benchmark || true
if [ ! -x "$TOOL" ]; then
  echo "skipped: etcd's benchmark tool could not be built (see make etcd-benchmark)"
  exit 0
fi
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
  echo "installing Debian's etcd-server and etcd-client…"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null
fi

WORK=$(mktemp -d /tmp/cairn-etcd-tool.XXXXXX)
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; rm -rf "$WORK"' EXIT INT TERM
RES="$WORK/results"
mkdir -p "$RES"

n() { awk -v s="$SCALE" -v n="$1" 'BEGIN { v = int(n * s); if (v < 100) v = 100; print v }'; }

# bench SYSTEM NODES CASE ENDPOINTS: one run of the tool; its output in
# $RES/SYSTEM-NODES-CASE.txt.
bench() {
  local sys=$1 nodes=$2 c=$3 eps=$4 out args
  out="$RES/$sys-$nodes-$c.txt"
  case $c in
    put-1) args=(--conns 1 --clients 1 put --key-size 8 --val-size 256 --sequential-keys --key-space-size 100000 --total "$(n 3000)") ;;
    put-1000) args=(--conns 100 --clients 1000 put --key-size 8 --val-size 256 --sequential-keys --key-space-size 100000 --total "$(n 200000)") ;;
    range-l) args=(--conns 100 --clients 1000 range foo --consistency l --total "$(n 200000)") ;;
    range-s) args=(--conns 100 --clients 1000 range foo --consistency s --total "$(n 200000)") ;;
    txn-put) args=(--conns 100 --clients 1000 txn-put --key-size 8 --val-size 256 --key-space-size 100000 --total "$(n 100000)") ;;
    *) echo "unknown case $c"; exit 2 ;;
  esac
  echo "== $sys, $nodes nodes, $c"
  "$TOOL" --endpoints "$eps" "${args[@]}" >"$out" 2>"$out.log" || echo "the tool failed: $(tail -3 "$out.log")"
  grep -E "Requests/sec|Average|99% in" "$out" | tr -s ' \t' ' ' | paste -sd' ' || true
}

for nodes in $NODES; do
  # etcd: NODES members.
  cluster=""
  for i in $(seq 1 "$nodes"); do cluster+="e$i=http://127.0.0.1:$((ETCD_BASE + 10 + i)),"; done
  for i in $(seq 1 "$nodes"); do
    etcd --name "e$i" --data-dir "$WORK/etcd-$nodes-$i" \
      --listen-client-urls "http://127.0.0.1:$((ETCD_BASE + i))" --advertise-client-urls "http://127.0.0.1:$((ETCD_BASE + i))" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_BASE + 10 + i))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_BASE + 10 + i))" \
      --initial-cluster "${cluster%,}" --initial-cluster-state new --initial-cluster-token "cairn-tool-$nodes" \
      >"$WORK/etcd-$nodes-$i.log" 2>&1 &
    PIDS+=($!)
  done
  # Cairn: NODES nodes.
  CLUSTER_PIDS=()
  mkdir -p "$WORK/n$nodes"
  NODES_N=$nodes cairn_cluster_start "$CAIRN" "$CAIRN_BASE" "$WORK/n$nodes"
  PIDS+=("${CLUSTER_PIDS[@]}")
  etcd_eps="" cairn_eps=""
  for i in $(seq 1 "$nodes"); do
    etcd_eps+="127.0.0.1:$((ETCD_BASE + i)),"
    cairn_eps+="127.0.0.1:$((CAIRN_BASE + 99 + i)),"
  done
  ok=0
  for _ in $(seq 1 150); do
    ok=1
    for i in $(seq 1 "$nodes"); do curl -fsS "http://127.0.0.1:$((ETCD_BASE + i))/health" 2>/dev/null | grep -q true || ok=0; done
    [ $ok = 1 ] && break
    sleep 0.2
  done
  [ $ok = 1 ] && NODES_N=$nodes cairn_cluster_wait "$CAIRN_BASE" || { echo "clusters did not become ready"; tail "$WORK"/*.log "$WORK"/n*/*.log; exit 1; }
  # The range cases read key foo: write it once on both.
  for eps in "$etcd_eps" "$cairn_eps"; do
    ETCDCTL_API=3 etcdctl --endpoints "${eps%,}" put foo bar >/dev/null
  done
  # The systems take turns case by case, Cairn first.
  for c in $CASES; do
    bench cairn "$nodes" "$c" "${cairn_eps%,}"
    bench etcd "$nodes" "$c" "${etcd_eps%,}"
  done
  stop_all
done

# The report: one row per system, node count and case, from the tool's
# own summary.
mkdir -p "$OUT"
row() { # file → requests/s, average ms, p50, p99, p99.9 ms, errors
  awk '
    /Requests\/sec:/ { rps = $2 }
    /Average:/ { avg = $2 * 1000 }
    / 50% in / { p50 = $3 * 1000 }
    / 99% in / { p99 = $3 * 1000 }
    / 99.9% in / { p999 = $3 * 1000 }
    /^Error distribution:/ { inerr = 1; next }
    inerr && /^ *\[[0-9]+\]/ { gsub(/[^0-9]/, "", $1); errs += $1 }
    END { printf "%.0f | %.2f | %.2f | %.2f | %.2f | %d", rps, avg, p50, p99, p999, errs }' "$1"
}
{
  echo "# Cairn vs etcd, driven by etcd's own benchmark tool"
  echo
  echo "Produced by \`scripts/bench-etcd-tool.sh\` (SCALE=$SCALE) on $(date -u +%FT%TZ):"
  echo "etcd's benchmark tool ($("$TOOL" --help >/dev/null 2>&1 && echo "go.etcd.io/etcd/v3 $(awk '/go.etcd.io\/etcd\/v3 /{print $NF}' tools/etcd-benchmark/go.mod)"))"
  echo "drives a local etcd ($(etcd --version | head -1)) and a local Cairn ($("$CAIRN" version))"
  echo "through the same gRPC calls. Both fsync every acknowledged write; both run"
  echo "with their defaults on 127.0.0.1, the tool on the same machine"
  echo "($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))."
  echo "The two systems take turns case by case; the idle one is running."
  echo
  echo "| nodes | case | system | requests/s | mean ms | p50 ms | p99 ms | p99.9 ms | errors |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for nodes in $NODES; do
    for c in $CASES; do
      for sys in cairn etcd; do
        f="$RES/$sys-$nodes-$c.txt"
        [ -s "$f" ] && echo "| $nodes | $c | $sys | $(row "$f") |"
      done
    done
  done
  echo
  echo "## Ratios (Cairn / etcd)"
  echo
  echo "| nodes | case | throughput | mean latency | p99 |"
  echo "|---|---|---|---|---|"
  for nodes in $NODES; do
    for c in $CASES; do
      a="$RES/cairn-$nodes-$c.txt" b="$RES/etcd-$nodes-$c.txt"
      [ -s "$a" ] && [ -s "$b" ] || continue
      paste -d'|' <(row "$a") <(row "$b") | awk -F'|' -v n="$nodes" -v c="$c" '
        { printf "| %s | %s | %.2f× | %.2f× | %.2f× |\n", n, c, ($7 > 0 ? $1 / $7 : 0), ($8 > 0 ? $2 / $8 : 0), ($10 > 0 ? $4 / $10 : 0) }'
    done
  done
  echo
  echo "## The tool's commands"
  echo
  echo '```'
  echo "put-1:    benchmark --endpoints EPS --conns 1 --clients 1 put --key-size 8 --val-size 256 --sequential-keys --key-space-size 100000 --total $(n 3000)"
  echo "put-1000: benchmark --endpoints EPS --conns 100 --clients 1000 put --key-size 8 --val-size 256 --sequential-keys --key-space-size 100000 --total $(n 200000)"
  echo "range-l:  benchmark --endpoints EPS --conns 100 --clients 1000 range foo --consistency l --total $(n 200000)"
  echo "range-s:  benchmark --endpoints EPS --conns 100 --clients 1000 range foo --consistency s --total $(n 200000)"
  echo "txn-put:  benchmark --endpoints EPS --conns 100 --clients 1000 txn-put --key-size 8 --val-size 256 --key-space-size 100000 --total $(n 100000)"
  echo '```'
} >"$OUT/report.md"
for f in "$RES"/*.txt; do cp "$f" "$OUT/$(basename "$f")"; done
echo "report: $OUT/report.md"
