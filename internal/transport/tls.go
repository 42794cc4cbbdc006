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

// countingCreds is gRPC's TLS credentials for dialing peers, counting
// failed handshakes. (The server side's handshake is the accept loop's,
// mux.go, for gRPC and raft stream connections alike.)
type countingCreds struct {
	credentials.TransportCredentials
	dialFailed *atomic.Uint64
	lastOut    *atomic.Int64
	log        *slog.Logger
}

func newCountingCreds(cfg *tls.Config, st *counters, log *slog.Logger) credentials.TransportCredentials {
	return &countingCreds{TransportCredentials: credentials.NewTLS(cfg),
		dialFailed: &st.tlsDialFailed, lastOut: &st.tlsLogOut, log: log}
}

func (c *countingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, ai, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil && ctx.Err() == nil {
		c.dialFailed.Add(1)
		logTLS(c.lastOut, c.log, "transport: TLS handshake with a peer failed", "peer", authority, "err", err,
			"failed", c.dialFailed.Load())
	}
	return nc, ai, err
}

func (c *countingCreds) Clone() credentials.TransportCredentials {
	cc := *c
	cc.TransportCredentials = c.TransportCredentials.Clone()
	return &cc
}

// logTLS logs at most once per tlsLogEvery (last: unix nanos of the last
// line).
func (c *counters) logTLS(last *atomic.Int64, log *slog.Logger, msg string, args ...any) {
	logTLS(last, log, msg, args...)
}

func logTLS(last *atomic.Int64, log *slog.Logger, msg string, args ...any) {
	now := time.Now().UnixNano()
	prev := last.Load()
	if now-prev < int64(tlsLogEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	log.Warn(msg, args...)
}
