package etcdapi

import (
	"context"
	"fmt"
	"net"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// apiVersion is the etcd API version Cairn reports in Status: the one of
// the etcd API module it serves.
const apiVersion = "3.6.0"

type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Server
}

// MemberList lists Cairn's members. A member's client URL is its HTTP
// address with the port moved by EtcdPortOffset (the default --etcd-addr).
func (c *clusterServer) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	s := c.s
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	ci := s.b.Cluster(ctx)
	resp := &pb.MemberListResponse{Header: s.header(0)}
	for _, m := range ci.Members {
		pm := &pb.Member{ID: m.NodeID, Name: fmt.Sprintf("cairn-%d", m.NodeID), PeerURLs: []string{"http://" + m.PeerAddr}}
		if u := s.clientURL(m.HTTPAddr); u != "" {
			pm.ClientURLs = []string{u}
		}
		resp.Members = append(resp.Members, pm)
	}
	return resp, nil
}

// clientURL is the etcd client URL of a member at HTTP address httpAddr.
func (s *Server) clientURL(httpAddr string) string {
	host, port, err := net.SplitHostPort(httpAddr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		return ""
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p+s.cfg.EtcdPortOffset))
}

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

// Status reports this member: the leader, term and applied index are
// those of shard 1 as this node sees it (Cairn has one Raft group per
// shard, not one per cluster).
func (m *maintenanceServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	s := m.s
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	ci := s.b.Cluster(ctx)
	resp := &pb.StatusResponse{Header: s.header(0), Version: apiVersion, StorageVersion: apiVersion}
	for _, sh := range ci.Shards {
		if sh.ID != 1 {
			continue
		}
		resp.Leader, resp.RaftTerm, resp.RaftIndex, resp.RaftAppliedIndex = sh.Leader, sh.Term, max(sh.Commit, sh.Applied), sh.Applied
		resp.Header.RaftTerm = sh.Term
	}
	if resp.Leader == 0 {
		resp.Errors = append(resp.Errors, "shard 1 has no known leader")
	}
	return resp, nil
}

// Alarm lists no alarms: Cairn raises none through this API.
func (m *maintenanceServer) Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return &pb.AlarmResponse{Header: m.s.header(0)}, nil
}
