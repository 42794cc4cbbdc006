#!/usr/bin/env bash
# Side-by-side benchmark: a three-member etcd (Debian's etcd-server, fsync on,
# default settings) and a three-node Cairn (fsync on, default settings), both
# on 127.0.0.1, driven by `cairn bench` in one run; then `cairn report`.
#
#   make bench-vs-etcd                  # writes docs/benchmarks/vs-etcd/
#   DURATION=30s OUT=/tmp/r make bench-vs-etcd
#   CASES="put-1 put-1000" OUT=/tmp/r scripts/bench-vs-etcd.sh   # some cases only
#   (put-half: the open loop at half of each system's put-1000 throughput)
#   ETCD_TOOL=0 ...   # without the runs of etcd's own benchmark tool (scripts/bench-etcd-tool.sh)
#   WRK=0 ...         # without the wrk runs of scripts/bench-entity.sh
#   FEATURES=0 ...    # without the runs with features on (scripts/bench-features.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

DURATION=${DURATION:-20s}
SWEEP_DURATION=${SWEEP_DURATION:-8s}
SWEEP=${SWEEP:-1,2,4,8,16,32,64,128}
RECORDS=${RECORDS:-10000}
CASES=${CASES:-put-1 put-1000 put-1000-h2 put-1000-h1 put-half range-lin-1000 range-ser-1000 ycsb-a entity-4}
OUT=${OUT:-docs/benchmarks/vs-etcd}
CAIRN=${CAIRN:-bin/cairn}
ETCD_BASE=${ETCD_BASE:-32370}   # clients on +1..+3, peers on +11..+13
CAIRN_BASE=${CAIRN_BASE:-18180} # HTTP on +0..+2, peers on +1000..+1002

if ! command -v etcd >/dev/null; then
  echo "installing Debian's etcd-server…"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
fi
[ -x "$CAIRN" ] || make build

WORK=$(mktemp -d /tmp/cairn-vs-etcd.XXXXXX)
PIDS=()
ETCD_PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# etcd: three members.
cluster=""
for i in 1 2 3; do cluster+="e$i=http://127.0.0.1:$((ETCD_BASE+10+i)),"; done
cluster=${cluster%,}
for i in 1 2 3; do
  etcd --name "e$i" --data-dir "$WORK/etcd-$i" \
    --listen-client-urls "http://127.0.0.1:$((ETCD_BASE+i))" --advertise-client-urls "http://127.0.0.1:$((ETCD_BASE+i))" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_BASE+10+i))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_BASE+10+i))" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token cairn-bench \
    >"$WORK/etcd-$i.log" 2>&1 &
  PIDS+=($!)
  ETCD_PIDS+=($!)
done
ETCD="etcd://127.0.0.1:$((ETCD_BASE+1)),127.0.0.1:$((ETCD_BASE+2)),127.0.0.1:$((ETCD_BASE+3))"

# Cairn: three nodes.
CLUSTER_PIDS=()
cairn_cluster_start "$CAIRN" "$CAIRN_BASE" "$WORK"
PIDS+=("${CLUSTER_PIDS[@]}")
CAIRN_T="http://127.0.0.1:$CAIRN_BASE,http://127.0.0.1:$((CAIRN_BASE+1)),http://127.0.0.1:$((CAIRN_BASE+2))"

echo "waiting for both clusters…"
ok=0
for _ in $(seq 1 150); do
  ok=1
  for i in 1 2 3; do curl -fsS "http://127.0.0.1:$((ETCD_BASE+i))/health" 2>/dev/null | grep -q true || ok=0; done
  [ $ok = 1 ] && break
  sleep 0.2
done
[ $ok = 1 ] && cairn_cluster_wait "$CAIRN_BASE" || { echo "clusters did not become ready"; tail "$WORK"/*.log; exit 1; }

RES="$WORK/results"
mkdir -p "$RES"
# run label target args…: one bench run; with SYSTEM_PIDS set, the CPU the
# system's processes and the load generator used per operation goes to
# $RES/cpu.tsv (the clock ticks of /proc, so the kernel's work in their
# system calls counts).
run() { # label target args...
  local label=$1 target=$2 dir c0 c1 ops; shift 2
  dir="$RES/${label// /_}"
  echo "== $label"
  c0=$(cpu_ticks "${SYSTEM_PIDS[@]}")
  local TIMEFORMAT='%U %S'
  { time "$CAIRN" bench --target "$target" --label "$label" --out "$dir" --duration "$DURATION" "$@" 2>&3 |
      grep -E "throughput|99%|errors by kind"; } 3>&2 2>"$dir.time" || true
  c1=$(cpu_ticks "${SYSTEM_PIDS[@]}")
  ops=$(grep -m1 -o '"ops": *[0-9]*' "$dir/results.json" | grep -o '[0-9]*$' || echo 0)
  awk -v l="$label" -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v ops="$ops" '
    { if (ops > 0) printf "%s\t%d\t%.1f\t%.1f\n", l, ops, t / hz / ops * 1e6, ($1 + $2) / ops * 1e6 }' "$dir.time" >>"$RES/cpu.tsv"
}
want() { [[ " $CASES " == *" $1 "* ]]; }
# Cairn over HTTP/1.1 with pipelining: like etcd's gRPC, the clients share
# the connections with many requests in flight on each; each request goes
# to the node leading its key's shard (--route leader, the default), as
# etcd's requests go to the member of their connection. The two systems
# take turns case by case, so a change in the machine's speed during the
# run (this disk's fsync latency varies by 2x over minutes) does not fall
# on one system's cases only.
both() { # case, bench args...
  local c=$1 sys t proto
  shift
  want "$c" || return 0
  for sys in cairn etcd; do
    t=$CAIRN_T; proto=(--pipeline 64); SYSTEM_PIDS=("${CLUSTER_PIDS[@]}")
    [ $sys = etcd ] && { t=$ETCD; proto=(); SYSTEM_PIDS=("${ETCD_PIDS[@]}"); }
    run "$sys $c" "$t" "${proto[@]}" "$@"
  done
}
both put-1          --workload put --key-size 8 --val-size 256 --clients 1 --conns 1
both put-1000       --workload put --key-size 8 --val-size 256 --clients 1000 --conns 100
# The same put over the protocols ordinary clients use, Cairn only (beside
# etcd's put-1000): HTTP/2, many requests multiplexed on each connection
# as etcd's gRPC does (put-1000-h2), and HTTP/1.1 one request at a time
# per connection, as wrk and curl (put-1000-h1: 100 in flight).
for c in put-1000-h2 put-1000-h1; do
  proto=(--http 2); [ $c = put-1000-h1 ] && proto=(--pipeline 1)
  want $c && SYSTEM_PIDS=("${CLUSTER_PIDS[@]}") &&
    run "cairn $c" "$CAIRN_T" "${proto[@]}" --workload put --key-size 8 --val-size 256 --clients 1000 --conns 100
done
both range-lin-1000 --workload range --key-size 8 --val-size 256 --keys 10000 --consistency l --clients 1000 --conns 100
both range-ser-1000 --workload range --key-size 8 --val-size 256 --keys 10000 --consistency s --clients 1000 --conns 100 --no-preload
both ycsb-a         --workload ycsb-a --records "$RECORDS" --sweep "$SWEEP" --duration "$SWEEP_DURATION"
# Half-loaded latency: the open loop (latency from each operation's due
# time) at half of each system's own maximum put throughput, measured by
# put-1000 in this run (or, without that case, by a short run of the same
# shape first), with the same clients and connections.
if want put-half; then
  for sys in cairn etcd; do
    t=$CAIRN_T; proto=(--pipeline 64); SYSTEM_PIDS=("${CLUSTER_PIDS[@]}")
    [ $sys = etcd ] && { t=$ETCD; proto=(); SYSTEM_PIDS=("${ETCD_PIDS[@]}"); }
    max="$RES/${sys}_put-1000/results.json"
    if [ ! -f "$max" ]; then
      DURATION=$SWEEP_DURATION run "$sys put-max" "$t" "${proto[@]}" --workload put --key-size 8 --val-size 256 --clients 1000 --conns 100
      max="$RES/${sys}_put-max/results.json"
    fi
    rate=$(python3 -c 'import json,sys; print("%.0f" % (json.load(open(sys.argv[1]))["throughput"] / 2))' "$max")
    run "$sys put-half" "$t" "${proto[@]}" --workload put --key-size 8 --val-size 256 --clients 1000 --conns 100 --rate "$rate"
  done
fi
want entity-4 && SYSTEM_PIDS=("${CLUSTER_PIDS[@]}") && run "cairn entity-4" "$CAIRN_T" --workload entity --clients 4 --conns 4 --keys 10000 --mix put=50,get=50

# Fsync efficiency on Cairn: storage syncs and HTTP requests counted by the nodes.
for i in 1 2 3; do
  curl -fsS "http://127.0.0.1:$((CAIRN_BASE+i-1))/metrics" | grep -E '^cairn_(storage_(syncs|commits|wal_fsyncs)_total|leader_writes_applied_total)' | sed "s/^/node $i: /"
done > "$RES/cairn-metrics.txt" || true

mkdir -p "$OUT"
rm -f "$OUT"/*.svg "$OUT"/report.md "$OUT"/report.html
dirs=()
for sys in cairn etcd; do
  for c in $CASES; do if [ -d "$RES/${sys}_$c" ]; then dirs+=("$RES/${sys}_$c"); fi; done
done
# Interleave so the report's first (baseline) run is Cairn's and pairs sit together.
"$CAIRN" report "${dirs[@]}" --out "$OUT" --title "Cairn vs etcd, side by side"
{
  echo "# Machine and versions"
  echo
  echo "- date: $(date -u +%FT%TZ)"
  echo "- CPU: $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "- memory: $(free -h | awk '/Mem:/{print $2}')"
  echo "- kernel: $(uname -r)"
  echo "- disk: $(df -h "$WORK" | awk 'NR==2{print $1, $2}')"
  echo "- etcd: $(etcd --version | head -1)"
  echo "- cairn: $("$CAIRN" version)"
  echo "- go: $(go version 2>/dev/null || echo n/a)"
  echo "- durations: $DURATION per run, $SWEEP_DURATION per sweep point; sweep $SWEEP; YCSB records $RECORDS"
  echo
  echo "Both systems fsync every acknowledged write (defaults). Load generator, three etcd"
  echo "members and three Cairn nodes share this machine; the idle system is running while"
  echo "the other is measured. The systems take turns case by case (Cairn first)."
  echo
  echo "## CPU per operation"
  echo
  echo "User and system CPU of the system's three processes (the kernel's work in their"
  echo "system calls included) and of the load generator, over each run (warm-up"
  echo "included), divided by the operations measured. A sweep's figure covers all its points."
  echo
  echo "| run | operations | system µs/op | load generator µs/op |"
  echo "|---|---|---|---|"
  awk -F'\t' '{ printf "| %s | %d | %.1f | %.1f |\n", $1, $2, $3, $4 }' "$RES/cpu.tsv"
  echo
  echo "## Cairn storage counters at the end of the run"
  echo
  echo '```'
  cat "$RES/cairn-metrics.txt"
  echo '```'
} > "$OUT/machine.md"
echo "report: $OUT/report.md"

cleanup
trap - EXIT INT TERM

# wrk (Debian's) against the entity API, one request at a time per
# connection (scripts/bench-entity.sh, on a fresh cluster of its own); its
# table joins the report.
if [ "${WRK:-1}" = 1 ]; then
  if CAIRN="$CAIRN" DURATION="$DURATION" scripts/bench-entity.sh >"$OUT/entity-wrk.txt" 2>&1; then
    {
      echo
      echo "## The entity API through wrk"
      echo
      echo "\`scripts/bench-entity.sh\` (\`make bench-entity\`): wrk, plain HTTP/1.1 keep-alive,"
      echo "one request at a time per connection, 50/50 PUT/GET of \`/v0/entity?id=<1..10000>\`,"
      echo "$DURATION per point, against a fresh three-node Cairn:"
      echo
      echo '```'
      sed -n '/^replicas/,$p' "$OUT/entity-wrk.txt"
      echo '```'
    } >>"$OUT/report.md"
  else
    echo "bench-entity failed (see $OUT/entity-wrk.txt)"
  fi
fi

# etcd's own benchmark tool drives both systems too (3 and 5 nodes), once
# the clusters above are stopped; its table joins the report.
if [ "${ETCD_TOOL:-1}" = 1 ]; then
  # The committed report's tool run goes where `make bench-etcd-tool`
  # writes it (docs/benchmarks/etcd-tool); another OUT gets it inside.
  tool_out="$OUT/etcd-tool" tool_link="etcd-tool/report.md"
  [ "$OUT" = docs/benchmarks/vs-etcd ] && tool_out=docs/benchmarks/etcd-tool tool_link=../etcd-tool/report.md
  OUT="$tool_out" CAIRN="$CAIRN" ETCD_BASE="$ETCD_BASE" CAIRN_BASE="$CAIRN_BASE" scripts/bench-etcd-tool.sh
  if [ -s "$tool_out/report.md" ]; then
    {
      echo
      echo "## Driven by etcd's own benchmark tool"
      echo
      echo "The same cases driven by etcd's benchmark tool instead of \`cairn bench\`"
      echo "([$tool_link]($tool_link) has the commands):"
      echo
      sed -n '/^| nodes | case | system/,/^$/p' "$OUT/etcd-tool/report.md"
    } >>"$OUT/report.md"
  fi
fi

# The goals' cases with features on (TLS on the client port, two index
# terms per write), beside the default settings in a run of their own
# (scripts/bench-features.sh); its table joins the report.
if [ "${FEATURES:-1}" = 1 ]; then
  feat_out="$OUT/features" feat_link="features/report.md"
  [ "$OUT" = docs/benchmarks/vs-etcd ] && feat_out=docs/benchmarks/features feat_link=../features/report.md
  if OUT="$feat_out" CAIRN="$CAIRN" DURATION="$DURATION" scripts/bench-features.sh; then
    {
      echo
      echo "## With features on"
      echo
      echo "TLS on the client port and two secondary-index terms per write, each beside"
      echo "the default settings in one run ([$feat_link]($feat_link)):"
      echo
      sed -n '/^| case | config/,/^$/p' "$feat_out/report.md"
    } >>"$OUT/report.md"
  else
    echo "bench-features failed"
  fi
fi
