#!/usr/bin/env bash
# Restart time (docs/performance.md, "Restart time"): a three-node cluster
# (fsync on) holding RECORDS records of 256 bytes, a bounded put/read load
# on it, one node killed with -9 and started again DOWN seconds later. From
# the moment its process starts, prints when it
#   http      answers GET /v1/status,
#   read_l    answers a linearizable GET of a key written before the kill,
#   read_s    answers a serializable GET of it,
#   caught_up has applied, on every replica it holds, the index its shard's
#             leader had applied when it started again,
#   verified  has every replica verified by a scrub (docs/scrub.md; until
#             then its serializable reads are served by its peers),
# and the startup phases the node logged ("startup:" lines).
#
#   scripts/restart-time.sh                           # RECORDS=1000000
#   RECORDS=10000000 DATA=/tmp/cairn-10m scripts/restart-time.sh
#
# DATA keeps the loaded data dirs (loaded on the first run, reused after:
# loading 10 million records takes 10 to 30 minutes on two cores); without
# it a temporary directory is loaded and removed. RATE: operations/s of the
# load (YCSB A: half reads, half updates, over the two other nodes); NODE:
# the node killed (1-3); DOWN: seconds it stays down; ROUNDS: kills in a
# row. BASE: the first HTTP port (peers at BASE+1000..). The kill waits
# until every replica of the freshly started cluster is verified (at most
# VERIFY_WAIT, 600, seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cluster.sh

RECORDS=${RECORDS:-1000000}
CAIRN=${CAIRN:-bin/cairn}
BASE=${BASE:-19500}
RATE=${RATE:-2000}
NODE=${NODE:-3}
DOWN=${DOWN:-5}
ROUNDS=${ROUNDS:-1}
DATA=${DATA:-}
SERVE_FLAGS=${SERVE_FLAGS:-}
[ -x "$CAIRN" ] || make build
CAIRN=$(realpath "$CAIRN")

WORK=$DATA
if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/cairn-restart.XXXX); fi
mkdir -p "$WORK"
CLUSTER_PIDS=()
LOAD_PID=""
cleanup() {
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null || true
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -z "$DATA" ] && rm -rf "$WORK"
  true
}
trap cleanup EXIT INT TERM

url() { echo "http://127.0.0.1:$((BASE + $1 - 1))"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# cluster NODE: GET /v1/cluster of NODE (empty when it does not answer).
# Shards are named by their token start below: jq reads their 64-bit ids
# as floats.
cluster() { curl -fsS -m 2 "$(url "$1")/v1/cluster" 2>/dev/null || true; }

# shellcheck disable=SC2086
cairn_cluster_start "$CAIRN" "$BASE" "$WORK" --etcd-addr off $SERVE_FLAGS
cairn_cluster_wait "$BASE" || { echo "no leaders" >&2; exit 1; }
targets="$(url 1),$(url 2),$(url 3)"
if [ ! -e "$WORK/loaded-$RECORDS" ]; then
  echo "loading $RECORDS records…"
  t=$(now_ms)
  "$CAIRN" bench --target "$targets" --workload ycsb-a --records "$RECORDS" --field-count 1 --field-length 256 \
    --clients 256 --conns 100 --pipeline 64 --duration 1s --warmup 0s --out "$WORK/load" >"$WORK/load.log" 2>&1
  echo "loaded in $((($(now_ms) - t) / 1000)) s"
  touch "$WORK/loaded-$RECORDS"
fi
echo "data dir per node: $(du -sh "$WORK/cairn-$NODE" | cut -f1); load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# Every node has just started over its data: its replicas serve no local
# reads until a scrub verifies them (docs/scrub.md). The kill waits for
# that, so that the restart measured is one node's, not the cluster's.
t=$(now_ms)
for _ in $(seq 1 "${VERIFY_WAIT:-600}"); do
  all=1
  for i in 1 2 3; do
    [ "$(cluster "$i" | jq '[.shards[] | select(.applied != null) | .verified] | (length > 0 and all)')" = true ] || all=0
  done
  [ "$all" = 1 ] && break
  sleep 1
done
echo "cluster start: every replica verified $((($(now_ms) - t) / 1000)) s after every shard had a leader (all=$all)"

curl -fsS -X PUT --data-binary "restart-probe" "$(url 1)/v1/kv/restart-probe" >/dev/null

# The load: over the nodes that are not killed, all along.
others=""
for i in 1 2 3; do [ "$i" = "$NODE" ] || others+="$(url "$i"),"; done
"$CAIRN" bench --target "${others%,}" --route fixed --workload ycsb-a --no-preload --records "$RECORDS" \
  --field-count 1 --field-length 256 --clients 64 --conns 16 --rate "$RATE" --warmup 0s \
  --duration $((ROUNDS * (DOWN + 90) + 30))s --out "$WORK/run" >"$WORK/run.log" 2>&1 &
LOAD_PID=$!
sleep 10


idx=$((NODE - 1))
for round in $(seq 1 "$ROUNDS"); do
  kill -9 "${CLUSTER_PIDS[$idx]}"
  wait "${CLUSTER_PIDS[$idx]}" 2>/dev/null || true
  sleep "$DOWN"
  log="$WORK/cairn-$NODE.restart-$round.log"
  rm -f "$WORK/trace-$round.txt"
  start=$(now_ms)
  "$CAIRN" serve --node-id "$NODE" --http-addr "127.0.0.1:$((BASE + NODE - 1))" \
    --peer-addr "127.0.0.1:$((BASE + 999 + NODE))" --data-dir "$WORK/cairn-$NODE" --etcd-addr off $SERVE_FLAGS >"$log" 2>&1 &
  CLUSTER_PIDS[idx]=$!
  # Each shard's leader's applied index now: what the node must reach.
  declare -A target=()
  for i in 1 2 3; do
    [ "$i" = "$NODE" ] && continue
    while read -r sid applied; do target[$sid]=$applied; done < <(cluster "$i" |
      jq -r --argjson me "$i" '.shards[] | select(.leader == $me and .applied != null) | "\(.token_start) \(.applied)"')
  done
  http="" rl="" rs="" caught="" verified=""
  while [ -z "$http" ] || [ -z "$rl" ] || [ -z "$rs" ] || [ -z "$caught" ] || [ -z "$verified" ]; do
    t=$(($(now_ms) - start))
    if [ "$t" -gt 300000 ]; then echo "round $round: not served after 300 s" >&2; break; fi
    u=$(url "$NODE")
    [ -z "$http" ] && curl -fsS -m 1 "$u/v1/status" >/dev/null 2>&1 && http=$t
    if [ -n "$http" ]; then
      [ -z "$rl" ] && [ "$(curl -fsS -m 2 "$u/v1/kv/restart-probe?consistency=linearizable" 2>/dev/null)" = restart-probe ] && rl=$t
      [ -z "$rs" ] && [ "$(curl -fsS -m 2 "$u/v1/kv/restart-probe?consistency=serializable" 2>/dev/null)" = restart-probe ] && rs=$t
      if [ -z "$caught" ] || [ -z "$verified" ]; then
        c=$(cluster "$NODE")
        if [ -n "$c" ]; then
          ok=1 ver=1 n=0
          while read -r sid applied v; do
            n=$((n + 1))
            [ "$v" = true ] || ver=0
            [ -n "${target[$sid]:-}" ] && [ "$applied" -lt "${target[$sid]}" ] && ok=0
          done < <(jq -r '.shards[] | select(.applied != null) | "\(.token_start) \(.applied) \(.verified)"' <<<"$c")
          echo "$t $(jq -c '[.shards[] | select(.applied != null) | [.id, .applied, .leader, .verified]]' <<<"$c") targets ${target[*]}" >>"$WORK/trace-$round.txt"
          [ "$n" -gt 0 ] && [ -z "$caught" ] && [ "$ok" = 1 ] && caught=$t
          [ "$n" -gt 0 ] && [ -z "$verified" ] && [ "$ver" = 1 ] && verified=$t
        fi
      fi
    fi
    sleep 0.05
  done
  unset target
  printf "round %d: node %d, ms after its start: http %s read_l %s read_s %s caught_up %s verified %s (load average %s)\n" \
    "$round" "$NODE" "${http:--}" "${rl:--}" "${rs:--}" "${caught:--}" "${verified:--}" "$(cut -d' ' -f1-3 /proc/loadavg)"
  sleep 2
  grep -E 'msg="(startup:|node started)' "$log" | sed 's/.*msg=/  /' || true
  echo "  scrub verifications logged: $(grep -c 'msg="scrub: replica verified"' "$log" || true)"
  [ "$round" -lt "$ROUNDS" ] && sleep 20
done
kill "$LOAD_PID" 2>/dev/null || true
wait "$LOAD_PID" 2>/dev/null || true
LOAD_PID=""
grep -E "ops/s|errors" "$WORK/run.log" | head -5 || true
