package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// Mutual TLS between nodes (Config.ServerTLS and Config.ClientTLS, built
// by internal/security.PeerTLS): the peer server requires a client
// certificate and each sender verifies the server's, both against the
// cluster CA. Raft messages, forwarded requests and snapshots all go over
// these connections, so a node whose certificate the CA did not sign
// can neither send nor receive any of them. Failed handshakes are counted
// (Stats.TLSRefused, Stats.TLSDialFailed) and logged at most once per
// tlsLogEvery each way.

// tlsLogEvery is the least time between two logged handshake failures of
// one direction.
const tlsLogEvery = 10 * time.Second

// countingCreds is gRPC's TLS credentials, counting failed handshakes.
type countingCreds struct {
	credentials.TransportCredentials
	refused, dialFailed *atomic.Uint64
	lastIn, lastOut     *atomic.Int64
	log                 *slog.Logger
}

func newCountingCreds(cfg *tls.Config, st *counters, log *slog.Logger) credentials.TransportCredentials {
	return &countingCreds{TransportCredentials: credentials.NewTLS(cfg),
		refused: &st.tlsRefused, dialFailed: &st.tlsDialFailed,
		lastIn: &st.tlsLogIn, lastOut: &st.tlsLogOut, log: log}
}

func (c *countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, ai, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.refused.Add(1)
		c.logf(c.lastIn, "transport: refused a peer connection: TLS handshake failed", "remote", conn.RemoteAddr().String(), "err", err,
			"refused", c.refused.Load())
	}
	return nc, ai, err
}

func (c *countingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, ai, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil && ctx.Err() == nil {
		c.dialFailed.Add(1)
		c.logf(c.lastOut, "transport: TLS handshake with a peer failed", "peer", authority, "err", err,
			"failed", c.dialFailed.Load())
	}
	return nc, ai, err
}

func (c *countingCreds) Clone() credentials.TransportCredentials {
	cc := *c
	cc.TransportCredentials = c.TransportCredentials.Clone()
	return &cc
}

// logf logs at most once per tlsLogEvery (last: unix nanos of the last
// line).
func (c *countingCreds) logf(last *atomic.Int64, msg string, args ...any) {
	now := time.Now().UnixNano()
	prev := last.Load()
	if now-prev < int64(tlsLogEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	c.log.Warn(msg, args...)
}
