package server

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/kv"
)

// A node's role (cluster.Role): --role read-replica makes a joining node
// a read replica; the membership record keeps the role, which the admin
// call POST /v1/admin/nodes/{id}/role?role=R changes later (SetRole). The
// flag is read at the join only: on a restart the record's role stands
// and a flag that disagrees is reported.

// checkRoleFlag validates --role against the way the node starts.
func (c Config) checkRoleFlag() error {
	if _, err := cluster.ParseRole(c.Role); err != nil {
		return fmt.Errorf("server: --role %q: want voter or read-replica", c.Role)
	}
	return nil
}

// errReadReplicaBootstrap: a node with an empty data dir, no --join and
// --role read-replica.
var errReadReplicaBootstrap = fmt.Errorf("server: --role read-replica needs --join: a read replica joins a running cluster, it does not bootstrap one")

// noteRole warns once when --role disagrees with the record's role of
// this node.
func (s *Server) noteRole(rec cluster.Record) {
	if s.cfg.Role == "" {
		return
	}
	me, ok := rec.Member(s.identity.NodeID)
	want, _ := cluster.ParseRole(s.cfg.Role)
	if !ok || me.RoleOf() == want {
		return
	}
	s.roleWarn.Do(func() {
		s.log.Warn("ignoring --role: the membership record says otherwise; change it with `cairn admin node set-role`",
			"flag", want, "record", me.RoleOf())
	})
}

// SetRole changes node id's role. The balancer does the rest: a read
// replica turned voter has its learners removed, then takes voters as any
// new node; a voter turned read replica has its voters moved away and
// gets learners (cluster.Record.SetRole, planner_replica.go).
func (m membership) SetRole(ctx context.Context, id uint64, role cluster.Role) (cluster.Member, error) {
	return m.mgr.SetRole(ctx, id, role)
}

// refuseReadReplica refuses a voter move to a read replica.
func (s *Server) refuseReadReplica(to uint64) error {
	rec, ok := s.members.Cached()
	if !ok {
		return nil
	}
	if m, _ := rec.Member(to); m.ReadReplica() {
		return fmt.Errorf("%w: node %d is a read replica: it holds learners only (set its role to voter first)", kv.ErrInvalidArgument, to)
	}
	return nil
}
