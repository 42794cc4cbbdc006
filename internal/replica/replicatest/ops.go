package replicatest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/wire"
)

// Op is a proposal or a read issued to a replica. Its caller blocks in a
// goroutine of the bubble, as a client request would; the harness reports
// its outcome once the replica resolves it.
type Op struct {
	ID   int
	Node uint64
	Desc string

	key string
	// minVersion: for a read, the highest version of its key
	// acknowledged before the read began (a linearizable read sees it).
	minVersion uint64
	read       bool

	mu       sync.Mutex
	done     bool
	reported bool
	err      error
	res      replica.Result
	index    uint64 // read: the read index
	version  uint64 // read: the version it saw (0: absent)
	value    string
}

// Done reports whether the operation has an outcome.
func (op *Op) Done() bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.done
}

func (op *Op) finish(f func()) {
	op.mu.Lock()
	defer op.mu.Unlock()
	f()
	op.done = true
}

// Propose issues cmd at node and returns the pending operation.
func (e *Env) Propose(node uint64, cmd wire.Command) (*Op, error) {
	nd, err := e.node(node)
	if err != nil {
		return nil, err
	}
	op := &Op{ID: len(e.ops) + 1, Node: node, key: string(cmd.Key)}
	if len(cmd.RequestID) == 0 {
		cmd.RequestID = fmt.Appendf(nil, "op%d", op.ID)
	}
	switch cmd.Op {
	case wire.OpDelete:
		op.Desc = fmt.Sprintf("delete n%d %s id=%s", node, cmd.Key, cmd.RequestID)
	default:
		op.Desc = fmt.Sprintf("put n%d %s=%s id=%s", node, cmd.Key, cmd.Value, cmd.RequestID)
	}
	e.ops = append(e.ops, op)
	r := nd.Replica
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		res, err := r.Propose(ctx, &cmd)
		op.finish(func() { op.res, op.err = res, err })
	}()
	e.printf("op %d: %s", op.ID, op.Desc)
	e.indent = "  "
	e.settle() // the proposal is in the replica's inbox, or refused
	e.indent = ""
	return op, nil
}

// Read issues a linearizable read of key at node (ReadIndex, then a read
// of the node's engine once it has applied up to the read index).
func (e *Env) Read(node uint64, key string, forward bool) (*Op, error) {
	nd, err := e.node(node)
	if err != nil {
		return nil, err
	}
	op := &Op{ID: len(e.ops) + 1, Node: node, key: key, read: true, minVersion: e.acked[key]}
	op.Desc = fmt.Sprintf("read n%d %s", node, key)
	if forward {
		op.Desc += " forward"
	}
	e.ops = append(e.ops, op)
	r := nd.Replica
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		var idx uint64
		var err error
		if forward {
			idx, err = r.ReadIndexForward(ctx)
		} else {
			idx, err = r.ReadIndex(ctx)
		}
		var ver uint64
		var val string
		if err == nil {
			ver, val, _, err = nd.get(key)
		}
		op.finish(func() { op.index, op.err, op.version, op.value = idx, err, ver, val })
	}()
	e.printf("op %d: %s", op.ID, op.Desc)
	e.indent = "  "
	e.settle()
	e.indent = ""
	return op, nil
}

// reportOp prints a finished operation and checks a read against the
// writes acknowledged before it began.
func (e *Env) reportOp(op *Op) {
	op.mu.Lock()
	defer op.mu.Unlock()
	var nle *replica.NotLeaderError
	switch {
	case errors.As(op.err, &nle):
		e.printf("op %d done: not leader (hint %d)", op.ID, nle.Leader)
	case op.err != nil:
		e.printf("op %d done: error: %v", op.ID, op.err)
	case op.read:
		if op.version == 0 {
			e.printf("op %d done: read index=%d %s absent", op.ID, op.index, op.key)
		} else {
			e.printf("op %d done: read index=%d %s=%s version=%d", op.ID, op.index, op.key, op.value, op.version)
		}
		if op.version < op.minVersion {
			e.violation("op %d read %s at version %d, older than the acknowledged version %d", op.ID, op.key, op.version, op.minVersion)
		}
	default:
		r := op.res
		s := fmt.Sprintf("op %d done: %s version=%d index=%d", op.ID, statusName(r.Status), r.Version, r.Index)
		if r.Created {
			s += " created"
		}
		e.printf("%s", s)
		if r.Status == wire.StatusOK && r.Version > e.acked[op.key] {
			e.acked[op.key] = r.Version
		}
	}
}

func statusName(s wire.Status) string {
	switch s {
	case wire.StatusOK:
		return "ok"
	case wire.StatusNotFound:
		return "not-found"
	case wire.StatusPreconditionFailed:
		return "precondition-failed"
	case wire.StatusRequestIDReused:
		return "request-id-reused"
	}
	return fmt.Sprintf("status(%d)", s)
}
