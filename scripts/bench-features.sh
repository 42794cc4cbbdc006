#!/usr/bin/env bash
# The performance goals' cases with features on, measured side by side in
# one run against a fresh local three-node Cairn per configuration (fsync
# on, default settings otherwise), one configuration after the other:
#
#   plain  default settings, writes without index terms (this run's baseline)
#   tls    TLS on the client port (certificates from `cairn cert`; the load
#          generator speaks HTTPS, HTTP/2 by ALPN for put-1000-h2)
#   2i     default settings, every write carrying two secondary-index terms
#          (`cairn bench --index-terms 2`: a byte-string and an integer term)
#
# Cases (the rows of docs/performance.md's goals table):
#   put-1000     put, 1000 clients over 100 connections, HTTP/1.1 pipelined 64
#   put-1000-h2  the same over HTTP/2
#   put-1000-h1  the same one request at a time per connection
#   put-half     open loop at half of this configuration's put-1000 rate
#   entity-1, entity-4  v0 entity 50/50 PUT/GET, replicas=2/3, one request at a
#                time on 1 and 4 connections (wrk's shape, driven by cairn bench)
#
#   scripts/bench-features.sh            # writes docs/benchmarks/features/report.md
#   CONFIGS="plain tls" CASES="put-1000" DURATION=10s OUT=/tmp/f scripts/bench-features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

DURATION=${DURATION:-20s}
CONFIGS=${CONFIGS:-plain tls 2i}
CASES=${CASES:-put-1000 put-1000-h2 put-1000-h1 put-half entity-1 entity-4}
OUT=${OUT:-docs/benchmarks/features}
CAIRN=${CAIRN:-bin/cairn}
BASE=${BASE:-19480} # HTTP on +0..+2, etcd API on +100..+102, peers on +1000..+1002

[ -x "$CAIRN" ] || make build
WORK=$(mktemp -d /tmp/cairn-features.XXXXXX)
CLUSTER_PIDS=()
stop_cluster() {
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${CLUSTER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  CLUSTER_PIDS=()
}
trap 'stop_cluster; rm -rf "$WORK"' EXIT INT TERM
RES="$WORK/results"
mkdir -p "$RES"

# Certificates for the tls configuration: a CA and one per node.
"$CAIRN" cert init --dir "$WORK/certs" >/dev/null
for i in 1 2 3; do "$CAIRN" cert node --dir "$WORK/certs" --node-id "$i" --hosts 127.0.0.1,localhost >/dev/null; done

# start CONFIG: a fresh cluster; sets SCHEME and TLS_ARGS (bench flags).
start() {
  local cfg=$1 i
  SCHEME=http TLS_ARGS=()
  mkdir -p "$WORK/$cfg"
  if [ "$cfg" = tls ]; then
    SCHEME=https TLS_ARGS=(--ca "$WORK/certs/ca.crt")
    # cairn_cluster_start passes the same flags to every node; each node
    # needs its own certificate, so the nodes start here one by one.
    local peers=""
    for i in 1 2 3; do peers+="$i=127.0.0.1:$((BASE + 999 + i)),"; done
    for i in 1 2 3; do
      "$CAIRN" serve --node-id "$i" --http-addr "127.0.0.1:$((BASE + i - 1))" \
        --etcd-addr "127.0.0.1:$((BASE + 99 + i))" --peer-addr "127.0.0.1:$((BASE + 999 + i))" \
        --initial-cluster "${peers%,}" --data-dir "$WORK/$cfg/cairn-$i" \
        --tls-cert "$WORK/certs/node-$i.crt" --tls-key "$WORK/certs/node-$i.key" \
        >"$WORK/$cfg/cairn-$i.log" 2>&1 &
      CLUSTER_PIDS+=($!)
    done
  else
    cairn_cluster_start "$CAIRN" "$BASE" "$WORK/$cfg"
  fi
  local info
  for _ in $(seq 1 150); do
    if info=$(curl -fsS --cacert "$WORK/certs/ca.crt" "$SCHEME://127.0.0.1:$BASE/v1/cluster" 2>/dev/null) &&
      ! grep -q '"leader": 0' <<<"$info"; then
      TARGET="$SCHEME://127.0.0.1:$BASE,$SCHEME://127.0.0.1:$((BASE + 1)),$SCHEME://127.0.0.1:$((BASE + 2))"
      return 0
    fi
    sleep 0.2
  done
  echo "the $cfg cluster did not become ready"; tail "$WORK/$cfg"/*.log; exit 1
}

# run CONFIG CASE bench-args…: one run; results in $RES/CONFIG_CASE, node
# CPU per operation in $RES/cpu.tsv.
run() {
  local cfg=$1 c=$2 dir c0 c1 ops extra=()
  shift 2
  dir="$RES/${cfg}_$c"
  [ "$cfg" = 2i ] && extra=(--index-terms 2)
  echo "== $cfg $c"
  c0=$(cpu_ticks "${CLUSTER_PIDS[@]}")
  "$CAIRN" bench --target "$TARGET" "${TLS_ARGS[@]}" --label "$cfg $c" --out "$dir" --duration "$DURATION" "${extra[@]}" "$@" 2>&1 |
    grep -E "throughput|99%|errors by kind" || true
  c1=$(cpu_ticks "${CLUSTER_PIDS[@]}")
  ops=$(grep -m1 -o '"ops": *[0-9]*' "$dir/results.json" | grep -o '[0-9]*$' || echo 0)
  awk -v l="${cfg}_$c" -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v ops="$ops" \
    'BEGIN { if (ops > 0) printf "%s\t%.1f\n", l, t / hz / ops * 1e6 }' >>"$RES/cpu.tsv"
}
want() { [[ " $CASES " == *" $1 "* ]]; }
put=(--workload put --key-size 8 --val-size 256 --clients 1000 --conns 100)

for cfg in $CONFIGS; do
  start "$cfg"
  want put-1000 && run "$cfg" put-1000 "${put[@]}" --pipeline 64
  want put-1000-h2 && run "$cfg" put-1000-h2 "${put[@]}" --http 2
  want put-1000-h1 && run "$cfg" put-1000-h1 "${put[@]}" --pipeline 1
  if want put-half; then
    max="$RES/${cfg}_put-1000/results.json"
    if [ ! -f "$max" ]; then
      DURATION=8s run "$cfg" put-max "${put[@]}" --pipeline 64
      max="$RES/${cfg}_put-max/results.json"
    fi
    rate=$(python3 -c 'import json,sys; print("%.0f" % (json.load(open(sys.argv[1]))["throughput"] / 2))' "$max")
    run "$cfg" put-half "${put[@]}" --pipeline 64 --rate "$rate"
  fi
  for n in 1 4; do
    want entity-$n && run "$cfg" entity-$n --workload entity --replicas 2/3 --keys 10000 --mix put=50,get=50 --clients $n --conns $n
  done
  stop_cluster
done

mkdir -p "$OUT"
python3 - "$RES" "$OUT/report.md" "$CONFIGS" "$CASES" "$("$CAIRN" version)" "$DURATION" <<'PY'
import json, os, sys, datetime
res, out, configs, cases, version, duration = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), sys.argv[5], sys.argv[6]
cpu = {}
for line in open(os.path.join(res, "cpu.tsv")):
    k, v = line.rstrip("\n").split("\t")
    cpu[k] = float(v)
def load(cfg, c):
    p = os.path.join(res, f"{cfg}_{c}", "results.json")
    return json.load(open(p)) if os.path.exists(p) else None
rows = []
w = rows.append
w("# Cairn with features on")
w("")
w(f"Produced by `scripts/bench-features.sh` on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}, {version},")
w(f"{duration} per run, {os.cpu_count()} cores: a fresh three-node Cairn (fsync on) per configuration,")
w("the load generator on the same machine. plain: default settings; tls: TLS on the client port;")
w("2i: every write carries two secondary-index terms. Ratios are against plain in this run.")
w("")
w("| case | config | ops/s | vs plain | mean ms | p99 ms | p99.9 ms | node CPU µs/op | errors |")
w("|---|---|---|---|---|---|---|---|---|")
for c in cases:
    base = load("plain", c)
    for cfg in configs:
        r = load(cfg, c)
        if r is None:
            continue
        lat = r["latency_ms"]
        ratio = f"{r['throughput'] / base['throughput']:.2f}×" if base and base["throughput"] > 0 else "–"
        w(f"| {c} | {cfg} | {r['throughput']:.1f} | {ratio} | {lat['mean']:.2f} | {lat['p99']:.2f} | {lat['p999']:.2f} | {cpu.get(f'{cfg}_{c}', 0):.1f} | {r['errors']} |")
w("")
w("put-half is an open loop at half of the same configuration's put-1000 throughput (latency from each")
w("operation's due time); entity-N is `/v0/entity` 50/50 PUT/GET with replicas=2/3, one request at a time on")
w("N connections. Node CPU: user and system time of the three nodes over the run (warm-up included)")
w("divided by the operations measured.")
open(out, "w").write("\n".join(rows) + "\n")
PY
for cfg in $CONFIGS; do for d in "$RES/${cfg}"_*/; do
  [ -d "$d" ] && mkdir -p "$OUT/runs" && cp "$d/results.json" "$OUT/runs/$(basename "$d").json"
done; done
echo "report: $OUT/report.md"
