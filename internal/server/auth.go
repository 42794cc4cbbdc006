package server

import (
	"context"
	"net/http"
	"path/filepath"
	"time"

	"github.com/cairn-db/cairn/internal/api/auth"
	httpapi "github.com/cairn-db/cairn/internal/api/http"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/prometheus/client_golang/prometheus"
)

// Authentication (Config.Auth, internal/api/auth): bearer tokens with
// roles, stored hashed under reserved system keys through the
// coordinator. The node with the lowest id of the cluster makes the
// first admin token when the cluster has none and writes it to
// DataDir/AdminTokenFile (admin_token.go); the log names the file, never
// the token.

// AdminTokenFile, in the data dir of the node that bootstrapped auth,
// holds the first admin token (mode 0600).
const AdminTokenFile = "admin-token"

// withAuth puts api behind token checks when Config.Auth is on.
func (s *Server) withAuth(api http.Handler, reg *prometheus.Registry) http.Handler {
	if !s.cfg.Auth {
		return api
	}
	s.authn = auth.New(kv.ValueStore{C: s.coord})
	for _, m := range []struct {
		reason string
		n      func() uint64
	}{
		{"unauthenticated", s.authCounters.Unauthenticated.Load},
		{"forbidden", s.authCounters.Forbidden.Load},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_auth_failures_total", Help: "Requests refused by authentication (401) or authorization (403).",
			ConstLabels: prometheus.Labels{"reason": m.reason},
		}, func() float64 { return float64(m.n()) }))
	}
	// A repeated Authorization (or a token route's repeated role) is
	// refused before any token is looked at, as the API refuses it.
	return httpapi.RefuseRepeated(s.authn.Middleware(api, &s.authCounters, s.log))
}

// startAuth logs the node's authentication mode and, on the node of
// lowest id, makes the first admin token in the background.
func (s *Server) startAuth(peers map[uint64]string) {
	if !s.cfg.Auth {
		s.log.Warn("authentication is off (--auth not given): anyone who reaches the client port can read and write every key and use the admin endpoints")
		return
	}
	lowest := s.cfg.NodeID
	for id := range peers {
		lowest = min(lowest, id)
	}
	s.log.Info("authentication is on: data and admin requests need a bearer token")
	if s.cfg.PeerTLS.IsZero() {
		// Tokens guard the client port only: the peer port serves
		// forwarded requests without asking who sends them.
		s.log.Warn("authentication is on but the peer port is plain (no --peer-tls-*): anyone who reaches the peer port can read and write any key, the token records included; use peer TLS or keep the peer port on a network only the nodes reach")
	}
	if lowest != s.cfg.NodeID {
		return
	}
	s.authDone = make(chan struct{})
	go func() {
		defer close(s.authDone)
		warned := false
		for {
			if err := s.bootstrapToken(&warned); err == nil {
				return
			}
			select {
			case <-s.stopping.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// bootstrapToken makes the first admin token unless the cluster has one,
// into its file (admin_token.go). An error: try again. A data dir that
// takes no file is logged once (*warned).
func (s *Server) bootstrapToken(warned *bool) error {
	candidate, err := pendingAdminToken(s.cfg.DataDir)
	if err != nil {
		if !*warned {
			s.log.Warn("auth: cannot create the admin token file; the first admin token waits for it", "err", err)
			*warned = true
		}
		return err
	}
	ctx, cancel := context.WithTimeout(s.stopping, 10*time.Second)
	tok, err := s.authn.BootstrapWith(ctx, candidate)
	cancel()
	if err != nil {
		return err // the candidate stays for the retry, or the next start
	}
	if tok == "" {
		dropAdminToken(s.cfg.DataDir)
		return nil
	}
	file := filepath.Join(s.cfg.DataDir, AdminTokenFile)
	if tok != candidate { // drawn by an attempt before the file was read
		err = writeSynced(file+pendingSuffix, tok+"\n")
	}
	if err == nil {
		err = keepAdminToken(s.cfg.DataDir)
	}
	if err != nil {
		// Made, and in the pending file still: it is not logged.
		s.log.Error("auth: first admin token created but not moved to its file; it is in the pending file beside it, and it is not logged",
			"file", file+pendingSuffix, "err", err)
		return nil
	}
	s.log.Warn("auth: first admin token created and written to its file (mode 0600; read it there and keep it secret; it is not logged)",
		"file", file)
	return nil
}
