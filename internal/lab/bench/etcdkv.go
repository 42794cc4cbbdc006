package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdKV is a register client over etcd's Go client (clientv3): the
// chaos lab's etcd client mode uses it (chaos.EtcdKV), since only this
// package talks through an etcd client. One gRPC connection, spread over
// the endpoints by clientv3's balancer.
type EtcdKV struct{ cl *clientv3.Client }

// DialEtcdKV connects to endpoints (host:port), over TLS with tlsCfg when
// it is not nil. The connection is made lazily: an endpoint that is down
// fails the calls, not the dial.
func DialEtcdKV(endpoints []string, tlsCfg *tls.Config) (*EtcdKV, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg,
		Logger: zap.NewNop()}) // its retry warnings would drown the lab's progress lines
	if err != nil {
		return nil, fmt.Errorf("bench: etcd client: %w", err)
	}
	return &EtcdKV{cl: cl}, nil
}

// Get reads key with a default (linearizable) Range.
func (e *EtcdKV) Get(ctx context.Context, key []byte) ([]byte, uint64, bool, error) {
	resp, err := e.cl.Get(ctx, string(key))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, false, err
	}
	kv := resp.Kvs[0]
	return kv.Value, uint64(kv.ModRevision), true, nil
}

// Put writes key; the answer's header revision is the write's.
func (e *EtcdKV) Put(ctx context.Context, key, value []byte) (uint64, error) {
	resp, err := e.cl.Put(ctx, string(key), string(value))
	if err != nil {
		return 0, err
	}
	return uint64(resp.Header.Revision), nil
}

// CompareAndSwap runs Txn(If(value(key) = expected), Then(put key value)).
func (e *EtcdKV) CompareAndSwap(ctx context.Context, key, expected, value []byte) (uint64, bool, error) {
	k := string(key)
	resp, err := e.cl.Txn(ctx).If(clientv3.Compare(clientv3.Value(k), "=", string(expected))).
		Then(clientv3.OpPut(k, string(value))).Commit()
	if err != nil || !resp.Succeeded {
		return 0, false, err
	}
	if len(resp.Responses) != 1 || resp.Responses[0].GetResponsePut() == nil {
		return 0, false, fmt.Errorf("bench: a Txn of one put answered %d responses", len(resp.Responses))
	}
	return uint64(resp.Responses[0].GetResponsePut().Header.Revision), true, nil
}

// Grant grants a lease of ttl seconds and returns its id and the TTL the
// server granted.
func (e *EtcdKV) Grant(ctx context.Context, ttl int64) (int64, int64, error) {
	resp, err := e.cl.Grant(ctx, ttl)
	if err != nil {
		return 0, 0, err
	}
	return int64(resp.ID), resp.TTL, nil
}

// KeepAliveOnce renews lease id once and returns the TTL the server
// answered: 0 when the lease does not exist (LeaseNotFound).
func (e *EtcdKV) KeepAliveOnce(ctx context.Context, id int64) (int64, error) {
	resp, err := e.cl.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return resp.TTL, nil
}

// Revoke revokes lease id; found is false when it did not exist.
func (e *EtcdKV) Revoke(ctx context.Context, id int64) (bool, error) {
	_, err := e.cl.Revoke(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PutWithLease writes key attached to lease id and returns the write's
// revision; found is false when the lease did not exist (the put is
// refused, and leaves no key).
func (e *EtcdKV) PutWithLease(ctx context.Context, key, value []byte, id int64) (uint64, bool, error) {
	resp, err := e.cl.Put(ctx, string(key), string(value), clientv3.WithLease(clientv3.LeaseID(id)))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint64(resp.Header.Revision), true, nil
}

// Close closes the connection.
func (e *EtcdKV) Close() error { return e.cl.Close() }
