package replicatest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing/synctest"

	"github.com/cairn-db/cairn/internal/replica"
	"go.etcd.io/raft/v3/raftpb"
)

// Membership commands (see doc.go): add-node creates the empty learner
// replica a move starts with (as the store does on the destination
// before the leader adds it), conf-change proposes a ConfChangeV2 at a
// node, desc prints every node's descriptor.

// AddNode creates node id holding an empty replica of the shard, listed
// as a learner in the descriptor it starts with.
func (e *Env) AddNode(id uint64) error {
	if id == 0 || e.nodes[id] != nil {
		return fmt.Errorf("%w: node %d exists", ErrBadCommand, id)
	}
	if len(e.nodes) == 0 {
		return fmt.Errorf("%w: add-nodes first", ErrBadCommand)
	}
	e.desc.Learners = append(e.desc.Learners, id)
	nd := &Node{ID: id, env: e}
	nd.fs = nil
	if err := nd.create(); err != nil {
		return err
	}
	e.nodes[id] = nd
	e.ids = append(e.ids, id)
	slices.Sort(e.ids)
	nd.printStatus()
	return nil
}

// create opens a new node's engine and creates its empty replica.
func (nd *Node) create() error {
	if err := nd.openEngine(); err != nil {
		return err
	}
	r, err := replica.Create(nd.env.replicaConfig(nd))
	if err != nil {
		nd.Engine.Close()
		return fmt.Errorf("replicatest: create node %d: %w", nd.ID, err)
	}
	nd.Replica = r
	return nil
}

// ConfChange proposes cc at node id and runs that node's round, which
// hands it to raft.
func (e *Env) ConfChange(id uint64, cc raftpb.ConfChangeV2) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- nd.Replica.ProposeConfChange(context.Background(), cc, 0) }()
	synctest.Wait()
	if _, err := e.ProcessReady(id); err != nil {
		return err
	}
	synctest.Wait()
	select {
	case err := <-done:
		if err != nil {
			e.printf("conf change refused: %v", err)
		}
	default:
		e.printf("conf change pending")
	}
	return nil
}

// parseConfChange reads add=, add-learner=, remove= (each a node id,
// repeatable as a comma list), joint or joint=explicit, and leave.
func parseConfChange(a cmdArgs) (raftpb.ConfChangeV2, error) {
	var cc raftpb.ConfChangeV2
	var err error
	for _, c := range []struct {
		key string
		typ raftpb.ConfChangeType
	}{{"add", raftpb.ConfChangeAddNode}, {"add-learner", raftpb.ConfChangeAddLearnerNode}, {"remove", raftpb.ConfChangeRemoveNode}} {
		v, ok := a.get(c.key)
		if !ok {
			continue
		}
		for _, s := range strings.Split(v, ",") {
			var id uint64
			if _, e := fmt.Sscan(s, &id); e != nil && err == nil {
				err = fmt.Errorf("%w: %s=%q", ErrBadCommand, c.key, v)
			}
			cc.Changes = append(cc.Changes, raftpb.ConfChangeSingle{Type: c.typ, NodeID: id})
		}
	}
	switch v, ok := a.get("joint"); {
	case ok && v == "explicit":
		cc.Transition = raftpb.ConfChangeTransitionJointExplicit
	case ok:
		cc.Transition = raftpb.ConfChangeTransitionJointImplicit
	}
	if a.has("leave") != (len(cc.Changes) == 0) && err == nil {
		err = fmt.Errorf("%w: conf-change needs changes or leave (not both)", ErrBadCommand)
	}
	return cc, err
}

// descLine describes node nd's descriptor.
func (nd *Node) descLine() string {
	d := nd.Replica.Desc()
	s := fmt.Sprintf("n%d: epoch=%d voters=%v", nd.ID, d.Epoch, d.Replicas)
	if len(d.Learners) > 0 {
		s += fmt.Sprintf(" learners=%v", d.Learners)
	}
	cfg := nd.Replica.Status().Config
	if len(cfg.Voters[1]) > 0 {
		s += " joint"
		if cfg.AutoLeave {
			s += " auto-leave"
		}
	}
	if nd.Replica.Removed() {
		s += " removed"
	}
	return s
}
