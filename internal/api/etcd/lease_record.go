package etcdapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// Leases are records in Cairn's reserved key space (keys beginning with
// 0x00, which no etcd call lists or writes): leasePrefix + id. A record's
// shard is the lease's owner: its leader decides expiry (lease_expiry.go).
// Every change of a record is a conditional write on its version, so a
// revoke, an expiry, a renewal and an attachment never overwrite each
// other.
var leasePrefix = []byte("\x00etcd-lease/")

// maxLeaseKeys bounds the keys attached to one lease (its record holds
// them).
const maxLeaseKeys = 10000

func leaseKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), leasePrefix...), uint64(id))
}

// leaseRecord is a lease's state.
type leaseRecord struct {
	TTL int64 // seconds
	// Renewals counts keepalives: the owner's leader restarts a lease's
	// countdown when it sees it change. It starts from a random number
	// below 2^62 (LeaseGrant), so a lease revoked and granted again under
	// the same id between two expiry checks is told from the lease before
	// it, whose countdown it must not inherit.
	Renewals uint64
	// RenewedAt is the owner shard's clock as the renewing node's replica
	// had applied it (0: unknown), for TimeToLive's estimate only.
	RenewedAt time.Duration
	Keys      []leaseKeyRef
	// Revoking: an expiry or a revoke has begun deleting the lease's
	// keys. From then on the lease does not exist for a keepalive, an
	// attach or TimeToLive; the record only tells what is left to delete.
	Revoking bool
}

// leaseKeyRef is a key attached to a lease, at the version its put with
// the lease wrote (0 while the put is in flight: expiry then deletes the
// key whatever its version). A key rewritten since is not deleted.
type leaseKeyRef struct {
	Key     []byte
	Version uint64
}

func (r *leaseRecord) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(r.TTL))
	b = binary.AppendUvarint(b, r.Renewals)
	b = binary.AppendUvarint(b, uint64(r.RenewedAt))
	b = binary.AppendUvarint(b, uint64(len(r.Keys)))
	for _, k := range r.Keys {
		b = binary.AppendUvarint(b, uint64(len(k.Key)))
		b = append(b, k.Key...)
		b = binary.AppendUvarint(b, k.Version)
	}
	if r.Revoking {
		// A trailing flag: records written before it decode as not
		// revoking.
		b = binary.AppendUvarint(b, 1)
	}
	return b
}

var errBadLease = errors.New("etcdapi: corrupt lease record")

func decodeLease(b []byte) (leaseRecord, error) {
	var r leaseRecord
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	r.TTL = int64(next())
	r.Renewals = next()
	r.RenewedAt = time.Duration(next())
	n := next()
	if b == nil || n > maxLeaseKeys {
		return r, errBadLease
	}
	for range n {
		l := next()
		if b == nil || uint64(len(b)) < l {
			return r, errBadLease
		}
		k := append([]byte(nil), b[:l]...)
		b = b[l:]
		v := next()
		if b == nil {
			return r, errBadLease
		}
		r.Keys = append(r.Keys, leaseKeyRef{Key: k, Version: v})
	}
	if len(b) > 0 {
		r.Revoking = next() == 1
	}
	return r, nil
}

// readLease reads lease id linearizably; ok is false when it does not
// exist or its revocation has begun.
func (s *Server) readLease(ctx context.Context, id int64) (rec leaseRecord, version uint64, ok bool, err error) {
	rec, version, ok, err = s.readLeaseRecord(ctx, id)
	if ok && rec.Revoking {
		return leaseRecord{}, 0, false, nil
	}
	return rec, version, ok, err
}

// readLeaseRecord is readLease that also answers a record being revoked.
func (s *Server) readLeaseRecord(ctx context.Context, id int64) (rec leaseRecord, version uint64, ok bool, err error) {
	v, err := s.sys.Get(ctx, leaseKey(id), kv.ReadOptions{Consistency: kv.Linearizable})
	ok = err == nil
	if errors.Is(err, kv.ErrNotFound) {
		err = nil
	}
	if err != nil || !ok {
		return leaseRecord{}, 0, false, err
	}
	rec, err = decodeLease(v.Data)
	if err != nil {
		return leaseRecord{}, 0, false, status.Error(codes.Internal, fmt.Sprintf("cairn: lease %d: %v", id, err))
	}
	return rec, v.Version, true, nil
}

// updateLease applies f to lease id's record and writes it on condition
// that nobody wrote it in between, reading again when someone did.
// ErrGRPCLeaseNotFound when the lease does not exist (any more).
func (s *Server) updateLease(ctx context.Context, id int64, f func(*leaseRecord) error) (leaseRecord, error) {
	for range maxCASAttempts {
		rec, ver, ok, err := s.readLease(ctx, id)
		switch {
		case err != nil:
			return rec, grpcError(err)
		case !ok:
			return rec, rpctypes.ErrGRPCLeaseNotFound
		}
		if err := f(&rec); err != nil {
			return rec, err
		}
		_, _, err = s.sys.Put(ctx, leaseKey(id), rec.encode(), kv.WriteOptions{Cond: kv.CondIfMatch, Version: ver})
		if errors.Is(err, kv.ErrPreconditionFailed) {
			continue
		}
		return rec, grpcError(err)
	}
	return leaseRecord{}, contended(leaseKey(id))
}

// attach records key at version (0: a put in flight) under lease id; a
// version below the one the record lists (a later put's) is not recorded.
func (s *Server) attach(ctx context.Context, id int64, key []byte, version uint64) error {
	_, _, err := s.attachPrev(ctx, id, key, version)
	return err
}

// pruneAt is the least number of keys at which a record is pruned of the
// keys no longer attached (then again at every power of two), so a
// long-lived lease that puts and deletes many keys keeps a short record.
const pruneAt = 64

// attachPrev is attach that also tells the version at which the record
// listed key before (listed false: it did not). A record that reaches
// pruneAt keys, a power of two above it, or the limit, is pruned first.
func (s *Server) attachPrev(ctx context.Context, id int64, key []byte, version uint64) (prev uint64, listed bool, err error) {
	prev, listed, n, err := s.attachOnce(ctx, id, key, version)
	if status.Code(err) == codes.ResourceExhausted {
		if s.pruneLease(ctx, id) == nil {
			prev, listed, _, err = s.attachOnce(ctx, id, key, version)
		}
		return prev, listed, err
	}
	if err == nil && n >= pruneAt && n&(n-1) == 0 {
		_ = s.pruneLease(ctx, id) // best effort: the next power of two tries again
	}
	return prev, listed, err
}

func (s *Server) attachOnce(ctx context.Context, id int64, key []byte, version uint64) (prev uint64, listed bool, n int, err error) {
	rec, err := s.updateLease(ctx, id, func(r *leaseRecord) error {
		prev, listed = 0, false
		for i := range r.Keys {
			if string(r.Keys[i].Key) == string(key) {
				prev, listed = r.Keys[i].Version, true
				// A key's versions only grow: a put's version below the
				// one listed is older than a put with the lease that
				// attached the key already, and leaves it.
				if version == 0 || version > prev {
					r.Keys[i].Version = version
				}
				return nil
			}
		}
		if len(r.Keys) >= maxLeaseKeys {
			return status.Errorf(codes.ResourceExhausted, "cairn: lease %d holds %d keys, the most one lease can", id, maxLeaseKeys)
		}
		r.Keys = append(r.Keys, leaseKeyRef{Key: append([]byte(nil), key...), Version: version})
		return nil
	})
	return prev, listed, len(rec.Keys), err
}

// attached reports whether the key a record lists is still attached to
// the lease: a put in flight (version 0), or the key still at the
// version the lease's put wrote. Deleted, or rewritten since (a put with
// the lease would have listed its own version), it is not. The read is
// linearizable: a replica behind could miss the lease's own put.
func (s *Server) attached(ctx context.Context, k leaseKeyRef) (bool, error) {
	if k.Version == 0 {
		return true, nil
	}
	v, err := s.b.Get(ctx, k.Key, kv.ReadOptions{Consistency: kv.Linearizable})
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return v.Version == k.Version, nil
}

// pruneLease drops from lease id's record the keys no longer attached to
// it (etcd detaches a key deleted or put without the lease), on
// condition that each is still listed at the version found detached.
func (s *Server) pruneLease(ctx context.Context, id int64) error {
	rec, _, ok, err := s.readLease(ctx, id)
	if err != nil || !ok {
		return err
	}
	gone := map[string]uint64{}
	for _, k := range rec.Keys {
		on, err := s.attached(ctx, k)
		if err != nil {
			return err
		}
		if !on {
			gone[string(k.Key)] = k.Version
		}
	}
	if len(gone) == 0 {
		return nil
	}
	_, err = s.updateLease(ctx, id, func(r *leaseRecord) error {
		r.Keys = slices.DeleteFunc(r.Keys, func(k leaseKeyRef) bool {
			v, ok := gone[string(k.Key)]
			return ok && v == k.Version
		})
		return nil
	})
	return err
}

// undoInFlight gives lease id's record back what it listed of key
// before a put that did not happen (attachPrev's prev and listed): the
// version prev, or nothing. Only while the record lists key as a put in
// flight (version 0): another put with the lease may have attached the
// key at its own version meanwhile, which must stay.
func (s *Server) undoInFlight(ctx context.Context, id int64, key []byte, prev uint64, listed bool) error {
	_, err := s.updateLease(ctx, id, func(r *leaseRecord) error {
		inFlight := func(k leaseKeyRef) bool { return k.Version == 0 && string(k.Key) == string(key) }
		if !listed {
			r.Keys = slices.DeleteFunc(r.Keys, inFlight)
			return nil
		}
		for i := range r.Keys {
			if inFlight(r.Keys[i]) {
				r.Keys[i].Version = prev
			}
		}
		return nil
	})
	return err
}

// revoke deletes lease id's keys, then its record, on condition that it
// was not renewed since: with renewals >= 0, only while its Renewals is
// still that (an expiry); with -1, whatever it is (a revoke). It reports
// whether it deleted the lease.
//
// The decision is one write: the record is marked revoking, on condition
// that it is unchanged since it was read. A keepalive or an attach after
// that finds no lease, so none can answer a live lease whose keys are
// being deleted. Were the node to stop half-way, the marked record stays
// and the next expiry (or revoke) finishes the job.
func (s *Server) revoke(ctx context.Context, id int64, renewals int64) (bool, error) {
	for range maxCASAttempts {
		rec, ver, ok, err := s.readLeaseRecord(ctx, id)
		if err != nil || !ok {
			return false, err
		}
		if !rec.Revoking {
			if renewals >= 0 && rec.Renewals != uint64(renewals) {
				return false, nil
			}
			rec.Revoking = true
			ver, _, err = s.sys.Put(ctx, leaseKey(id), rec.encode(), kv.WriteOptions{Cond: kv.CondIfMatch, Version: ver})
			if errors.Is(err, kv.ErrPreconditionFailed) {
				continue // renewed or attached meanwhile: decide again
			}
			if err != nil {
				return false, err
			}
		}
		for _, k := range rec.Keys {
			opts := kv.WriteOptions{}
			if k.Version != 0 {
				opts = kv.WriteOptions{Cond: kv.CondIfMatch, Version: k.Version}
			}
			_, err := s.b.Delete(ctx, k.Key, opts)
			if err != nil && !errors.Is(err, kv.ErrNotFound) && !errors.Is(err, kv.ErrPreconditionFailed) {
				return false, err
			}
		}
		_, err = s.sys.Delete(ctx, leaseKey(id), kv.WriteOptions{Cond: kv.CondIfMatch, Version: ver})
		switch {
		case errors.Is(err, kv.ErrPreconditionFailed):
			continue // another revoke of the same lease finished it first
		case errors.Is(err, kv.ErrNotFound):
			return false, nil
		}
		return err == nil, err
	}
	return false, contended(leaseKey(id))
}
