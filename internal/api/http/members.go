package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/internal/cluster"
)

// Membership is the node's membership service (cluster.Manager and the
// balancer's status, as the server wires them).
type Membership interface {
	// Nodes returns the membership record, read linearizably, and its
	// version.
	Nodes(ctx context.Context) (cluster.Record, uint64, error)
	Join(ctx context.Context, req cluster.JoinRequest) (cluster.JoinResponse, error)
	Decommission(ctx context.Context, id uint64) (cluster.Member, error)
	RemoveDead(ctx context.Context, id uint64) (cluster.Member, error)
	SetSettings(ctx context.Context, s cluster.Settings) (cluster.Settings, error)
	// Balancer reports what this node's balancer does.
	Balancer() cluster.BalancerStatus
}

// NodesAnswer is GET /v1/admin/nodes.
type NodesAnswer struct {
	// Version of the record (it grows with every change).
	Version  uint64           `json:"version"`
	Members  []cluster.Member `json:"members"`
	UsedIDs  []uint64         `json:"used_ids"`
	Settings cluster.Settings `json:"settings"`
	// PausedUntil (Unix nanoseconds): rebalancing waits until then after
	// a replica moved by hand.
	PausedUntil int64                  `json:"rebalance_paused_until,omitempty"`
	Balancer    cluster.BalancerStatus `json:"balancer"`
}

// maxAdminBody bounds an admin request's JSON body.
const maxAdminBody = 64 << 10

func (a *api) memberRoutes(mux *http.ServeMux) {
	mux.Handle("/v1/admin/nodes", a.wrap("admin", false, a.adminNodes))
	mux.Handle("/v1/admin/nodes/join", a.wrap("admin", false, a.adminJoin))
	mux.Handle("/v1/admin/nodes/{id}/decommission", a.wrap("admin", false, a.adminDecommission))
	mux.Handle("/v1/admin/nodes/{id}/remove", a.wrap("admin", false, a.adminRemove))
	mux.Handle("/v1/admin/nodes/{id}/role", a.wrap("admin", false, a.adminRole))
	mux.Handle("/v1/admin/settings", a.wrap("admin", false, a.adminSettings))
}

// memberRequest checks r's method (one of methods) and returns the
// membership service; false when it answered the request itself (405,
// or 503 on a node that serves no membership).
func (a *api) memberRequest(w http.ResponseWriter, r *http.Request, methods ...string) (Membership, bool) {
	if !slices.Contains(methods, r.Method) {
		methodNotAllowed(w, strings.Join(methods, ", "))
		return nil, false
	}
	return a.members(w)
}

// answerMembers writes v as JSON, or err as membershipError maps it.
func (a *api) answerMembers(w http.ResponseWriter, v any, err error) {
	if err != nil {
		a.membershipError(w, err)
		return
	}
	writeJSON(w, v)
}

// members returns the membership service, or answers 503 itself.
func (a *api) members(w http.ResponseWriter) (Membership, bool) {
	if a.cfg.Members == nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "membership_not_ready", "this node serves no membership")
		return nil, false
	}
	return a.cfg.Members, true
}

// adminNodes serves GET /v1/admin/nodes.
func (a *api) adminNodes(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodGet)
	if !ok {
		return
	}
	rec, ver, err := m.Nodes(r.Context())
	a.answerMembers(w, NodesAnswer{Version: ver, Members: rec.Members, UsedIDs: rec.UsedIDs, Settings: rec.Settings, PausedUntil: rec.PausedUntil, Balancer: m.Balancer()}, err)
}

// adminJoin serves POST /v1/admin/nodes/join with a cluster.JoinRequest.
func (a *api) adminJoin(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodPost)
	if !ok {
		return
	}
	var req cluster.JoinRequest
	if !decodeBody(w, r, &req) {
		return
	}
	resp, err := m.Join(r.Context(), req)
	a.answerMembers(w, resp, err)
}

// adminDecommission serves POST /v1/admin/nodes/{id}/decommission.
func (a *api) adminDecommission(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodPost)
	if !ok {
		return
	}
	id, ok := nodeID(w, r)
	if !ok {
		return
	}
	mem, err := m.Decommission(r.Context(), id)
	a.answerMembers(w, mem, err)
}

// adminRemove serves POST /v1/admin/nodes/{id}/remove?dead=true.
func (a *api) adminRemove(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodPost)
	if !ok {
		return
	}
	id, ok := nodeID(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("dead") != "true" {
		badRequest(w, "remove takes dead=true: it declares a node that will never come back dead; drain a live node with POST /v1/admin/nodes/{id}/decommission")
		return
	}
	mem, err := m.RemoveDead(r.Context(), id)
	a.answerMembers(w, mem, err)
}

// adminSettings serves PUT /v1/admin/settings with a cluster.Settings
// (fields left out are unchanged) and GET /v1/admin/settings.
func (a *api) adminSettings(w http.ResponseWriter, r *http.Request) {
	m, ok := a.memberRequest(w, r, http.MethodGet, http.MethodPut)
	if !ok {
		return
	}
	if r.Method == http.MethodGet {
		rec, _, err := m.Nodes(r.Context())
		a.answerMembers(w, rec.Settings, err)
		return
	}
	var s cluster.Settings
	if !decodeBody(w, r, &s) {
		return
	}
	out, err := m.SetSettings(r.Context(), s)
	a.answerMembers(w, out, err)
}

func nodeID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		badRequest(w, "node id: want a positive integer, not "+strconv.Quote(r.PathValue("id")))
		return 0, false
	}
	return id, true
}

// decodeBody decodes a JSON body of at most maxAdminBody bytes into v,
// refusing unknown fields and anything but an object; it answers 400
// itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		badRequest(w, "request body: want a JSON object: "+err.Error())
		return false
	}
	// null decodes into v as nothing at all: a request that asked for
	// nothing would be answered as if it had asked for the defaults.
	if raw[0] != '{' {
		badRequest(w, "request body: want a JSON object, not "+jsonKind(raw[0]))
		return false
	}
	obj := json.NewDecoder(bytes.NewReader(raw))
	obj.DisallowUnknownFields()
	if err := obj.Decode(v); err != nil {
		badRequest(w, "request body: want a JSON object: "+err.Error())
		return false
	}
	// One object and nothing after it: a body with more is malformed,
	// and a malformed body changes nothing.
	if _, err := dec.Token(); err != io.EOF {
		badRequest(w, "request body: want one JSON object and nothing after it")
		return false
	}
	return true
}

// jsonKind names the kind of the JSON value beginning with c.
func jsonKind(c byte) string {
	switch c {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// membershipError maps the cluster package's errors to status codes.
func (a *api) membershipError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, cluster.ErrIDInUse):
		writeError(w, http.StatusConflict, "node_id_in_use", err.Error())
	case errors.Is(err, cluster.ErrAddrInUse):
		writeError(w, http.StatusConflict, "address_in_use", err.Error())
	case errors.Is(err, cluster.ErrRemoved):
		writeError(w, http.StatusGone, "node_removed", err.Error())
	case errors.Is(err, cluster.ErrUnknownNode):
		writeError(w, http.StatusNotFound, "unknown_node", err.Error())
	case errors.Is(err, cluster.ErrTooFewNodes):
		writeError(w, http.StatusConflict, "too_few_nodes", err.Error())
	case errors.Is(err, cluster.ErrInvalid):
		badRequest(w, err.Error())
	case errors.Is(err, cluster.ErrNotReady):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "membership_not_ready", err.Error())
	default:
		writeBackendError(w, a.cfg.Logger, err)
	}
}
