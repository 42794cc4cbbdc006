package chaos

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-db/cairn/internal/lab/checker"
)

// The lease workload (WorkloadConfig.Leases, etcd clients only): each
// lease worker, with a client of its own, loops: grant a lease of 2 or
// 3 s, put lease/<worker>/<n> with it, then either keep it (a keepalive
// every 300 to 500 ms for 2 to 6 s, each answered with a TTL followed by
// a linearizable read of the key) and revoke it, or abandon it (no more
// keepalives: it must expire). Every call has the workload's operation
// timeout. The recorded leases (checker.Lease, leases.json) are judged
// after healing (checkLeases): no read may find the key of a lease just
// renewed gone, no lease may be gone before its TTL, and every key of a
// lease revoked or abandoned must be deleted within twice the longest
// TTL and 10 s after the faults heal.

// EtcdLeases is the lease part of an etcd API client; the EtcdKV an
// EtcdDialer returns must implement it for the lease workload. Every
// method is safe to call concurrently; an error leaves the outcome
// unknown.
type EtcdLeases interface {
	// Grant grants a lease of ttl seconds: its id and the TTL granted.
	Grant(ctx context.Context, ttl int64) (id, granted int64, err error)
	// KeepAliveOnce renews lease id once: the TTL answered, 0 when the
	// lease does not exist.
	KeepAliveOnce(ctx context.Context, id int64) (ttl int64, err error)
	// Revoke revokes lease id; found is false when it did not exist.
	Revoke(ctx context.Context, id int64) (found bool, err error)
	// PutWithLease writes key attached to lease id: the write's revision;
	// found is false when the lease did not exist (the put is refused).
	PutWithLease(ctx context.Context, key, value []byte, id int64) (rev uint64, found bool, err error)
}

// Lease workload timings (see above).
const (
	leaseMinTTL, leaseMaxTTL = 2, 3 // seconds
	leaseKeepMin             = 2 * time.Second
	leaseKeepMax             = 6 * time.Second
	leaseRenewMin            = 300 * time.Millisecond
	leaseRenewMax            = 500 * time.Millisecond
	// leaseVanishSlack is added to twice the longest TTL to bound the
	// wait, after healing, for the keys of ended leases to be deleted.
	leaseVanishSlack = 10 * time.Second
)

// startLeaseWorkers starts w.Leases lease workers over endpoints, each
// with a client of its own (starting at a different endpoint); wait
// waits for them and closes their clients.
func startLeaseWorkers(ctx context.Context, rec *recorder, endpoints []string, w WorkloadConfig, dial EtcdDialer, tlsCfg *tls.Config) (wait func(), err error) {
	var cls []EtcdKV
	closeAll := func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	var lcs []EtcdLeases
	for i := 0; i < w.Leases; i++ {
		cl, err := dialFrom(dial, endpoints, i+1, tlsCfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		cls = append(cls, cl)
		lc, ok := cl.(EtcdLeases)
		if !ok {
			closeAll()
			return nil, fmt.Errorf("chaos: the etcd client %T has no lease calls (EtcdLeases)", cl)
		}
		lcs = append(lcs, lc)
	}
	rec.mu.Lock()
	rec.leaseWorkers = w.Leases
	rec.mu.Unlock()
	done := make(chan struct{}, w.Leases)
	for i := range lcs {
		go func() {
			defer func() { done <- struct{}{} }()
			runLeaseWorker(ctx, rec, cls[i], lcs[i], i, int64(500+i), w.Timeout)
		}()
	}
	return func() {
		for range lcs {
			<-done
		}
		closeAll()
	}, nil
}

// runLeaseWorker is lease worker id until ctx ends (its last lease is
// revoked then, with its own timeout).
func runLeaseWorker(ctx context.Context, rec *recorder, cl EtcdKV, lc EtcdLeases, id int, seed int64, timeout time.Duration) {
	rng := rand.New(rand.NewSource(seed))
	call := func(name string, f func(ctx context.Context) error) (start, end time.Time, err error) {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start = time.Now()
		err = f(cctx)
		end = time.Now()
		rec.record(name, start, end, err)
		return start, end, err
	}
	sleep := func(lo, hi time.Duration) bool {
		select {
		case <-time.After(lo + time.Duration(rng.Int63n(int64(hi-lo)))):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for n := 0; ctx.Err() == nil; n++ {
		l := checker.Lease{Worker: id, Key: fmt.Sprintf("lease/%d/%d", id, n)}
		start, _, err := call("lease-grant", func(cctx context.Context) (err error) {
			l.ID, l.TTL, err = lc.Grant(cctx, leaseMinTTL+rng.Int63n(leaseMaxTTL-leaseMinTTL+1))
			return err
		})
		if err != nil {
			rec.leaseGrantFailed()
			pauseAfterError(ctx)
			continue
		}
		l.GrantCall, l.LastRenewal = rec.since(start), rec.since(start)
		var found bool
		_, end, err := call("lease-put", func(cctx context.Context) (err error) {
			_, found, err = lc.PutWithLease(cctx, []byte(l.Key), []byte(fmt.Sprint("v", n)), l.ID)
			return err
		})
		switch {
		case err != nil:
			l.Put = checker.Unknown
		case !found:
			l.Put, l.End, l.EndAt = checker.Fail, checker.LeaseGone, rec.since(end)
		default:
			l.Put = checker.OK
		}
		keep := l.Put == checker.OK && rng.Intn(2) == 0
		if l.Put == checker.OK && !keep {
			l.End, l.EndAt = checker.LeaseAbandoned, rec.since(end)
			rec.addLease(l)
			sleep(leaseRenewMin, leaseRenewMax)
			continue
		}
		if keep {
			until := time.Now().Add(leaseKeepMin + time.Duration(rng.Int63n(int64(leaseKeepMax-leaseKeepMin))))
			for time.Now().Before(until) && sleep(leaseRenewMin, leaseRenewMax) {
				var ttl int64
				start, end, err := call("lease-keepalive", func(cctx context.Context) (err error) {
					ttl, err = lc.KeepAliveOnce(cctx, l.ID)
					return err
				})
				k := checker.LeaseKeepAlive{Sent: rec.since(start), Return: rec.since(end), TTL: ttl}
				if err != nil {
					k.Err = err.Error()
				}
				l.KeepAlives = append(l.KeepAlives, k)
				if err != nil {
					continue
				}
				if ttl <= 0 {
					l.End, l.EndAt = checker.LeaseGone, k.Return
					break
				}
				l.LastRenewal = k.Sent
				var found bool
				start, end, err = call("lease-read", func(cctx context.Context) (err error) {
					_, _, found, err = cl.Get(cctx, []byte(l.Key))
					return err
				})
				r := checker.LeaseRead{Call: rec.since(start), Return: rec.since(end), Found: found}
				if err != nil {
					r.Err = err.Error()
				}
				l.Reads = append(l.Reads, r)
			}
		}
		if l.End == "" { // kept, or its put's outcome unknown: revoke it
			_, end, err := call("lease-revoke", func(cctx context.Context) (err error) {
				found, err = lc.Revoke(cctx, l.ID)
				return err
			})
			l.EndAt = rec.since(end)
			switch {
			case err != nil:
				l.End = checker.LeaseAbandoned // it must expire
			case !found:
				l.End, l.RevokeNotFound = checker.LeaseGone, true
			default:
				l.End = checker.LeaseRevoked
			}
		}
		rec.addLease(l)
		if err != nil {
			pauseAfterError(ctx)
		}
	}
}

func (r *recorder) addLease(l checker.Lease) {
	r.mu.Lock()
	r.leases = append(r.leases, l)
	r.mu.Unlock()
}

func (r *recorder) leaseGrantFailed() {
	r.mu.Lock()
	r.leaseGrantErrors++
	r.mu.Unlock()
}

// LeaseCheck is the lease check of a run with a lease workload.
type LeaseCheck struct {
	Workers int `json:"workers"`
	// Granted leases (GrantErrors grants failed); Kept of them were kept
	// alive for a while; each ended Revoked, Abandoned (on purpose, or
	// its revoke failed) or Gone (a keepalive or the revoke found it
	// expired).
	Granted     int `json:"granted"`
	GrantErrors int `json:"grant_errors"`
	Kept        int `json:"kept"`
	Revoked     int `json:"revoked"`
	Abandoned   int `json:"abandoned"`
	Gone        int `json:"gone"`
	// PutsUnknown counts the puts with a lease whose outcome is unknown
	// (their keys may stay).
	PutsUnknown int `json:"puts_unknown"`
	// KeepAlives answered with a TTL, KeepAliveErrors failed; Reads is
	// the reads of a kept lease's key that answered (the ones judged).
	KeepAlives      int `json:"keepalives"`
	KeepAliveErrors int `json:"keepalive_errors"`
	Reads           int `json:"reads"`
	// Violations: live leases without their key, leases gone early
	// (checker.LeaseViolations).
	Violations []string `json:"violations,omitempty"`
	// ToVanish keys had to be deleted after healing; KeysLeft were still
	// there at the bound (VanishBoundMs after healing); VanishedMs is when
	// the last of them was seen gone, from healing.
	ToVanish      int      `json:"to_vanish"`
	KeysLeft      []string `json:"keys_left,omitempty"`
	VanishedMs    int64    `json:"vanished_ms"`
	VanishBoundMs int64    `json:"vanish_bound_ms"`
	Error         string   `json:"error,omitempty"`
}

// Failed reports whether the check found a violation, a key left, or
// could not run.
func (c *LeaseCheck) Failed() bool {
	return c.Error != "" || len(c.Violations) > 0 || len(c.KeysLeft) > 0
}

// summarizeLeases counts the recorded leases and judges their safety.
func summarizeLeases(ls []checker.Lease) *LeaseCheck {
	c := &LeaseCheck{Granted: len(ls)}
	for _, l := range ls {
		if len(l.KeepAlives) > 0 {
			c.Kept++
		}
		switch l.End {
		case checker.LeaseRevoked:
			c.Revoked++
		case checker.LeaseAbandoned:
			c.Abandoned++
		case checker.LeaseGone:
			c.Gone++
		}
		if l.Put == checker.Unknown {
			c.PutsUnknown++
		}
		for _, k := range l.KeepAlives {
			if k.Err != "" {
				c.KeepAliveErrors++
			} else {
				c.KeepAlives++
			}
		}
		for _, r := range l.Reads {
			if r.Err == "" {
				c.Reads++
			}
		}
	}
	c.Violations = checker.LeaseViolations(ls)
	return c
}

// awaitVanished reads the keys (exists, through a linearizable read)
// until none is left or bound has passed since healed, and returns
// those left (with the lease that held each) and when the last was seen
// gone.
func awaitVanished(ls []checker.Lease, exists func(key string) (bool, error), healed time.Time, bound time.Duration) (left []string, vanished time.Duration) {
	owner := map[string]checker.Lease{}
	for _, l := range ls {
		owner[l.Key] = l
	}
	keys := checker.LeaseKeysToVanish(ls)
	errs := map[string]error{}
	for {
		var still []string
		for _, k := range keys {
			there, err := exists(k)
			if err != nil || there {
				still = append(still, k)
				errs[k] = err
			}
		}
		keys = still
		if len(keys) == 0 {
			return nil, time.Since(healed)
		}
		if time.Since(healed) > bound {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, k := range keys {
		l := owner[k]
		msg := fmt.Sprintf("%s (lease %x of TTL %d s, %s at %.1fs, last renewed at %.1fs)", k, l.ID, l.TTL, l.End, float64(l.EndAt)/1e9, float64(l.LastRenewal)/1e9)
		if errs[k] != nil {
			msg += ": not read: " + errs[k].Error()
		}
		left = append(left, msg)
	}
	return left, time.Since(healed)
}

// checkLeases judges the recorded leases (writing them to dir's
// leases.json) and waits for the keys of the ended ones to be deleted,
// reading them through a client of dial over endpoints.
func checkLeases(rec *recorder, dial EtcdDialer, endpoints []string, tlsCfg *tls.Config, healed time.Time, dir string, logf func(string, ...any)) *LeaseCheck {
	rec.mu.Lock()
	ls := append([]checker.Lease(nil), rec.leases...)
	workers, grantErrors := rec.leaseWorkers, rec.leaseGrantErrors
	rec.mu.Unlock()
	b, _ := json.Marshal(ls)
	_ = os.WriteFile(filepath.Join(dir, "leases.json"), b, 0o644)
	c := summarizeLeases(ls)
	c.Workers, c.GrantErrors = workers, grantErrors
	c.ToVanish = len(checker.LeaseKeysToVanish(ls))
	bound := 2*leaseMaxTTL*time.Second + leaseVanishSlack
	c.VanishBoundMs = bound.Milliseconds()
	logf("checking %d leases: %d violations; waiting for the %d keys of ended leases to be deleted…", len(ls), len(c.Violations), c.ToVanish)
	cl, err := dial(endpoints, tlsCfg)
	if err != nil {
		c.Error = fmt.Sprintf("etcd client: %v", err)
		return c
	}
	defer cl.Close()
	left, vanished := awaitVanished(ls, func(k string) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, found, err := cl.Get(ctx, []byte(k))
		return found, err
	}, healed, bound)
	c.KeysLeft, c.VanishedMs = left, vanished.Milliseconds()
	return c
}

func init() {
	const name = "lease"
	Scenarios[name] = Scenario{Name: name, Etcd: true, Leases: 4, MinDuration: 30 * time.Second,
		Description: "etcd clients as in etcd-api, and 4 lease workers granting leases of 2-3 s with a key each, keeping them alive (a linearizable read of the key after each keepalive) and revoking them, or abandoning them; the leader of shard 1 is killed with -9 (restarted 6 s later), the new leader isolated for 6 s, then a leader paused (SIGSTOP) for 4 s. No read may find a just-renewed lease's key gone, no lease may end before its TTL, and every key of a revoked or abandoned lease must be deleted within 2×TTL+10 s of healing",
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: killFault{}, Target: "leader", At: 5 * time.Second, For: 6 * time.Second},
				{Fault: partitionFault{}, Target: "leader", At: 14 * time.Second, For: 6 * time.Second},
				{Fault: pauseFault{}, Target: "leader", At: 23 * time.Second, For: 4 * time.Second}}
		}}
}
