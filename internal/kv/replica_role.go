package kv

import (
	"github.com/cairn-db/cairn/internal/replica"
)

// Read replicas (docs/operations.md, "Read replicas"): a node in role
// read-replica holds a learner replica of every shard. It serves
// serializable and replicas=1/N reads from its own learner, whatever the
// voters' queues (that is what it is for), and sends linearizable reads
// and writes to the shard's leader like any node without a voter (route.go
// never goes through a learner's Raft). The balancer gives it its learners
// (cluster/planner_replica.go); this file only knows the node's role.

// roleReadReplica is the membership record's name of the role.
const roleReadReplica = "read-replica"

// ReadReplica reports whether this node is a read replica, as the
// membership record last said (SetMembers).
func (c *Coordinator) ReadReplica() bool { return c.readReplica.Load() }

// servesLocally reports whether a serializable read of r's shard is
// served by the local replica r whatever the queues: r is this read
// replica's learner.
func (c *Coordinator) servesLocally(r *replica.Replica) bool {
	return c.readReplica.Load() && r.Desc().IsLearner(c.cfg.NodeID)
}

// noteLocalRead counts a read served by the local replica r when r is a
// learner (LearnerReads).
func (c *Coordinator) noteLocalRead(r *replica.Replica) {
	if r.Desc().IsLearner(c.cfg.NodeID) {
		c.learnerReads.Add(1)
	}
}

// LearnerReads counts the reads this node served from its own learner
// replicas (a read replica's serializable reads): the proof that a read
// replica serves them itself.
func (c *Coordinator) LearnerReads() uint64 { return c.learnerReads.Load() }
