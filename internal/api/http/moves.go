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
	if !ok || action != "move" {
		writeError(w, http.StatusNotFound, "not_found", "unknown admin path; use POST /v1/admin/shards/{id}/move?from=N&to=M")
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
