package checker

import (
	"reflect"
	"strings"
	"testing"
)

const sec = int64(1e9)

// kept is a lease granted at 1 s with TTL 2, its key put, renewed at 2 s
// and 2.4 s (each answered TTL 2), each renewal followed by a read that
// found the key, then revoked at 3 s.
func kept() Lease {
	return Lease{Worker: 1, ID: 0x10, Key: "lease/1/0", GrantCall: 1 * sec, TTL: 2, Put: OK,
		KeepAlives: []LeaseKeepAlive{{Sent: 2 * sec, Return: 2*sec + 5e6, TTL: 2}, {Sent: 24e8, Return: 24e8 + 5e6, TTL: 2}},
		Reads:      []LeaseRead{{Call: 2*sec + 6e6, Return: 2*sec + 9e6, Found: true}, {Call: 24e8 + 6e6, Return: 24e8 + 9e6, Found: true}},
		End:        LeaseRevoked, EndAt: 3 * sec, LastRenewal: 24e8}
}

func TestLeaseViolationsNone(t *testing.T) {
	abandoned := Lease{Worker: 2, ID: 0x11, Key: "lease/2/0", GrantCall: 1 * sec, TTL: 3, Put: OK, End: LeaseAbandoned, EndAt: 11e8, LastRenewal: 1 * sec}
	// Renewals that failed, then a keepalive answering 0 long after the
	// last renewal: the lease expired in time.
	lost := kept()
	lost.KeepAlives = append(lost.KeepAlives, LeaseKeepAlive{Sent: 25e8, Return: 75e8, Err: "deadline exceeded"},
		LeaseKeepAlive{Sent: 8 * sec, Return: 81e8, TTL: 0})
	lost.Reads = append(lost.Reads, LeaseRead{Call: 76e8, Return: 77e8, Err: "no leader"})
	lost.End, lost.EndAt = LeaseGone, 81e8
	// A read long after the last renewal may find the key gone.
	late := kept()
	late.Reads = append(late.Reads, LeaseRead{Call: 6 * sec, Return: 61e8})
	late.End = LeaseAbandoned
	if v := LeaseViolations([]Lease{kept(), abandoned, lost, late}); len(v) != 0 {
		t.Fatalf("violations in a correct history: %v", v)
	}
}

func TestLeaseViolationsKeyGone(t *testing.T) {
	l := kept()
	l.Reads[1].Found = false // 0.4 s after a keepalive answered TTL 2
	v := LeaseViolations([]Lease{l})
	if len(v) != 1 || !strings.Contains(v[0], "live lease without its key") || !strings.Contains(v[0], "lease/1/0") {
		t.Fatalf("violations: %v", v)
	}
	// A put of unknown outcome may never have written the key: a read
	// finding none proves nothing.
	l.Put = Unknown
	if v := LeaseViolations([]Lease{l}); len(v) != 0 {
		t.Fatalf("a put of unknown outcome judged: %v", v)
	}
	// Nor does a read that failed.
	l = kept()
	l.Reads[1] = LeaseRead{Call: 24e8 + 6e6, Return: 24e8 + 9e6, Err: "timeout"}
	if v := LeaseViolations([]Lease{l}); len(v) != 0 {
		t.Fatalf("a failed read judged: %v", v)
	}
}

func TestLeaseViolationsExpiredEarly(t *testing.T) {
	l := kept()
	l.KeepAlives = append(l.KeepAlives, LeaseKeepAlive{Sent: 25e8, Return: 26e8, TTL: 0}) // 0.2 s after TTL 2
	l.End, l.EndAt = LeaseGone, 26e8
	if v := LeaseViolations([]Lease{l}); len(v) != 1 || !strings.Contains(v[0], "expired early: a keepalive") {
		t.Fatalf("violations: %v", v)
	}
	l = kept()
	l.End, l.RevokeNotFound = LeaseGone, true // revoke at 3 s, renewed at 2.4 s for 2 s
	if v := LeaseViolations([]Lease{l}); len(v) != 1 || !strings.Contains(v[0], "its revoke found no lease") {
		t.Fatalf("violations: %v", v)
	}
	l.EndAt = 5 * sec // long enough after: it may have expired
	if v := LeaseViolations([]Lease{l}); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

func TestLeaseKeysToVanish(t *testing.T) {
	ls := []Lease{
		{Key: "a", Put: OK, End: LeaseRevoked},
		{Key: "b", Put: OK, End: LeaseAbandoned},
		{Key: "c", Put: Unknown, End: LeaseAbandoned}, // allowed either way
		{Key: "d", Put: Fail, End: LeaseGone},
		{Key: "e", Put: OK, End: ""}, // never ended: not judged
	}
	if got, want := LeaseKeysToVanish(ls), []string{"a", "b", "d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("keys to vanish %v, want %v", got, want)
	}
}
