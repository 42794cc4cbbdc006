# Shell helpers for the scripts that run a local three-node Cairn cluster
# (ab.sh, bench-vs-etcd.sh, smoke.sh). Source it; it defines functions only.

# cairn_cluster_start BIN BASE DIR [serve flags…]: starts nodes 1-3 (1 to
# $NODES_N when set) with HTTP on 127.0.0.1:BASE.., the etcd API on
# BASE+100.. (given explicitly, so a node whose port is taken exits instead
# of running without it) and peers on BASE+1000.., data and logs under DIR;
# their pids are appended to CLUSTER_PIDS.
cairn_cluster_start() {
  local bin=$1 base=$2 dir=$3 peers="" i
  shift 3
  for i in $(seq 1 "${NODES_N:-3}"); do peers+="$i=127.0.0.1:$((base + 999 + i)),"; done
  for i in $(seq 1 "${NODES_N:-3}"); do
    "$bin" serve --node-id "$i" --http-addr "127.0.0.1:$((base + i - 1))" \
      --etcd-addr "127.0.0.1:$((base + 99 + i))" \
      --peer-addr "127.0.0.1:$((base + 999 + i))" --initial-cluster "${peers%,}" \
      --data-dir "$dir/cairn-$i" "$@" >"$dir/cairn-$i.log" 2>&1 &
    CLUSTER_PIDS+=($!)
  done
}

# cairn_cluster_wait BASE: waits up to 30 s until node 1 answers /v1/cluster
# with a leader for every shard and every node (1 to $NODES_N) answers too;
# returns 1 if that never happens (a node that exited at start, say).
cairn_cluster_wait() {
  local base=$1 info i up
  for _ in $(seq 1 150); do
    if info=$(curl -fsS "http://127.0.0.1:$base/v1/cluster" 2>/dev/null) && ! grep -q '"leader": 0' <<<"$info"; then
      up=1
      for i in $(seq 2 "${NODES_N:-3}"); do
        curl -fsS -o /dev/null "http://127.0.0.1:$((base + i - 1))/v1/cluster" 2>/dev/null || up=0
      done
      [ $up = 1 ] && return 0
    fi
    sleep 0.2
  done
  return 1
}

# cpu_ticks PID…: user + system clock ticks the processes have used (the
# kernel's work in their system calls included).
cpu_ticks() {
  local sum=0 p
  for p in "$@"; do
    # Fields 14 and 15 of /proc/PID/stat, counted after the command name.
    set -- $(sed 's/.*) //' "/proc/$p/stat")
    sum=$((sum + ${12} + ${13}))
  done
  echo "$sum"
}
