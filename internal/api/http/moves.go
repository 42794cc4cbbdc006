package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// Mover is implemented by backends that move replicas between nodes.
type Mover interface {
	MoveReplica(ctx context.Context, shardID, from, to uint64) (shard.Descriptor, error)
}

// Splitter is implemented by backends that split shards.
type Splitter interface {
	SplitShard(ctx context.Context, shardID uint64) (lower, upper shard.Descriptor, err error)
}

// splitAnswer is the JSON answer of a split: the shard, now owning the
// lower half of its old range, and the new shard owning the upper half.
type splitAnswer struct {
	Status string           `json:"status"`
	Shard  shard.Descriptor `json:"shard"`
	New    shard.Descriptor `json:"new_shard"`
}

// defaultSplitTimeout bounds a split's wait (one log entry and its
// application) when timeout= is not given.
const defaultSplitTimeout = 30 * time.Second

// Bounds of a move's wait (the timeout= query parameter): a move streams
// a snapshot of the shard, which takes longer than a data request.
const (
	defaultMoveTimeout = 2 * time.Minute
	maxMoveTimeout     = 30 * time.Minute
)

// moveAnswer is the JSON answer of a move.
type moveAnswer struct {
	Status string           `json:"status"`
	Shard  shard.Descriptor `json:"shard"`
}

// adminShards serves POST /v1/admin/shards/{id}/move?from=N&to=M[&timeout=2m]:
// it moves the shard's replica from node N to node M and answers with the
// shard's descriptor once N is gone and M votes. A timeout (504) leaves
// the move wherever it got: asking again finishes it.
func (a *api) adminShards(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/admin/shards/")
	idStr, action, ok := strings.Cut(rest, "/")
	if !ok || (action != "move" && action != "split") {
		writeError(w, http.StatusNotFound, "not_found", "unknown admin path; use POST /v1/admin/shards/{id}/move?from=N&to=M or POST /v1/admin/shards/{id}/split")
		return
	}
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil || id == 0 {
		badRequest(w, "shard id: want a positive integer")
		return
	}
	if action == "split" {
		a.adminSplit(w, r, id)
		return
	}
	q := r.URL.Query()
	var nodes [2]uint64
	for i, name := range []string{"from", "to"} {
		n, err := strconv.ParseUint(q.Get(name), 10, 64)
		if err != nil || n == 0 {
			badRequest(w, name+": want a node id (a positive integer)")
			return
		}
		nodes[i] = n
	}
	if nodes[0] == nodes[1] {
		badRequest(w, "from and to name the same node")
		return
	}
	timeout := defaultMoveTimeout
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > maxMoveTimeout {
			badRequest(w, "timeout: want a duration up to 30m")
			return
		}
		timeout = d
	}
	m, ok := a.b.(Mover)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this node cannot move replicas")
		return
	}
	// The request's own deadline is a data request's; a move gets its
	// own, and is not cut short by the server's.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
	defer cancel()
	d, err := m.MoveReplica(ctx, id, nodes[0], nodes[1])
	if err != nil {
		writeBackendError(w, a.cfg.Logger, err)
		return
	}
	writeJSON(w, moveAnswer{Status: "ok", Shard: d})
}

// adminSplit serves POST /v1/admin/shards/{id}/split[?timeout=30s]: it
// splits the shard at the midpoint of its token range and answers with
// both halves' descriptors once the shard's leader has applied the
// split. Every call splits once more; a timeout (504) may leave the split
// done (GET /v1/cluster tells).
func (a *api) adminSplit(w http.ResponseWriter, r *http.Request, id uint64) {
	timeout := defaultSplitTimeout
	if s := r.URL.Query().Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > maxMoveTimeout {
			badRequest(w, "timeout: want a duration up to 30m")
			return
		}
		timeout = d
	}
	sp, ok := a.b.(Splitter)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this node cannot split shards")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
	defer cancel()
	lower, upper, err := sp.SplitShard(ctx, id)
	if err != nil {
		writeBackendError(w, a.cfg.Logger, err)
		return
	}
	writeJSON(w, splitAnswer{Status: "ok", Shard: lower, New: upper})
}
