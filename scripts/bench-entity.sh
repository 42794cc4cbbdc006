#!/usr/bin/env bash
# The entity benchmark users run first: wrk (Debian's package), plain
# HTTP/1.1 keep-alive, one request at a time per connection, a 50/50
# PUT/GET mix over ids 1..10000 of /v0/entity, at 1, 2 and 4 connections
# and replicas=2/3 and 3/3, against a local three-node Cairn (fsync on,
# default settings).
#
#   make bench-entity                       # 20 s per point; table on stdout
#   DURATION=60s CONNS="1 4" OUT=/tmp/e scripts/bench-entity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

DURATION=${DURATION:-20s}
CONNS=${CONNS:-1 2 4}
REPLICAS=${REPLICAS:-2/3 3/3}
KEYS=${KEYS:-10000}
CAIRN=${CAIRN:-bin/cairn}
BASE=${BASE:-19380}
OUT=${OUT:-}

if ! command -v wrk >/dev/null; then
  echo "installing Debian's wrk…"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
[ -x "$CAIRN" ] || make build

WORK=$(mktemp -d /tmp/cairn-entity.XXXXXX)
CLUSTER_PIDS=()
cleanup() {
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

cairn_cluster_start "$CAIRN" "$BASE" "$WORK"
cairn_cluster_wait "$BASE" || { echo "cluster not ready"; tail "$WORK"/*.log; exit 1; }
URL="http://127.0.0.1:$BASE"

# Every id exists before the measured runs, so a GET finds its entity:
# PUT ids 1..KEYS in order, pipelined, until a pass is done.
for _ in $(seq 1 20); do
  n=$(KEYS=$KEYS wrk -t1 -c4 -d5s -s scripts/wrk/preload.lua "$URL" | grep '^{' | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
  total=$(( ${total:-0} + n ))
  [ "$total" -ge "$KEYS" ] && break
done
missing=0
for id in 1 $((KEYS / 2)) "$KEYS"; do
  curl -fsS -o /dev/null "$URL/v0/entity?id=$id" || missing=$((missing + 1))
done
[ "$missing" = 0 ] || { echo "preload incomplete: $missing of 3 probed ids missing"; exit 1; }

[ -n "$OUT" ] && mkdir -p "$OUT"
printf "%-9s %5s %10s %8s %8s %8s %9s %8s\n" replicas conns req/s p50_ms p90_ms p99_ms p99.9_ms non_2xx
for r in $REPLICAS; do
  for c in $CONNS; do
    line=$(PUT_PERCENT=50 KEYS=$KEYS REPLICAS=$r wrk -t1 -c"$c" -d"$DURATION" -s scripts/wrk/entity.lua "$URL" | grep '^{')
    [ -n "$OUT" ] && echo "$line" >"$OUT/entity-${r/\//of}-c$c.json"
    python3 - "$r" "$c" "$line" <<'PY'
import json, sys
r = json.loads(sys.argv[3])
print("%-9s %5s %10.0f %8.3f %8.3f %8.3f %9.3f %8d" % (sys.argv[1], sys.argv[2], r["rps"], r["p50_ms"], r["p90_ms"], r["p99_ms"], r["p999_ms"], r["non_2xx"]))
PY
  done
done
