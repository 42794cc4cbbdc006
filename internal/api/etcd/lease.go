package etcdapi

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// Lease TTL bounds in seconds: a shorter TTL is raised to minLeaseTTL (as
// etcd raises one below its election timeout), a longer one refused.
const (
	minLeaseTTL = 2
	maxLeaseTTL = 9_000_000_000
)

type leaseServer struct {
	pb.UnimplementedLeaseServer
	s *Server
}

// ownerClock is the clock of the shard owning lease id's record as this
// node's replica has applied it (0: no replica here).
func (s *Server) ownerClock(id int64) time.Duration {
	sh := s.sys.WatchShards(leaseKey(id), nil)
	if c, ok := s.sys.ShardClock(sh[0]); ok {
		return c
	}
	return 0
}

func (l *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	s := l.s
	switch {
	case r.TTL > maxLeaseTTL:
		return nil, rpctypes.ErrGRPCLeaseTTLTooLarge
	case r.ID < 0:
		return nil, status.Error(codes.InvalidArgument, "cairn: negative lease id")
	}
	ttl := max(r.TTL, minLeaseTTL)
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	for range maxCASAttempts {
		id := r.ID
		if id == 0 {
			id = rand.Int64N(1<<62) + 1
		}
		rec := leaseRecord{TTL: ttl, Renewals: rand.Uint64N(1 << 62), RenewedAt: s.ownerClock(id)}
		_, _, err := s.sys.Put(ctx, leaseKey(id), rec.encode(), kv.WriteOptions{Cond: kv.CondIfAbsent})
		switch {
		case errors.Is(err, kv.ErrPreconditionFailed) && r.ID != 0:
			return nil, rpctypes.ErrGRPCLeaseExist
		case errors.Is(err, kv.ErrPreconditionFailed):
			continue // a random id in use: draw another
		case err != nil:
			return nil, grpcError(err)
		}
		return &pb.LeaseGrantResponse{Header: s.header(0), ID: id, TTL: ttl}, nil
	}
	return nil, status.Error(codes.Aborted, "cairn: no free lease id found")
}

func (l *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	s := l.s
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	ok, err := s.revoke(ctx, r.ID, -1)
	switch {
	case err != nil:
		return nil, grpcError(err)
	case !ok:
		return nil, rpctypes.ErrGRPCLeaseNotFound
	}
	return &pb.LeaseRevokeResponse{Header: s.header(0)}, nil
}

// renew restarts lease id's countdown: a write of its record, which the
// owner's leader sees. It answers the lease's TTL, or 0 when the lease
// does not exist (etcd's answer, which ends clientv3's keepalive).
func (s *Server) renew(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	clock := s.ownerClock(id)
	rec, err := s.updateLease(ctx, id, func(r *leaseRecord) error {
		r.Renewals++
		r.RenewedAt = clock
		return nil
	})
	if errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		return 0, nil
	}
	return rec.TTL, err
}

// LeaseKeepAlive renews the lease of each request on the stream. The
// requests are read by a goroutine of their own, so that the stream ends
// when its context does even while the client sends nothing (a check of
// the stream's token refused it: auth_stream.go). That reader is not
// waited for: Recv returns once the handler has returned (gRPC then
// ends the stream), and the reader with it, as Watch's.
func (l *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	s := l.s
	ctx := stream.Context()
	type recv struct {
		r   *pb.LeaseKeepAliveRequest
		err error
	}
	reqs := make(chan recv)
	go func() {
		for {
			r, err := stream.Recv()
			select {
			case reqs <- recv{r, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var in recv
		select {
		case in = <-reqs:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		r, err := in.r, in.err
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ttl, err := s.renew(ctx, r.ID)
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: s.header(0), ID: r.ID, TTL: ttl}); err != nil {
			return err
		}
	}
}

func (l *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	s := l.s
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	rec, _, ok, err := s.readLease(ctx, r.ID)
	switch {
	case err != nil:
		return nil, grpcError(err)
	case !ok:
		return &pb.LeaseTimeToLiveResponse{Header: s.header(0), ID: r.ID, TTL: -1}, nil
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: s.header(0), ID: r.ID, GrantedTTL: rec.TTL, TTL: rec.TTL}
	// An estimate: the owner shard's clock here against the one the last
	// renewal read. Expiry itself is the owner leader's decision.
	if now := s.ownerClock(r.ID); now > 0 && rec.RenewedAt > 0 && now > rec.RenewedAt {
		left := time.Duration(rec.TTL)*time.Second - (now - rec.RenewedAt)
		resp.TTL = max(int64((left+time.Second-1)/time.Second), 0)
	}
	if r.Keys {
		// The keys still attached: one deleted or put without the lease
		// since is not (etcd detaches it).
		for _, k := range rec.Keys {
			on, err := s.attached(ctx, k)
			if err != nil {
				return nil, grpcError(err)
			}
			if on {
				resp.Keys = append(resp.Keys, k.Key)
			}
		}
	}
	return resp, nil
}

func (l *leaseServer) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	s := l.s
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	resp := &pb.LeaseLeasesResponse{Header: s.header(0)}
	err := s.eachLease(ctx, kv.Linearizable, func(id int64, e kv.Entry) {
		if rec, err := decodeLease(e.Value); err == nil && rec.Revoking {
			return // being revoked: gone for clients
		}
		resp.Leases = append(resp.Leases, &pb.LeaseStatus{ID: id})
	})
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

// eachLease calls fn for every lease record, in id order.
func (s *Server) eachLease(ctx context.Context, cons kv.Consistency, fn func(id int64, e kv.Entry)) error {
	opts := kv.ListOptions{Prefix: leasePrefix, Limit: kv.MaxListLimit, Consistency: cons}
	for {
		page, err := s.sys.List(ctx, opts)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if len(e.Key) == len(leasePrefix)+8 {
				fn(int64(binary.BigEndian.Uint64(e.Key[len(leasePrefix):])), e)
			}
		}
		if !page.More {
			return nil
		}
		opts.After = page.Last
	}
}
