package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	etcdapi "github.com/cairn-db/cairn/internal/api/etcd"
)

// startEtcd starts the etcd v3 API on cfg.EtcdAddr, if set.
func (s *Server) startEtcd(id identity) error {
	if s.cfg.EtcdAddr == "" {
		return nil
	}
	tlsCfg, err := s.cfg.clientTLS() // the client port's TLS, if any
	if err != nil {
		return err
	}
	ecfg := etcdapi.Config{
		ClusterID: clusterID(id.Peers), MemberID: id.NodeID,
		MaxKeySize: s.cfg.MaxKeySize, MaxValueSize: s.cfg.MaxValueSize,
		RequestTimeout: s.cfg.RequestTimeout, Logger: s.log, TLS: tlsCfg,
		// The HTTP port's bounds: connections served at once
		// (--max-conns, counted per port) and streams per connection.
		MaxConns: s.cfg.MaxConns, MaxStreams: h2Streams,
	}
	if s.authn != nil { // --auth: the HTTP API's tokens and counters
		ecfg.Auth, ecfg.AuthCounters = s.authn, &s.authCounters
	}
	srv, err := etcdapi.New(s.coord, ecfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.EtcdAddr)
	if err != nil && s.cfg.EtcdAddrOptional {
		s.log.Warn("etcd API off: its default address is not free (set --etcd-addr)", "addr", s.cfg.EtcdAddr, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: listen %s (etcd API): %w", s.cfg.EtcdAddr, err)
	}
	s.etcd, s.etcdLis = srv, lis
	return nil
}

// serveEtcd serves the etcd API in the background (after startEtcd).
func (s *Server) serveEtcd() {
	if s.etcd == nil {
		return
	}
	go func() {
		if err := s.etcd.Serve(s.etcdLis); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("etcd API server", "err", err)
		}
	}()
}

// stopEtcd ends the etcd API's calls, waiting at most grace.
func (s *Server) stopEtcd(grace time.Duration) {
	if s.etcd != nil {
		s.etcd.Stop(grace)
	} else if s.etcdLis != nil {
		s.etcdLis.Close()
	}
}

// EtcdAddr is the address the etcd API listens on ("" when off).
func (s *Server) EtcdAddr() string {
	if s.etcdLis == nil {
		return ""
	}
	return s.etcdLis.Addr().String()
}

// clusterID names the cluster in etcd response headers: a hash of its
// bootstrap members, the same on every node.
func clusterID(peers map[uint64]string) uint64 {
	ids := make([]uint64, 0, len(peers))
	for n := range peers {
		ids = append(ids, n)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var h xxhash.Digest
	h.Reset()
	for _, n := range ids {
		_, _ = h.Write(binary.BigEndian.AppendUint64(nil, n))
		_, _ = h.WriteString(peers[n])
	}
	return max(h.Sum64(), 1)
}
