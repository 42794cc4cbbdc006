package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/lab/checker"
)

// The etcd client mode. With Config.Etcd set, the register
// clients and the unique-write set speak the nodes' etcd v3 API (their
// --etcd-addr) instead of the HTTP API: reads are etcd Ranges (the default,
// linearizable), writes Puts, compare-and-sets Txns comparing the key's
// value. The history is recorded and checked as usual; a key's version in
// the history is its mod_revision (the Put's or Txn's header revision, a
// Range's mod_revision), the same number as the HTTP API's version.
//
// The lab does not import an etcd client itself (internal/lint): the
// caller passes the dialer (cairn chaos passes the bench lab's, which
// wraps etcd's Go client clientv3).

// EtcdKV is one etcd API client of the workload. Every method is safe to
// call concurrently. An error leaves the outcome of a write unknown, but
// for ErrEtcdNotApplied.
type EtcdKV interface {
	// Get reads key linearizably: its value and mod revision; found is
	// false when it is absent.
	Get(ctx context.Context, key []byte) (value []byte, rev uint64, found bool, err error)
	// Put writes key and returns the write's revision.
	Put(ctx context.Context, key, value []byte) (rev uint64, err error)
	// CompareAndSwap writes value to key if its value is expected, in one
	// Txn: swapped is false (and rev 0) when the value differed.
	CompareAndSwap(ctx context.Context, key, expected, value []byte) (rev uint64, swapped bool, err error)
	Close() error
}

// ErrEtcdNotApplied wraps the errors that say a write was refused before
// it ran (an invalid request): its outcome is known.
var ErrEtcdNotApplied = errors.New("chaos: etcd request refused")

// EtcdDialer makes an EtcdKV over endpoints (host:port of the nodes' etcd
// API; the client spreads its calls over them as clientv3 does), speaking
// TLS with tlsCfg when it is not nil.
type EtcdDialer func(endpoints []string, tlsCfg *tls.Config) (EtcdKV, error)

// etcdEndpoints are the nodes' etcd API addresses, node i at [i-1].
func (c *Cluster) etcdEndpoints() ([]string, error) {
	var out []string
	for i := 1; i <= c.Size(); i++ {
		a := c.Node(i).EtcdAddr
		if a == "" {
			return nil, fmt.Errorf("chaos: node %d serves no etcd API (the binary has no --etcd-addr flag)", i)
		}
		out = append(out, a)
	}
	return out, nil
}

// etcdTLS is the client TLS configuration of the cluster's etcd API (nil:
// plain).
func (c *Cluster) etcdTLS() *tls.Config {
	if t := c.TLS(); t != nil {
		cfg, _ := t.ClientConfig() // read at launch already
		return cfg
	}
	return nil
}

// dialFrom dials a client over endpoints, starting at endpoints[i mod
// their count], so clients spread over the nodes.
func dialFrom(dial EtcdDialer, endpoints []string, i int, tlsCfg *tls.Config) (EtcdKV, error) {
	first := i % len(endpoints)
	cl, err := dial(append(append([]string(nil), endpoints[first:]...), endpoints[:first]...), tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: etcd client: %w", err)
	}
	return cl, nil
}

// startEtcdWorkload is startWorkload's etcd mode: w.Clients register
// clients and the unique-write set, each with a client of its own over
// every endpoint (starting at a different one).
func startEtcdWorkload(ctx context.Context, rec *recorder, endpoints []string, w WorkloadConfig, p PreloadConfig, dial EtcdDialer, tlsCfg *tls.Config) (wait func(), err error) {
	var keys []string
	for i := 0; i < w.Keys; i++ {
		keys = append(keys, fmt.Sprintf("reg/%d", i))
	}
	var cls []EtcdKV
	closeAll := func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	for i := 0; i <= w.Clients; i++ { // the last one writes the set
		cl, err := dialFrom(dial, endpoints, i, tlsCfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		cls = append(cls, cl)
	}
	var wg sync.WaitGroup
	for i := 0; i < w.Clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runEtcdRegisters(ctx, rec, cls[i], i, keys, int64(i+1), p, w.Timeout)
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); runEtcdSet(ctx, rec, cls[w.Clients], w.Timeout) }()
	waitLeases := func() {}
	if w.Leases > 0 {
		if waitLeases, err = startLeaseWorkers(ctx, rec, endpoints, w, dial, tlsCfg); err != nil {
			wg.Wait()
			closeAll()
			return nil, err
		}
	}
	return func() { wg.Wait(); waitLeases(); closeAll() }, nil
}

// etcdOutcome: a write that returned is applied; one refused before it
// ran (ErrEtcdNotApplied) is not; any other error leaves it unknown.
func etcdOutcome(err error) checker.Outcome {
	switch {
	case err == nil:
		return checker.OK
	case errors.Is(err, ErrEtcdNotApplied):
		return checker.Fail
	}
	return checker.Unknown
}

// runEtcdRegisters is runRegisters over the etcd API. Its operations
// record node 0: clientv3 chooses the member of each call.
func runEtcdRegisters(ctx context.Context, rec *recorder, cl EtcdKV, id int, keys []string, seed int64, p PreloadConfig, timeout time.Duration) {
	rng := rand.New(rand.NewSource(seed))
	var val []byte
	if p.Keys > 0 {
		val = make([]byte, p.ValueSize)
		rng.Read(val)
	}
	// Each call gets the operation timeout, not the run's context: a call
	// in flight when the run ends finishes (as runRegisters' do).
	call := func(f func(ctx context.Context)) {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		f(cctx)
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		if p.Keys > 0 && rng.Intn(100) < p.Percent {
			call(func(cctx context.Context) { etcdDataOp(cctx, rec, cl, p, rng, val) })
			continue
		}
		key := keys[rng.Intn(len(keys))]
		op := checker.Op{Client: id, Key: key}
		start := time.Now()
		op.Call = rec.since(start)
		var err error
		switch x := rng.Intn(10); {
		case x < 4:
			op.Kind = checker.Read
			var v []byte
			call(func(cctx context.Context) { v, op.Version, _, err = cl.Get(cctx, []byte(key)) })
			op.Value = string(v)
		case x < 8:
			op.Kind = checker.Write
			op.Value = fmt.Sprintf("c%d-%d", id, seq)
			call(func(cctx context.Context) { op.Version, err = cl.Put(cctx, []byte(key), []byte(op.Value)) })
		default:
			// Read the value, then compare-and-swap on it.
			var v []byte
			var rev uint64
			var found bool
			var gerr error
			call(func(cctx context.Context) { v, rev, found, gerr = cl.Get(cctx, []byte(key)) })
			ret := time.Now()
			rd := checker.Op{Client: id, Key: key, Kind: checker.Read, Call: op.Call, Return: rec.since(ret),
				Value: string(v), Version: rev, Outcome: checker.OK}
			if gerr != nil {
				rd.Outcome, rd.Err, rd.Version = checker.Unknown, gerr.Error(), 0
			}
			rec.add(rd)
			rec.record("read", start, ret, gerr)
			if gerr != nil {
				pauseAfterError(ctx)
			}
			if gerr != nil || !found {
				continue
			}
			start = time.Now()
			op.Call = rec.since(start)
			op.Kind, op.Expected, op.Value = checker.CAS, string(v), fmt.Sprintf("c%d-%d", id, seq)
			var swapped bool
			call(func(cctx context.Context) {
				op.Version, swapped, err = cl.CompareAndSwap(cctx, []byte(key), v, []byte(op.Value))
			})
			if err == nil && !swapped {
				err = fmt.Errorf("%w: compare failed", ErrEtcdNotApplied) // the Txn's else branch: definitely not applied
			}
		}
		end := time.Now()
		op.Return = rec.since(end)
		op.Outcome = etcdOutcome(err)
		if err != nil {
			op.Version = 0
			op.Err = err.Error()
		}
		if op.Kind == checker.CAS && errors.Is(err, ErrEtcdNotApplied) {
			err = nil // a compare that failed is an answer, not an error
		}
		rec.add(op)
		rec.record(string(op.Kind), start, end, err)
		if err != nil {
			pauseAfterError(ctx)
		}
	}
}

// etcdErrorPause is how long an etcd register client waits after a call
// that failed before its next one, as an application would. clientv3
// retries a Range on another member itself but hands a failed Put or Txn
// back at once: a node cut off from its shard's leader answers "no
// leader" within a millisecond, and clients that called again at once
// filled a partition's six seconds with thousands of writes of unknown
// outcome, which the linearizability check (each may take effect at any
// later time) could not get through within its two minutes.
const etcdErrorPause = 100 * time.Millisecond

// pauseAfterError waits etcdErrorPause, or until ctx ends.
func pauseAfterError(ctx context.Context) {
	select {
	case <-time.After(etcdErrorPause):
	case <-ctx.Done():
	}
}

// etcdDataOp is dataOp over the etcd API.
func etcdDataOp(ctx context.Context, rec *recorder, cl EtcdKV, p PreloadConfig, rng *rand.Rand, val []byte) {
	k := p.Key(uint64(rng.Int63n(int64(p.Keys))))
	start := time.Now()
	if rng.Intn(2) == 0 {
		_, _, _, err := cl.Get(ctx, k)
		rec.record("data-read", start, time.Now(), err)
		return
	}
	rng.Read(val[:min(8, len(val))])
	_, err := cl.Put(ctx, k, val)
	rec.record("data-update", start, time.Now(), err)
}

// runEtcdSet is runSet over the etcd API.
func runEtcdSet(ctx context.Context, rec *recorder, cl EtcdKV, timeout time.Duration) {
	for i := 0; ctx.Err() == nil; i++ {
		k, v := fmt.Sprintf("set/%06d", i), fmt.Sprint("v", i)
		start := time.Now()
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := cl.Put(cctx, []byte(k), []byte(v))
		cancel()
		rec.record("set", start, time.Now(), err)
		if err == nil {
			rec.ack(k, v)
		}
	}
}

// startLoad starts the workload: over the HTTP API, or over the etcd API
// through dial's clients when it is not nil.
func (c *Cluster) startLoad(ctx context.Context, rec *recorder, w WorkloadConfig, p PreloadConfig, dial EtcdDialer) (wait func(), err error) {
	if dial == nil {
		return startWorkload(ctx, rec, c.Endpoints(), w, p, c.clientOptions), nil
	}
	eps, err := c.etcdEndpoints()
	if err != nil {
		return nil, err
	}
	return startEtcdWorkload(ctx, rec, eps, w, p, dial, c.etcdTLS())
}

func init() {
	const name = "etcd-api"
	Scenarios[name] = Scenario{Name: name, Etcd: true, MinDuration: 30 * time.Second,
		Description: "the clients speak the etcd v3 API (clientv3: Range, Put, Txn compare-and-swap on the value) while the leader of shard 1 is killed with -9 (restarted 6 s later), then the new leader is isolated for 6 s",
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: killFault{}, Target: "leader", At: 5 * time.Second, For: 6 * time.Second},
				{Fault: partitionFault{}, Target: "leader", At: 15 * time.Second, For: 6 * time.Second}}
		}}
}
