package checker

import (
	"fmt"
	"sort"
)

// Lease is the recorded life of one etcd lease of the lease workload: a
// grant, one put of Key with the lease, then keepalives each followed by
// a linearizable read of Key, and a revoke — or the lease is abandoned
// (no more keepalives). Times are nanoseconds from the run's start, as
// Op's. The worker never deletes or rewrites Key itself.
type Lease struct {
	Worker int    `json:"worker"`
	ID     int64  `json:"id"`
	Key    string `json:"key"`
	// GrantCall is when the grant was sent, TTL the seconds it granted.
	GrantCall int64 `json:"grant_call"`
	TTL       int64 `json:"ttl"`
	// Put is the outcome of the put of Key with the lease: OK, Fail (the
	// lease was not found: the key is not left behind) or Unknown.
	Put Outcome `json:"put"`
	// KeepAlives and Reads in the order they were made.
	KeepAlives []LeaseKeepAlive `json:"keepalives,omitempty"`
	Reads      []LeaseRead      `json:"reads,omitempty"`
	// End is how the lease ended for the worker (LeaseRevoked …).
	End string `json:"end"`
	// EndAt is when the revoke was answered, or the lease abandoned or
	// found gone.
	EndAt int64 `json:"end_at"`
	// LastRenewal is when the last grant or keepalive answered with a
	// TTL above 0 was sent.
	LastRenewal int64 `json:"last_renewal"`
	// RevokeNotFound: the revoke answered that there was no lease (End
	// LeaseGone, at EndAt).
	RevokeNotFound bool `json:"revoke_not_found,omitempty"`
}

// How a lease of the workload ended.
const (
	// LeaseRevoked: the worker's revoke was acknowledged.
	LeaseRevoked = "revoked"
	// LeaseAbandoned: the worker stopped renewing it (on purpose, or its
	// revoke failed): it must expire.
	LeaseAbandoned = "abandoned"
	// LeaseGone: a keepalive answered TTL 0, or the revoke found no
	// lease: it had expired.
	LeaseGone = "gone"
)

// LeaseKeepAlive is one keepalive: sent at Sent, answered at Return with
// TTL (0: the lease is gone) or failed with Err.
type LeaseKeepAlive struct {
	Sent   int64  `json:"sent"`
	Return int64  `json:"return"`
	TTL    int64  `json:"ttl"`
	Err    string `json:"err,omitempty"`
}

// LeaseRead is one linearizable read of the lease's key: called at Call,
// answered at Return, Found whether the key was there; Err: no answer.
type LeaseRead struct {
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Found  bool   `json:"found"`
	Err    string `json:"err,omitempty"`
}

// LeaseViolations judges the leases' safety. A lease renewed by a grant
// or a keepalive sent at s and answered with TTL t > 0 cannot expire
// before s + t (its countdown starts no earlier than s), so:
//
//   - a read of its key that answered "not found" before s + t/2, after
//     the put with the lease was acknowledged, is a live lease without
//     its key;
//   - a keepalive or a revoke answered "lease gone" before s + t/2 is a
//     lease that expired early.
//
// The margin of t/2 keeps the judgement clear of the run's scheduling
// noise. Reads and keepalives that failed (Err) are not judged.
func LeaseViolations(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		type event struct {
			at   int64 // when the call was answered
			s, t int64 // a renewal: sent at s, TTL t ns
			read *LeaseRead
			gone string // a "lease gone" answer: what said so
		}
		var evs []event
		if l.TTL > 0 {
			evs = append(evs, event{at: l.GrantCall, s: l.GrantCall, t: l.TTL * 1e9})
		}
		for _, k := range l.KeepAlives {
			switch {
			case k.Err != "":
			case k.TTL > 0:
				evs = append(evs, event{at: k.Return, s: k.Sent, t: k.TTL * 1e9})
			default:
				evs = append(evs, event{at: k.Return, gone: "a keepalive answered TTL 0"})
			}
		}
		for i := range l.Reads {
			if r := &l.Reads[i]; r.Err == "" {
				evs = append(evs, event{at: r.Return, read: r})
			}
		}
		if l.RevokeNotFound {
			evs = append(evs, event{at: l.EndAt, gone: "its revoke found no lease"})
		}
		// Each call of the worker waits for the previous one: ordered by
		// their answers, they are in the order made.
		sort.SliceStable(evs, func(a, b int) bool { return evs[a].at < evs[b].at })
		var best event // the renewal with the latest s + t/2
		for _, e := range evs {
			live := best.t > 0 && e.at < best.s+best.t/2
			switch {
			case e.read != nil:
				if live && l.Put == OK && !e.read.Found {
					out = append(out, fmt.Sprintf("lease %x (worker %d): live lease without its key: %s read absent at %.3fs, its lease renewed at %.3fs for %ds",
						l.ID, l.Worker, l.Key, secs(e.at), secs(best.s), best.t/1e9))
				}
			case e.gone != "":
				if live {
					out = append(out, fmt.Sprintf("lease %x (worker %d): expired early: %s at %.3fs, its lease renewed at %.3fs for %ds",
						l.ID, l.Worker, e.gone, secs(e.at), secs(best.s), best.t/1e9))
				}
			case best.t == 0 || e.s+e.t/2 > best.s+best.t/2:
				best = e
			}
		}
	}
	return out
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// LeaseKeysToVanish lists the keys that must be gone once the leases
// have had time to expire after healing: those of every lease that was
// revoked, abandoned or found gone, whose put was acknowledged or
// refused (a lease found gone at the put deletes the key again). Keys
// whose put's outcome is unknown may stay either way (the put may have
// landed after the lease ended, as a plain put).
func LeaseKeysToVanish(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		if l.Put == Unknown || l.Key == "" {
			continue
		}
		switch l.End {
		case LeaseRevoked, LeaseAbandoned, LeaseGone:
			out = append(out, l.Key)
		}
	}
	sort.Strings(out)
	return out
}
