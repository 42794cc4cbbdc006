package chaos

import (
	"context"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
)

// recorder holds the history, the set of acknowledged unique writes and
// the per-second throughput series.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	history []checker.Op
	acked   map[string]string
	// ackedAt is when each acknowledged unique write's answer came.
	ackedAt map[string]time.Time
	perf    *result.Recorder
	// errKinds counts the failed operations by errKind (the run's
	// client_errors).
	errKinds map[string]uint64
	// indexed: the workload writes indexed keys (WorkloadConfig.IndexKeys),
	// recorded in indexWrites.
	indexed     bool
	indexWrites []checker.IndexWrite
	// leaseWorkers ran the lease workload (WorkloadConfig.Leases),
	// recorded in leases; leaseGrantErrors counts its grants that failed.
	leaseWorkers     int
	leases           []checker.Lease
	leaseGrantErrors int
}

func (r *recorder) since(t time.Time) int64 { return t.Sub(r.start).Nanoseconds() }

func (r *recorder) add(op checker.Op) {
	r.mu.Lock()
	r.history = append(r.history, op)
	r.mu.Unlock()
}

// record one operation in the throughput series and the run's error
// counts.
func (r *recorder) record(name string, call, end time.Time, err error) {
	err = perfErr(err)
	r.perf.Record(name, call, end, err)
	if err == nil {
		return
	}
	r.mu.Lock()
	if r.errKinds == nil {
		r.errKinds = map[string]uint64{}
	}
	r.errKinds[errKind(err.Error())]++
	r.mu.Unlock()
}

// statusInMsg finds the status of a node's error answer in a client error
// message ("cairn: 503 overloaded: …").
var statusInMsg = regexp.MustCompile(`cairn: (\d{3}) `)

// errKind classifies a client error, by its message, for client_errors
// (the run's and each fault's): "unavailable" (a 503 answer: no leader,
// overloaded, stopping), "timeout" (a 504 answer, or no answer within an
// attempt's deadline), "connection" (refused, reset or closed), "http_N"
// (another status) or "other". The client retries until its deadline and
// then returns ErrTimeout with its last attempt's failure as text, so the
// kind is that of the last attempt.
func errKind(msg string) string {
	if m := statusInMsg.FindAllStringSubmatch(msg, -1); len(m) > 0 {
		switch code := m[len(m)-1][1]; code {
		case "503":
			return "unavailable"
		case "504":
			return "timeout"
		default:
			return "http_" + code
		}
	}
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "EOF", "server closed", "no route to host", "network is unreachable"} {
		if strings.Contains(msg, s) {
			return "connection"
		}
	}
	for _, s := range []string{"cairn: timeout", "deadline exceeded", "Timeout exceeded", "etcdserver: request timed out"} {
		if strings.Contains(msg, s) {
			return "timeout"
		}
	}
	if strings.Contains(msg, "code = Unavailable") || strings.Contains(msg, "code = ResourceExhausted") || // an etcd API answer
		strings.Contains(msg, "etcdserver: no leader") || strings.Contains(msg, "etcdserver: too many requests") { // as clientv3 reports it
		return "unavailable"
	}
	return "other"
}

// outcomeOf: only a 412 is a definite "not applied" (the condition did
// not hold); any other error leaves the outcome unknown to the client.
func outcomeOf(err error) checker.Outcome {
	switch {
	case err == nil:
		return checker.OK
	case errors.Is(err, client.ErrPreconditionFailed):
		return checker.Fail
	}
	return checker.Unknown
}

// perfErr turns a client error into what the throughput recorder counts.
func perfErr(err error) error {
	if err == nil || errors.Is(err, client.ErrPreconditionFailed) || errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}

// runRegisters drives one client: reads, writes of unique values and
// compare-and-sets on the register keys, all through one node, and with
// a preload, reads and updates of the records (p.Percent of the
// operations).
func runRegisters(ctx context.Context, rec *recorder, cl *client.Client, id, node int, keys []string, seed int64, p PreloadConfig) {
	rng := rand.New(rand.NewSource(seed))
	var val []byte
	if p.Keys > 0 {
		val = make([]byte, p.ValueSize)
		rng.Read(val)
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		if p.Keys > 0 && rng.Intn(100) < p.Percent {
			dataOp(rec, cl, p, rng, val)
			continue
		}
		key := keys[rng.Intn(len(keys))]
		op := checker.Op{Client: id, Key: key, Node: node}
		call := time.Now()
		op.Call = rec.since(call)
		var err error
		switch x := rng.Intn(10); {
		case x < 4:
			op.Kind = checker.Read
			var v client.Versioned
			v, err = cl.Get(context.Background(), []byte(key), false)
			if errors.Is(err, client.ErrNotFound) {
				err = nil
			}
			op.Value, op.Version = string(v.Value), v.Version
		case x < 8:
			op.Kind = checker.Write
			op.Value = fmt.Sprintf("c%d-%d", id, seq)
			op.Version, err = cl.Put(context.Background(), []byte(key), []byte(op.Value), client.PutOptions{})
		default:
			// Read the current version, then compare-and-set on it.
			v, gerr := cl.Get(context.Background(), []byte(key), false)
			ret := time.Now()
			rd := checker.Op{Client: id, Key: key, Node: node, Kind: checker.Read, Call: op.Call, Return: rec.since(ret),
				Value: string(v.Value), Version: v.Version, Outcome: outcomeOf(gerr)}
			if errors.Is(gerr, client.ErrNotFound) {
				rd.Outcome, rd.Value = checker.OK, ""
			}
			rec.add(rd)
			rec.record("read", call, ret, gerr)
			if rd.Outcome != checker.OK || v.Version == 0 {
				continue
			}
			call = time.Now()
			op.Call = rec.since(call)
			op.Kind, op.Expected, op.Value = checker.CAS, string(v.Value), fmt.Sprintf("c%d-%d", id, seq)
			op.Version, err = cl.Put(context.Background(), []byte(key), []byte(op.Value), client.PutOptions{IfVersion: v.Version})
		}
		end := time.Now()
		op.Return = rec.since(end)
		op.Outcome = outcomeOf(err)
		if err != nil {
			op.Version = 0
			op.Err = err.Error()
		}
		rec.add(op)
		rec.record(string(op.Kind), call, end, err)
	}
}

// ack notes that the unique write k=v was acknowledged, and when.
func (rec *recorder) ack(k, v string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.acked[k] = v
	if rec.ackedAt == nil {
		rec.ackedAt = map[string]time.Time{}
	}
	rec.ackedAt[k] = time.Now()
}

// runSet writes unique keys through every node in turn and remembers the
// acknowledged ones, which must all be readable after healing.
func runSet(ctx context.Context, rec *recorder, cls []*client.Client) {
	for i := 0; ctx.Err() == nil; i++ {
		k, v := fmt.Sprintf("set/%06d", i), fmt.Sprint("v", i)
		start := time.Now()
		_, err := cls[i%len(cls)].Put(context.Background(), []byte(k), []byte(v), client.PutOptions{})
		rec.record("set", start, time.Now(), err)
		if err == nil {
			rec.ack(k, v)
		}
	}
}
