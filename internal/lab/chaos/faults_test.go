package chaos

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/client"
)

func TestSplitSides(t *testing.T) {
	cases := []struct {
		n, target          int
		minority, majority []int
	}{
		{3, 1, []int{1}, []int{2, 3}}, // three nodes: the same as isolating the target
		{3, 3, []int{3}, []int{1, 2}},
		{2, 2, []int{2}, []int{1}},
		{4, 2, []int{2}, []int{1, 3, 4}},
		{5, 1, []int{1, 2}, []int{3, 4, 5}},
		{5, 3, []int{3, 4}, []int{1, 2, 5}},
		{5, 5, []int{1, 5}, []int{2, 3, 4}}, // wraps around
		{6, 4, []int{4, 5}, []int{1, 2, 3, 6}},
		{7, 6, []int{1, 6, 7}, []int{2, 3, 4, 5}},
	}
	for _, c := range cases {
		minority, majority, err := splitSides(c.n, c.target)
		if err != nil || !reflect.DeepEqual(minority, c.minority) || !reflect.DeepEqual(majority, c.majority) {
			t.Errorf("n=%d target=%d: %v | %v (%v), want %v | %v", c.n, c.target, minority, majority, err, c.minority, c.majority)
		}
		if len(minority) >= len(majority) && c.n > 2 {
			t.Errorf("n=%d: the minority %v is not smaller than the majority %v", c.n, minority, majority)
		}
	}
	for _, bad := range [][2]int{{1, 1}, {3, 0}, {3, 4}} {
		if _, _, err := splitSides(bad[0], bad[1]); err == nil {
			t.Errorf("n=%d target=%d accepted", bad[0], bad[1])
		}
	}
}

func TestCgroupOf(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cgroup")
	v1 := "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/user\n0::/\n"
	if err := os.WriteFile(file, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	for ctl, want := range map[string]string{"memory": "/process_api/abc", "cpu": "/user", "cpuacct": "/user", "": "/"} {
		if got, err := cgroupOf(file, ctl); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", ctl, got, err, want)
		}
	}
	if _, err := cgroupOf(file, "pids"); err == nil {
		t.Error("a controller that is not mounted was found")
	}
	if err := os.WriteFile(file, []byte("0::/system.slice/x.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := cgroupOf(file, ""); err != nil || got != "/system.slice/x.service" {
		t.Errorf("v2: %q %v", got, err)
	}
	if got := groupParent("/sys/fs/cgroup/memory", "memory", "/process_api/abc"); got != "/sys/fs/cgroup/memory/process_api/abc" {
		t.Errorf("v1 parent %q", got)
	}
	if got := groupParent("/sys/fs/cgroup", "", "/system.slice/x.service"); got != "/sys/fs/cgroup" {
		t.Errorf("v2 parent %q", got)
	}
}

func TestMemoryStats(t *testing.T) {
	v1 := t.TempDir()
	for f, v := range map[string]string{
		"memory.max_usage_in_bytes": "134217728\n",
		"memory.failcnt":            "42\n",
		"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
	} {
		if err := os.WriteFile(filepath.Join(v1, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := memoryStats(v1), "group peak 128 MB, limit hit 42 times, 1 OOM kills"; got != want {
		t.Errorf("v1: %q, want %q", got, want)
	}
	v2 := t.TempDir()
	for f, v := range map[string]string{
		"memory.peak":   "268435456\n",
		"memory.events": "low 0\nhigh 0\nmax 7\noom 0\noom_kill 0\noom_group_kill 0\n",
	} {
		if err := os.WriteFile(filepath.Join(v2, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := memoryStats(v2), "group peak 256 MB, limit hit 7 times, 0 OOM kills"; got != want {
		t.Errorf("v2: %q, want %q", got, want)
	}
	if got := memoryStats(t.TempDir()); got != "no memory statistics" {
		t.Errorf("empty: %q", got)
	}
}

func TestGoMemory(t *testing.T) {
	metrics := "# HELP go_gc_gomemlimit_bytes Go runtime memory limit configured by the user, otherwise math.MaxInt64.\n" +
		"# TYPE go_gc_gomemlimit_bytes gauge\ngo_gc_gomemlimit_bytes 1.00663296e+08\n" +
		"go_memstats_heap_inuse_bytes 2.4576e+07\ngo_memstats_heap_inuse_bytes_total 1\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(metrics))
	}))
	defer srv.Close()
	hc := srv.Client()
	limit, heap, err := goMemory(hc, srv.URL)
	if err != nil || limit != 96<<20 || heap != 24000<<10 {
		t.Fatalf("%d %d %v", limit, heap, err)
	}
	metrics = "go_gc_gomemlimit_bytes 9.223372036854776e+18\ngo_memstats_heap_inuse_bytes 1e+06\n"
	if limit, _, err := goMemory(hc, srv.URL); err != nil || limit != math.MaxInt64 {
		t.Fatalf("no limit: %d %v", limit, err)
	}
	metrics = "go_goroutines 12\n"
	if _, _, err := goMemory(hc, srv.URL); err == nil {
		t.Fatal("metrics without the limit accepted")
	}
}

// testViews builds nodes' views of the shards: per node, per shard, its
// replicas and the leader it sees.
func testViews(t *testing.T, shards map[uint64][]uint64, leaders map[int]map[uint64]uint64) map[int]client.ClusterInfo {
	t.Helper()
	out := map[int]client.ClusterInfo{}
	for node, seen := range leaders {
		var ci client.ClusterInfo
		for id := uint64(1); id <= uint64(len(shards)); id++ {
			ci.Shards = append(ci.Shards, client.ShardInfo{ID: id, Leader: seen[id], Replicas: shards[id]})
		}
		out[node] = ci
	}
	return out
}

// Five nodes, replication 3: the view of a node that holds no replica of
// a shard does not count (it may be stale).
func TestLeadsWithMoreNodesThanReplicas(t *testing.T) {
	shards := map[uint64][]uint64{1: {1, 2, 3}, 2: {3, 4, 5}, 3: {1, 4, 5}}
	views := testViews(t, shards, map[int]map[uint64]uint64{
		1: {1: 1, 3: 4},       // no replica of shard 2: no leader known
		2: {1: 1},             // only shard 1
		3: {1: 1, 2: 5},       //
		4: {2: 5, 3: 4, 1: 2}, // a stale guess for shard 1, which it does not hold
		5: {2: 5, 3: 4},
	})
	for node, want := range map[int]int{1: 1, 2: 0, 4: 1, 5: 1} {
		if got := leadsOf(views, node); got != want {
			t.Errorf("node %d leads %d shards, want %d", node, got, want)
		}
	}
	// After a split, a replica on the target's side still names it; the
	// majority has moved on: the target no longer leads shard 1.
	views[3].Shards[0].Leader = 3
	if got := leadsOf(views, 1); got != 0 {
		t.Errorf("node 1 leads %d shards after losing shard 1", got)
	}
}
