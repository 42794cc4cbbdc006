package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/result"
)

// memEtcd is an in-memory EtcdKV: one revision counter, every call
// atomic. It ends the run (stop) once the register clients made limit
// calls, one of their compare-and-swaps found another value and the set
// client made 10 puts, and fails every tenth put after applying it (an answer lost on
// the way back).
type memEtcd struct {
	mu       sync.Mutex
	rev      uint64
	data     map[string]memVal
	calls    int
	setCalls int
	limit    int
	// mismatches counts the compare-and-swaps that found another value.
	mismatches int
	stop       func()
}

// memClient is one client of a memEtcd; the set's does not count calls.
type memClient struct {
	*memEtcd
	set bool
}

type memVal struct {
	v   []byte
	rev uint64
}

var errLostAnswer = errors.New("rpc error: code = Unavailable desc = error reading from server: EOF")

func (m memClient) count() {
	if m.set {
		m.setCalls++
		return
	}
	m.calls++
	if m.calls >= m.limit && m.mismatches > 0 && m.setCalls > 10 {
		m.stop()
	}
}

func (m memClient) Get(_ context.Context, key []byte) ([]byte, uint64, bool, error) {
	m.mu.Lock()
	m.count()
	v, ok := m.data[string(key)]
	m.mu.Unlock()
	runtime.Gosched() // let another client write before a compare-and-swap
	return v.v, v.rev, ok, nil
}

func (m memClient) Put(_ context.Context, key, value []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count()
	m.rev++
	m.data[string(key)] = memVal{append([]byte(nil), value...), m.rev}
	if m.rev%10 == 0 {
		return 0, errLostAnswer
	}
	return m.rev, nil
}

func (m memClient) CompareAndSwap(_ context.Context, key, expected, value []byte) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count()
	if string(m.data[string(key)].v) != string(expected) {
		m.mismatches++
		return 0, false, nil
	}
	m.rev++
	m.data[string(key)] = memVal{append([]byte(nil), value...), m.rev}
	return m.rev, true, nil
}

func (m memClient) Close() error { return nil }

// The etcd client mode records a history the checker reads as it reads
// the HTTP one: reads with their mod revisions, acknowledged and unknown
// puts, compare-and-swaps that applied (OK) or whose compare failed
// (Fail), all linearizable against a correct store, and the set's
// acknowledged writes.
func TestEtcdWorkloadHistory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &memEtcd{data: map[string]memVal{}, limit: 200, stop: cancel}
	rec := &recorder{start: time.Now(), acked: map[string]string{}, perf: result.NewRecorder(time.Now(), nil)}
	dials := 0
	dial := func(eps []string, _ *tls.Config) (EtcdKV, error) {
		if len(eps) != 3 || eps[0] != []string{"a", "b", "c"}[dials%3] {
			t.Errorf("client %d dialed %v, want the three endpoints from its own", dials, eps)
		}
		dials++
		return memClient{m, dials == 5}, nil
	}
	wait, err := startEtcdWorkload(ctx, rec, []string{"a", "b", "c"}, WorkloadConfig{Clients: 4, Keys: 3, Timeout: time.Second}, PreloadConfig{}, dial, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait()
	if dials != 5 {
		t.Fatalf("%d clients dialed, want 4 register clients and the set's", dials)
	}
	n := map[checker.Kind]map[checker.Outcome]int{checker.Read: {}, checker.Write: {}, checker.CAS: {}}
	for _, op := range rec.history {
		n[op.Kind][op.Outcome]++
		if op.Outcome == checker.OK && op.Kind != checker.Read && op.Version == 0 {
			t.Fatalf("acknowledged %s without its revision: %+v", op.Kind, op)
		}
	}
	if n[checker.Read][checker.OK] == 0 || n[checker.Write][checker.OK] == 0 || n[checker.Write][checker.Unknown] == 0 ||
		n[checker.CAS][checker.OK] == 0 || n[checker.CAS][checker.Fail] == 0 {
		t.Fatalf("outcomes %v: want every kind and outcome", n)
	}
	if ok, _, err := checker.Linearizable(rec.history, 5*time.Minute, ""); !ok || err != nil {
		t.Fatalf("a correct store's history is not linearizable (%v)", err)
	}
	if twice := checker.AppliedTwice(rec.history); len(twice) > 0 {
		t.Fatalf("applied twice: %v", twice)
	}
	if len(rec.acked) == 0 {
		t.Fatal("no acknowledged set write")
	}
	for k, v := range rec.acked {
		if got := string(m.data[k].v); got != v {
			t.Fatalf("acked %s=%s, store has %q", k, v, got)
		}
	}
}

// The etcd client's errors fall in the run's error kinds too.
func TestErrKindOfEtcdErrors(t *testing.T) {
	for msg, want := range map[string]string{
		"etcdserver: request timed out":                                            "timeout",
		"rpc error: code = Unavailable desc = etcdserver: request timed out":       "timeout",
		"context deadline exceeded":                                                "timeout",
		"rpc error: code = Unavailable desc = error reading from server: EOF":      "connection",
		"rpc error: code = Unavailable desc = cairn: stopping":                     "unavailable",
		"rpc error: code = ResourceExhausted desc = etcdserver: too many requests": "unavailable",
		"etcdserver: no leader":                                                    "unavailable",
		"rpc error: code = Unavailable desc = etcdserver: no leader":               "unavailable",
		"etcdserver: too many requests":                                            "unavailable",
	} {
		if got := errKind(msg); got != want {
			t.Errorf("errKind(%q) = %q, want %q", msg, got, want)
		}
	}
}

// A node cut off from its shard's leader answers etcd's "no leader"
// (Unavailable) at once, also to a write it may have proposed before: the
// run records that write as of unknown outcome, never as not applied.
func TestNoLeaderWriteIsUnknown(t *testing.T) {
	for _, err := range []error{
		errors.New("etcdserver: no leader"),
		errors.New("rpc error: code = Unavailable desc = etcdserver: no leader"),
	} {
		if got := etcdOutcome(err); got != checker.Unknown {
			t.Errorf("etcdOutcome(%v) = %v, want unknown", err, got)
		}
	}
}
