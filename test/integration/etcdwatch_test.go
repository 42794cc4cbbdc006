package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdWatch drives watches through etcd's Go client against a real
// three-node Cairn: put and delete events with their previous values,
// progress, cancellation, a prefix watch over every shard, and a watch
// that resumes across a kill -9 of its key's shard leader, checked
// against the shard's history read afterwards: no event missed, none
// twice.
func TestEtcdWatch(t *testing.T) {
	c := newCluster(t, 3)
	eps := c.etcdEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clis := make([]*clientv3.Client, 3)
	for i := range clis {
		clis[i] = newEtcdClient(t, eps[i:i+1])
	}

	// Put and delete events, with prev_kv, through other nodes.
	wctx, wcancel := context.WithCancel(ctx)
	wch := clis[0].Watch(wctx, "w/a", clientv3.WithPrevKV())
	p1, err := clis[1].Put(ctx, "w/a", "1")
	must(t, err)
	p2, err := clis[2].Put(ctx, "w/a", "2")
	must(t, err)
	d, err := clis[1].Delete(ctx, "w/a")
	must(t, err)
	got := collect(t, wch, 3)
	want := []string{
		fmt.Sprintf("PUT w/a=1@%d", p1.Header.Revision),
		fmt.Sprintf("PUT w/a=2@%d prev 1@%d", p2.Header.Revision, p1.Header.Revision),
		fmt.Sprintf("DELETE w/a=@%d prev 2@%d", d.Header.Revision, p2.Header.Revision),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watch w/a: %q, want %q", got, want)
	}
	// Get then watch, as clientv3's locks wait for a key: a Get of an
	// absent key answers its shard's revision at the read, and a watch
	// from it + 1 sees the key's next put.
	g, err := clis[0].Get(ctx, "w/gw")
	must(t, err)
	if g.Header.Revision == 0 || len(g.Kvs) != 0 {
		t.Fatalf("get of an absent key: %+v, want no key at a revision above 0", g)
	}
	gctx, gcancel := context.WithCancel(ctx)
	gch := clis[0].Watch(gctx, "w/gw", clientv3.WithRev(g.Header.Revision+1))
	gp, err := clis[1].Put(ctx, "w/gw", "1")
	must(t, err)
	if got := collect(t, gch, 1); fmt.Sprint(got) != fmt.Sprint([]string{fmt.Sprintf("PUT w/gw=1@%d", gp.Header.Revision)}) {
		t.Fatalf("watch from a get's revision: %q, want the put at %d", got, gp.Header.Revision)
	}
	gcancel()
	// Progress on request: the watch stands at the delete at least.
	must(t, clis[0].RequestProgress(ctx))
	select {
	case r := <-wch:
		if !r.IsProgressNotify() || r.Header.Revision < d.Header.Revision {
			t.Fatalf("progress: %+v, want a notification at %d or later", r, d.Header.Revision)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification")
	}
	// Cancellation closes the channel.
	wcancel()
	select {
	case _, ok := <-wch:
		for ok {
			_, ok = <-wch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a canceled watch's channel stays open")
	}

	// A prefix watch over every shard: every key once.
	pch := clis[2].Watch(ctx, "w/p/", clientv3.WithPrefix())
	for i := range 64 {
		_, err := clis[i%3].Put(ctx, fmt.Sprintf("w/p/%02d", i), "v")
		must(t, err)
	}
	seen := map[string]int{}
	for _, e := range collect(t, pch, 64) {
		seen[e]++
	}
	if len(seen) != 64 {
		t.Fatalf("prefix watch: %d distinct events of 64 puts: %v", len(seen), seen)
	}

	t.Run("ResumeAcrossLeaderKill", func(t *testing.T) { testWatchResume(t, c, eps) })
}

// testWatchResume watches one key through the node leading its shard,
// kills that node with SIGKILL while writes go on, and lets etcd's client
// resume the watch on another node from the last revision it saw + 1.
func testWatchResume(t *testing.T, c *cluster, eps []string) {
	const key = "w/resume"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := c.shardOf(1, []string{key})[key]
	lead := 0
	eventually(t, 20*time.Second, func() string {
		ci, err := c.clusterInfo(1)
		if err != nil {
			return err.Error()
		}
		for _, s := range ci.Shards {
			if s.ID == sh && s.Leader != 0 {
				lead = int(s.Leader)
				return ""
			}
		}
		return "no leader"
	})
	var others []string
	for i, ep := range eps {
		if i+1 != lead {
			others = append(others, ep)
		}
	}
	writer := newEtcdClient(t, others)
	first, err := writer.Put(ctx, key, "first")
	must(t, err)
	// The watcher talks to the leader's node alone until it is killed.
	watcher := newEtcdClient(t, eps[lead-1:lead])
	wch := watcher.Watch(ctx, key, clientv3.WithRev(first.Header.Revision))

	var (
		mu    sync.Mutex
		acked = map[int64]string{} // revision -> value of every acknowledged put
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300 && ctx.Err() == nil; i++ {
			v := fmt.Sprint("v", i)
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			r, err := writer.Put(pctx, key, v)
			pcancel()
			if err == nil {
				mu.Lock()
				acked[r.Header.Revision] = v
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var events []*clientv3.Event
	killed := false
	for len(events) < 200 || !killed {
		select {
		case r, ok := <-wch:
			if !ok || r.Err() != nil {
				t.Fatalf("watch ended: %v", r.Err())
			}
			events = append(events, r.Events...)
		case <-time.After(30 * time.Second):
			t.Fatalf("no event for 30 s (%d so far)", len(events))
		}
		if !killed && len(events) >= 50 {
			c.kill(lead)
			watcher.SetEndpoints(others...)
			killed = true
		}
	}
	<-done
	last := events[len(events)-1].Kv.ModRevision
	// The reference: the shard's history from the first revision, read
	// afresh through a surviving node once the writes are over.
	final, err := writer.Put(ctx, key, "last")
	must(t, err)
	ref := newEtcdClient(t, others[:1]).Watch(ctx, key, clientv3.WithRev(first.Header.Revision))
	var all []*clientv3.Event
	for len(all) == 0 || all[len(all)-1].Kv.ModRevision < final.Header.Revision {
		select {
		case r := <-ref:
			all = append(all, r.Events...)
		case <-time.After(30 * time.Second):
			t.Fatalf("reference watch: no event for 30 s (%d so far)", len(all))
		}
	}
	// The resumed watch holds exactly the reference's events up to the
	// last it got: in order, none missed, none twice.
	n := 0
	for n < len(all) && all[n].Kv.ModRevision <= last {
		n++
	}
	if len(events) != n {
		t.Fatalf("resumed watch got %d events up to revision %d, the history holds %d", len(events), last, n)
	}
	for i := range events {
		if events[i].Kv.ModRevision != all[i].Kv.ModRevision || string(events[i].Kv.Value) != string(all[i].Kv.Value) {
			t.Fatalf("event %d: %s@%d, the history has %s@%d", i, events[i].Kv.Value, events[i].Kv.ModRevision, all[i].Kv.Value, all[i].Kv.ModRevision)
		}
	}
	// Every acknowledged put is in the history, at its revision.
	inHistory := map[int64]string{}
	for _, e := range all {
		inHistory[e.Kv.ModRevision] = string(e.Kv.Value)
	}
	mu.Lock()
	defer mu.Unlock()
	for rev, v := range acked {
		if inHistory[rev] != v {
			t.Fatalf("acknowledged put %s at revision %d: the history has %q", v, rev, inHistory[rev])
		}
	}
	t.Logf("watch resumed across the kill of node %d: %d events, %d acknowledged puts", lead, len(events), len(acked))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// collect reads n events from a watch channel, as "TYPE key=value@rev
// [prev value@rev]", failing after 20 s without one.
func collect(t *testing.T, wch clientv3.WatchChan, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case r, ok := <-wch:
			if !ok || r.Err() != nil {
				t.Fatalf("watch ended after %d events: %v", len(out), r.Err())
			}
			for _, e := range r.Events {
				s := fmt.Sprintf("%s %s=%s@%d", e.Type, e.Kv.Key, e.Kv.Value, e.Kv.ModRevision)
				if e.PrevKv != nil {
					s += fmt.Sprintf(" prev %s@%d", e.PrevKv.Value, e.PrevKv.ModRevision)
				}
				if e.Type == mvccpb.DELETE && e.Kv.Value != nil {
					s += " (a delete with a value)"
				}
				out = append(out, s)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no watch event for 20 s after %d: %v", len(out), out)
		}
	}
	return out
}
