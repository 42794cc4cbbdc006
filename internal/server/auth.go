package server

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/prometheus/client_golang/prometheus"
)

// Authentication (Config.Auth, internal/api/auth): bearer tokens with
// roles, stored hashed under reserved system keys through the
// coordinator. The node with the lowest id of the cluster makes the
// first admin token when the cluster has none, writes it to
// DataDir/AdminTokenFile and logs it once.

// AdminTokenFile, in the data dir of the node that bootstrapped auth,
// holds the first admin token (mode 0600).
const AdminTokenFile = "admin-token"

// coordStore is auth.Store over the coordinator: linearizable reads and
// ordinary replicated writes.
type coordStore struct{ c *kv.Coordinator }

func (s coordStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, err := s.c.Get(ctx, key, kv.ReadOptions{})
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v.Data, true, nil
}

func (s coordStore) Put(ctx context.Context, key, value []byte) error {
	_, _, err := s.c.Put(ctx, key, value, kv.WriteOptions{})
	return err
}

// withAuth puts api behind token checks when Config.Auth is on.
func (s *Server) withAuth(api http.Handler, reg *prometheus.Registry) http.Handler {
	if !s.cfg.Auth {
		return api
	}
	s.authn = auth.New(coordStore{s.coord})
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
	return s.authn.Middleware(api, &s.authCounters, s.log)
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
	if lowest != s.cfg.NodeID {
		return
	}
	s.authDone = make(chan struct{})
	go func() {
		defer close(s.authDone)
		for {
			ctx, cancel := context.WithTimeout(s.stopping, 10*time.Second)
			tok, err := s.authn.Bootstrap(ctx)
			cancel()
			if err == nil {
				if tok != "" {
					file := filepath.Join(s.cfg.DataDir, AdminTokenFile)
					if werr := os.WriteFile(file, []byte(tok+"\n"), 0o600); werr != nil {
						s.log.Warn("auth: writing the admin token file", "err", werr)
					}
					s.log.Warn("auth: first admin token created; it is shown once (also in the file) — keep it secret",
						"token", tok, "file", file)
				}
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
