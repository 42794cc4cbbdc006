package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// memKV is an in-memory KV with versions, as the coordinator's CAS path.
type memKV struct {
	mu    sync.Mutex
	data  map[string][]byte
	vers  map[string]uint64
	next  uint64
	fail  error
	races int // CompareAndSets to fail with a mismatch first
}

func newMemKV() *memKV { return &memKV{data: map[string][]byte{}, vers: map[string]uint64{}} }

func (m *memKV) Get(_ context.Context, key []byte) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, 0, m.fail
	}
	v, ok := m.data[string(key)]
	if !ok {
		return nil, 0, ErrKeyNotFound
	}
	return v, m.vers[string(key)], nil
}

func (m *memKV) CompareAndSet(_ context.Context, key, value []byte, version uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	if m.races > 0 {
		m.races--
		m.next++
		m.vers[string(key)] = m.next // someone else wrote the same bytes
		return 0, ErrVersionMismatch
	}
	if m.vers[string(key)] != version {
		return 0, ErrVersionMismatch
	}
	m.next++
	m.data[string(key)], m.vers[string(key)] = value, m.next
	return m.next, nil
}

func newTestManager(t *testing.T, id uint64, kv KV) *Manager {
	t.Helper()
	m, err := NewManager(ManagerConfig{NodeID: id, KV: kv, Replication: 3,
		Descriptors: func() []shard.Descriptor { return []shard.Descriptor{{ID: 1, Replicas: []uint64{1, 2, 3}}} }, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var three = map[uint64]string{1: "h:1", 2: "h:2", 3: "h:3"}

func TestBootstrapAgreesOnOneRecord(t *testing.T) {
	kv := newMemKV()
	a, b := newTestManager(t, 1, kv), newTestManager(t, 2, kv)
	ctx := context.Background()
	if _, err := a.Read(ctx); !errors.Is(err, ErrNotReady) {
		t.Fatalf("read before bootstrap: %v, want ErrNotReady", err)
	}
	ra, err := a.Bootstrap(ctx, three)
	if err != nil {
		t.Fatal(err)
	}
	// A second bootstrap with other peers keeps the first record.
	rb, err := b.Bootstrap(ctx, map[uint64]string{1: "x:1", 2: "x:2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Members) != 3 || rb.Members[0].PeerAddr != "h:1" || len(ra.Members) != 3 {
		t.Fatalf("second bootstrap replaced the record: %+v", rb)
	}
}

func TestJoinRules(t *testing.T) {
	kv := newMemKV()
	m := newTestManager(t, 1, kv)
	ctx := context.Background()
	if _, err := m.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("join before bootstrap: %v, want ErrNotReady", err)
	}
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	resp, err := m.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 4 || resp.Replication != 3 || len(resp.Shards) != 1 {
		t.Fatalf("join response %+v", resp)
	}
	if rec, _ := m.Cached(); rec.Count(Active) != 4 {
		t.Fatalf("cached record after join: %+v", rec)
	}
	// A retried join with the same addresses succeeds and changes nothing.
	kv.mu.Lock()
	before := kv.next
	kv.mu.Unlock()
	if _, err := m.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"}); err != nil {
		t.Fatalf("retried join: %v", err)
	}
	if kv.next != before {
		t.Fatal("a retried join wrote the record")
	}
	cases := []struct {
		req  JoinRequest
		want error
	}{
		{JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "other:4"}, ErrIDInUse},
		{JoinRequest{NodeID: 4, HTTPAddr: "other:4", PeerAddr: "p:4"}, ErrIDInUse},
		{JoinRequest{NodeID: 5, HTTPAddr: "a:5", PeerAddr: "p:4"}, ErrAddrInUse},
		{JoinRequest{NodeID: 0, HTTPAddr: "a:5", PeerAddr: "p:5"}, ErrInvalid},
		{JoinRequest{NodeID: 5, HTTPAddr: "", PeerAddr: "p:5"}, ErrInvalid},
	}
	for _, c := range cases {
		if _, err := m.Join(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("join %+v: %v, want %v", c.req, err, c.want)
		}
	}
	// A dead node is never re-admitted, with any address.
	if _, err := m.RemoveDead(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, req := range []JoinRequest{{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"}, {NodeID: 4, HTTPAddr: "n:4", PeerAddr: "q:4"}} {
		if _, err := m.Join(ctx, req); !errors.Is(err, ErrRemoved) {
			t.Errorf("join of dead node %+v: %v, want ErrRemoved", req, err)
		}
	}
	// Its addresses may serve a new node under a new id.
	if _, err := m.Join(ctx, JoinRequest{NodeID: 5, HTTPAddr: "a:4", PeerAddr: "p:4"}); err != nil {
		t.Fatalf("new id on a dead node's addresses: %v", err)
	}
}

func TestUsedIDsAreNeverReused(t *testing.T) {
	r := Bootstrap(three)
	r.UsedIDs = append(r.UsedIDs, 7) // admitted once, member entry gone
	if _, _, err := r.Join(7, "a", "p"); !errors.Is(err, ErrRemoved) {
		t.Fatalf("join of a used id: %v, want ErrRemoved", err)
	}
}

func TestDecommissionAndRemove(t *testing.T) {
	kv := newMemKV()
	m := newTestManager(t, 1, kv)
	ctx := context.Background()
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decommission(ctx, 2); !errors.Is(err, ErrTooFewNodes) {
		t.Fatalf("decommission leaving 2 nodes for rf 3: %v, want ErrTooFewNodes", err)
	}
	if _, err := m.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"}); err != nil {
		t.Fatal(err)
	}
	mem, err := m.Decommission(ctx, 2)
	if err != nil || mem.State != Decommissioning {
		t.Fatalf("decommission: %+v %v", mem, err)
	}
	if _, err := m.Decommission(ctx, 9); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("decommission of unknown node: %v", err)
	}
	if _, err := m.RemoveDead(ctx, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a node declaring itself dead: %v, want ErrInvalid", err)
	}
	rec, err := m.Update(ctx, func(r Record) (Record, bool, error) { return r.MarkRemoved(2) })
	if err != nil {
		t.Fatal(err)
	}
	if mem, _ := rec.Member(2); mem.State != Removed {
		t.Fatalf("member 2 after removal: %+v", mem)
	}
	if _, ok := rec.Peers()[2]; ok {
		t.Fatal("a removed node is still a peer")
	}
	if _, _, err := rec.MarkRemoved(3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("removing an active node without decommission: %v", err)
	}
}

func TestUpdateRetriesLostRaces(t *testing.T) {
	kv := newMemKV()
	m := newTestManager(t, 1, kv)
	ctx := context.Background()
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	kv.races = 3
	if _, err := m.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "a:4", PeerAddr: "p:4"}); err != nil {
		t.Fatalf("join after lost races: %v", err)
	}
	kv.races = maxCASTries
	if _, err := m.Join(ctx, JoinRequest{NodeID: 5, HTTPAddr: "a:5", PeerAddr: "p:5"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("join losing every race: %v, want ErrNotReady", err)
	}
	kv.races = 0
	kv.fail = errors.New("no quorum")
	if _, err := m.Join(ctx, JoinRequest{NodeID: 5, HTTPAddr: "a:5", PeerAddr: "p:5"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("join without quorum: %v, want ErrNotReady", err)
	}
}

func TestSettings(t *testing.T) {
	kv := newMemKV()
	m := newTestManager(t, 1, kv)
	ctx := context.Background()
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	limit, rate, bad := 4, int64(1<<20), 0
	s, err := m.SetSettings(ctx, Settings{TransferLimit: &limit})
	if err != nil || *s.TransferLimit != 4 || s.SnapshotRate != nil {
		t.Fatalf("settings %+v %v", s, err)
	}
	s, err = m.SetSettings(ctx, Settings{SnapshotRate: &rate})
	if err != nil || *s.TransferLimit != 4 || *s.SnapshotRate != 1<<20 {
		t.Fatalf("settings %+v %v", s, err)
	}
	if _, err := m.SetSettings(ctx, Settings{TransferLimit: &bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("transfer limit 0: %v", err)
	}
}

func TestRecordRoundTripAndValidate(t *testing.T) {
	r := Bootstrap(three)
	got, err := UnmarshalRecord(r.Marshal())
	if err != nil || len(got.Members) != 3 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	bad := []string{
		`{"members":[{"id":1,"peer_addr":"a","state":"active"}],"used_ids":[]}`,
		`{"members":[{"id":1,"peer_addr":"a","state":"sleeping"}],"used_ids":[1]}`,
		`{"members":[{"id":1,"state":"active"},{"id":1,"state":"active"}],"used_ids":[1]}`,
		`not json`,
	}
	for _, b := range bad {
		if _, err := UnmarshalRecord([]byte(b)); err == nil {
			t.Errorf("record %s accepted", b)
		}
	}
	if !IsReserved([]byte("\x00sys/members")) || IsReserved([]byte("a\x00")) || IsReserved(nil) {
		t.Fatal("IsReserved is off")
	}
}

// OnChange sees records in version order, never an older one after a
// newer, and ends with the newest, whatever order concurrent changes end.
func TestOnChangeNeverGoesBack(t *testing.T) {
	kv := newMemKV()
	var mu sync.Mutex
	var seen []int
	m, err := NewManager(ManagerConfig{NodeID: 1, KV: kv, Replication: 3, Logger: quiet,
		Descriptors: func() []shard.Descriptor { return nil },
		OnChange: func(r Record) {
			mu.Lock()
			seen = append(seen, len(r.Members))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for id := uint64(4); id < 14; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Join(ctx, JoinRequest{NodeID: id, HTTPAddr: fmt.Sprint("h", id), PeerAddr: fmt.Sprint("p", id)}); err != nil {
				t.Error(err)
			}
			_, _ = m.Read(ctx)
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("OnChange went back: %v", seen)
		}
	}
	if seen[len(seen)-1] != 13 {
		t.Fatalf("last record seen has %d members, want 13: %v", seen[len(seen)-1], seen)
	}
}

// When its own read fails, Run learns the record through Fallback.
func TestRunFallsBackWhenItsReadFails(t *testing.T) {
	kv := newMemKV()
	kv.fail = errors.New("stale routing")
	got := make(chan Record, 1)
	rec := Bootstrap(three)
	rec, _, _ = rec.MarkDead(3)
	m, err := NewManager(ManagerConfig{NodeID: 3, KV: kv, Replication: 3, Logger: quiet, PollInterval: time.Millisecond,
		Descriptors: func() []shard.Descriptor { return nil },
		Fallback:    func(context.Context) (Record, uint64, error) { return rec, 5, nil },
		OnChange: func(r Record) {
			select {
			case got <- r:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	r := <-got
	cancel()
	<-done
	if me, _ := r.Member(3); me.State != Dead {
		t.Fatalf("record learned through the fallback: %+v", r)
	}
}
