package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/result"
)

// memLeases is an in-memory etcd store with leases that never expire by
// themselves: a revoke deletes the lease's keys. With dropOnRenew, every
// third keepalive deletes the lease's keys but answers the lease alive
// (the bug the lease check exists for).
type memLeases struct {
	mu          sync.Mutex
	next        int64
	keys        map[string]int64 // key → lease
	leases      map[int64]bool
	renewals    int
	dropOnRenew bool
}

func newMemLeases() *memLeases {
	return &memLeases{keys: map[string]int64{}, leases: map[int64]bool{}}
}

func (m *memLeases) Get(_ context.Context, key []byte) ([]byte, uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.keys[string(key)]
	return []byte("v"), 1, ok, nil
}
func (m *memLeases) Put(context.Context, []byte, []byte) (uint64, error) { return 1, nil }
func (m *memLeases) CompareAndSwap(context.Context, []byte, []byte, []byte) (uint64, bool, error) {
	return 0, false, nil
}
func (m *memLeases) Close() error { return nil }

func (m *memLeases) Grant(_ context.Context, ttl int64) (int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.leases[m.next] = true
	return m.next, ttl, nil
}

func (m *memLeases) KeepAliveOnce(_ context.Context, id int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leases[id] {
		return 0, nil
	}
	m.renewals++
	if m.dropOnRenew && m.renewals%3 == 0 {
		m.dropKeys(id)
	}
	return 2, nil
}

func (m *memLeases) dropKeys(id int64) {
	for k, l := range m.keys {
		if l == id {
			delete(m.keys, k)
		}
	}
}

func (m *memLeases) Revoke(_ context.Context, id int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leases[id] {
		return false, nil
	}
	delete(m.leases, id)
	m.dropKeys(id)
	return true, nil
}

func (m *memLeases) PutWithLease(_ context.Context, key, _ []byte, id int64) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leases[id] {
		return 0, false, nil
	}
	m.keys[string(key)] = id
	return 1, true, nil
}

// runMemLeases runs two lease workers over m until the leases they have
// recorded are enough (checked every 50 ms), or for bound at most, and
// returns what they recorded. A fixed run was not enough: each lease is
// kept (for 2 to 6 s) or abandoned at random, and how many draws a kept
// lease's renewals take depends on how fast the machine runs them, so
// on a loaded machine two workers could keep every lease of a 7 s run
// and abandon none.
func runMemLeases(t *testing.T, m *memLeases, bound time.Duration, enough func(*LeaseCheck) bool) []checker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	rec := &recorder{start: time.Now(), acked: map[string]string{}, perf: result.NewRecorder(time.Now(), nil)}
	wait, err := startLeaseWorkers(ctx, rec, []string{"a", "b"}, WorkloadConfig{Leases: 2, Timeout: time.Second},
		func([]string, *tls.Config) (EtcdKV, error) { return m, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rec.mu.Lock()
			ls := slices.Clone(rec.leases)
			rec.mu.Unlock()
			if enough(summarizeLeases(ls)) {
				cancel()
				return
			}
		}
	}()
	wait()
	cancel()
	<-polled
	if rec.leaseWorkers != 2 {
		t.Fatalf("lease workers %d, want 2", rec.leaseWorkers)
	}
	return rec.leases
}

// Against a correct store the workers keep, revoke and abandon leases,
// read the kept ones' keys, and the check finds nothing; the abandoned
// leases' keys (this store never expires them) are left.
func TestLeaseWorkloadCorrectStore(t *testing.T) {
	m := newMemLeases()
	every := func(c *LeaseCheck) bool {
		return c.Granted > 0 && c.Kept > 0 && c.Revoked > 0 && c.Abandoned > 0 && c.KeepAlives > 0 && c.Reads > 0
	}
	ls := runMemLeases(t, m, time.Minute, every)
	c := summarizeLeases(ls)
	if !every(c) {
		t.Fatalf("counts %+v: want leases kept, revoked and abandoned, keepalives and reads", c)
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations against a correct store: %v", c.Violations)
	}
	exists := func(k string) (bool, error) { _, _, ok, err := m.Get(context.Background(), []byte(k)); return ok, err }
	left, _ := awaitVanished(ls, exists, time.Now(), 0)
	if len(left) != c.Abandoned {
		t.Fatalf("%d keys left, want the %d abandoned leases' (never expired): %v", len(left), c.Abandoned, left)
	}
	// Once expired, nothing is left.
	m.mu.Lock()
	for id := range m.leases {
		m.dropKeys(id)
	}
	m.mu.Unlock()
	if left, _ := awaitVanished(ls, exists, time.Now(), 0); len(left) != 0 {
		t.Fatalf("left after expiry: %v", left)
	}
}

// A store that deletes a lease's keys while answering its keepalives
// alive fails the check.
func TestLeaseWorkloadKeyDropped(t *testing.T) {
	m := newMemLeases()
	m.dropOnRenew = true
	c := summarizeLeases(runMemLeases(t, m, 30*time.Second, func(c *LeaseCheck) bool { return len(c.Violations) > 0 }))
	if len(c.Violations) == 0 || !c.Failed() || !strings.Contains(c.Violations[0], "live lease without its key") {
		t.Fatalf("no violation against a store dropping keys of live leases: %+v", c)
	}
}

// The wait for ended leases' keys: a key still there at the bound is
// reported (with its lease), one that goes meanwhile is not, and one of
// a put of unknown outcome is never read.
func TestAwaitVanished(t *testing.T) {
	ls := []checker.Lease{
		{ID: 1, Key: "stays", TTL: 2, Put: checker.OK, End: checker.LeaseAbandoned},
		{ID: 2, Key: "goes", TTL: 2, Put: checker.OK, End: checker.LeaseRevoked},
		{ID: 3, Key: "unknown", TTL: 2, Put: checker.Unknown, End: checker.LeaseAbandoned},
		{ID: 4, Key: "unreadable", TTL: 2, Put: checker.OK, End: checker.LeaseGone},
	}
	reads := map[string]int{}
	left, _ := awaitVanished(ls, func(k string) (bool, error) {
		reads[k]++
		switch k {
		case "goes":
			return reads[k] < 2, nil
		case "unreadable":
			return false, errors.New("no leader")
		}
		return true, nil
	}, time.Now(), 700*time.Millisecond)
	if len(left) != 2 || !strings.HasPrefix(left[0], "stays (lease 1 ") || !strings.Contains(left[1], "unreadable") || !strings.Contains(left[1], "no leader") {
		t.Fatalf("left %q", left)
	}
	if reads["unknown"] != 0 || reads["goes"] != 2 {
		t.Fatalf("reads %v", reads)
	}
}
