#!/usr/bin/env bash
# By-hand figures: a curl loop of 1000 PUTs and 1000 GETs on a fresh local
# three-node cluster (HTTP on $BASE..$BASE+2, peers on $BASE+1000..+1002),
# then the latency of 64 concurrent writes through a survivor right after
# kill -9 of the leader of shard 1 (how long a failover holds writes up).
#   scripts/smoke.sh
set -u
cd "$(dirname "$0")/.."
BIN=${CAIRN:-bin/cairn}; B=${BASE:-18580}; W=$(mktemp -d /tmp/cairn-smoke.XXXXXX)
[ -x "$BIN" ] || make build >/dev/null
. scripts/cluster.sh
CLUSTER_PIDS=()
cairn_cluster_start "$BIN" "$B" "$W"
cairn_cluster_wait "$B" || { echo "cluster did not become ready"; tail "$W"/*.log; exit 1; }
start=$(date +%s.%N); bad=0
for i in $(seq 1 1000); do
  c=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary "value$i" "http://127.0.0.1:$((B + i % 3))/v0/entity?id=k$i"); [ "$c" = 201 ] || bad=$((bad+1))
done
mid=$(date +%s.%N)
for i in $(seq 1 1000); do
  body=$(curl -s "http://127.0.0.1:$((B + (i+1) % 3))/v0/entity?id=k$i"); [ "$body" = "value$i" ] || bad=$((bad+1))
done
end=$(date +%s.%N)
echo "1000 PUTs (each through node i mod 3): $(awk "BEGIN { print $mid - $start }") s; 1000 GETs through another node: $(awk "BEGIN { print $end - $mid }") s; wrong answers: $bad"
# Leader of shard 1, seen from node 1.
leader=$(curl -fs 127.0.0.1:$B/v1/cluster | python3 -c 'import json,sys; print([s["leader"] for s in json.load(sys.stdin)["shards"] if s["id"]==1][0])')
led=$(curl -fs 127.0.0.1:$B/v1/cluster | python3 -c "import json,sys; print(sum(1 for s in json.load(sys.stdin)['shards'] if s['leader']==$leader))")
surv=$(( leader % 3 + 1 ))
echo "killing node $leader (leader of shard 1 and of $led of 16 shards); writing through node $surv"
kill -9 "${CLUSTER_PIDS[$((leader - 1))]}"
t0=$(date +%s.%N)
seq 1 64 | xargs -P 64 -I{} curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X PUT --data-binary after "http://127.0.0.1:$((B+surv-1))/v1/kv/after-{}" > $W/after.txt
t1=$(date +%s.%N)
echo "64 concurrent PUTs (64 keys) right after the kill: codes $(cut -d' ' -f1 $W/after.txt | sort | uniq -c | tr '\n' ' '); slowest $(sort -k2 -n $W/after.txt | tail -1 | cut -d' ' -f2) s; median $(sort -k2 -n $W/after.txt | sed -n 32p | cut -d' ' -f2) s; all done $(awk "BEGIN { print $t1 - $t0 }") s after the kill"
kill "${CLUSTER_PIDS[@]}" 2>/dev/null; wait; rm -rf "$W"
