package httpapi

import (
	"context"
	"net/http"

	"github.com/cairn-db/cairn/internal/cluster"
)

// RoleSetter is implemented by membership services that change a node's
// role (read replicas, docs/operations.md).
type RoleSetter interface {
	SetRole(ctx context.Context, id uint64, role cluster.Role) (cluster.Member, error)
}

// adminRole serves POST /v1/admin/nodes/{id}/role?role=voter|read-replica.
func (a *api) adminRole(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodPost)
	if !ok {
		return
	}
	id, ok := nodeID(w, r)
	if !ok {
		return
	}
	role, err := cluster.ParseRole(r.URL.Query().Get("role"))
	if err != nil || r.URL.Query().Get("role") == "" {
		badRequest(w, "role: want role=voter or role=read-replica")
		return
	}
	rs, ok := m.(RoleSetter)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this node cannot change roles")
		return
	}
	mem, err := rs.SetRole(r.Context(), id, role)
	a.answerMembers(w, mem, err)
}
