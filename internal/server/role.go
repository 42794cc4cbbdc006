package server

import (
	"context"
	"fmt"
	"time"

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

// learnerRemoval bounds the removal of a former read replica's learners.
const learnerRemoval = 10 * time.Minute

// SetRole changes node id's role. A read replica turned voter has its
// learners removed here, in the background (the balancer then places
// voters on it as on any new node); a voter turned read replica has its
// voters moved away and gets learners from the balancer.
func (m membership) SetRole(ctx context.Context, id uint64, role cluster.Role) (cluster.Member, error) {
	mem, err := m.mgr.SetRole(ctx, id, role)
	if err != nil || mem.ReadReplica() || m.s == nil {
		return mem, err
	}
	s := m.s
	s.goBG(func() {
		ctx, cancel := context.WithTimeout(s.bgCtx, learnerRemoval)
		defer cancel()
		for _, d := range s.store.Descriptors() {
			// Looked at again right before: a learner promoted meanwhile
			// (a move to the node) is a voter to keep.
			if now, ok := s.store.Descriptor(d.ID); !ok || !now.IsLearner(id) {
				continue
			}
			if err := s.store.RemoveReplica(ctx, d.ID, id); err != nil {
				s.log.Warn("set-role voter: removing a learner", "node", id, "shard", d.ID, "err", err)
			}
		}
	})
	return mem, nil
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
