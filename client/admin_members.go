package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Member is one node of the membership record.
type Member struct {
	ID       uint64 `json:"id"`
	HTTPAddr string `json:"http_addr,omitempty"`
	PeerAddr string `json:"peer_addr"`
	// State: active, decommissioning, removed or dead.
	State string `json:"state"`
	// Role: "" (voter) or read-replica.
	Role string `json:"role,omitempty"`
	// DropLearners: a read replica turned voter whose learners are being
	// removed; it takes voters once they are gone.
	DropLearners bool `json:"drop_learners,omitempty"`
}

// Settings are the cluster-wide balancing settings; nil fields are unset
// (each node's flag applies).
type Settings struct {
	TransferLimit *int   `json:"transfer_limit,omitempty"`
	SnapshotRate  *int64 `json:"snapshot_rate,omitempty"`
	// Rebalance false stops rebalancing moves (repairs go on).
	Rebalance *bool `json:"rebalance,omitempty"`
}

// Move is one replica move of the balancer.
type Move struct {
	Shard  uint64 `json:"shard"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
	// Learner: the move adds a read replica's learner on To (From 0) or
	// removes the learner on From (To 0).
	Learner bool `json:"learner,omitempty"`
}

// BalancerStatus is what a node's balancer does.
type BalancerStatus struct {
	Leading  bool   `json:"leading"`
	InFlight []Move `json:"in_flight"`
	Moved    uint64 `json:"moved"`
	// PausedUntil: rebalancing waits after a manual move (zero: not).
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Nodes is GET /v1/admin/nodes: the membership record and the answering
// node's balancer.
type Nodes struct {
	// Version of the record (it grows with every change).
	Version  uint64   `json:"version"`
	Members  []Member `json:"members"`
	UsedIDs  []uint64 `json:"used_ids"`
	Settings Settings `json:"settings"`
	// PausedUntil (Unix nanoseconds): rebalancing waits until then after
	// a replica moved by hand.
	PausedUntil int64          `json:"rebalance_paused_until,omitempty"`
	Balancer    BalancerStatus `json:"balancer"`
}

// JoinRequest is what a joining node sends.
type JoinRequest struct {
	NodeID   uint64 `json:"node_id"`
	HTTPAddr string `json:"http_addr"`
	PeerAddr string `json:"peer_addr"`
	// Role: "" or voter, or read-replica.
	Role string `json:"role,omitempty"`
}

// JoinResponse is the cluster's answer to a join. Shards holds the shard
// descriptors as the server encodes them.
type JoinResponse struct {
	Members     []Member        `json:"members"`
	Replication int             `json:"replication"`
	Shards      json.RawMessage `json:"shards"`
}

// Nodes returns the membership record (read linearizably by the node).
func (a *Admin) Nodes(ctx context.Context) (Nodes, error) {
	var n Nodes
	return n, a.call(ctx, http.MethodGet, "/v1/admin/nodes", &n)
}

// Join asks the node to admit a new node. A node id in use with other
// addresses gives an *Error with status 409 (code node_id_in_use), a
// removed or dead id 410 (node_removed).
func (a *Admin) Join(ctx context.Context, req JoinRequest) (JoinResponse, error) {
	var out JoinResponse
	return out, a.send(ctx, http.MethodPost, "/v1/admin/nodes/join", req, &out)
}

// Decommission starts draining node id: the balancer moves its replicas
// to other nodes, then marks it removed.
func (a *Admin) Decommission(ctx context.Context, id uint64) (Member, error) {
	var m Member
	return m, a.call(ctx, http.MethodPost, "/v1/admin/nodes/"+strconv.FormatUint(id, 10)+"/decommission", &m)
}

// RemoveDead declares node id dead: it will never come back, and the
// balancer replaces its replicas from the survivors.
func (a *Admin) RemoveDead(ctx context.Context, id uint64) (Member, error) {
	var m Member
	return m, a.call(ctx, http.MethodPost, "/v1/admin/nodes/"+strconv.FormatUint(id, 10)+"/remove?dead=true", &m)
}

// SetRole sets node id's role: "read-replica" (it holds a learner of
// every shard and serves serializable reads; its voters move away) or
// "voter" (its learners are removed; the balancer gives it voters).
func (a *Admin) SetRole(ctx context.Context, id uint64, role string) (Member, error) {
	var m Member
	return m, a.call(ctx, http.MethodPost, "/v1/admin/nodes/"+strconv.FormatUint(id, 10)+"/role?role="+url.QueryEscape(role), &m)
}

// SetSettings changes the cluster-wide settings (nil fields unchanged).
func (a *Admin) SetSettings(ctx context.Context, s Settings) (Settings, error) {
	var out Settings
	return out, a.send(ctx, http.MethodPut, "/v1/admin/settings", s, &out)
}

// MoveShard moves shard id's replica on node from to node to and waits
// until it is done. The node gets the context's deadline (a second less,
// so its answer arrives in time; default DefaultAdminTimeout) as the
// move's timeout; a move that runs out of time stays where it got, and
// asking again finishes it.
func (a *Admin) MoveShard(ctx context.Context, id, from, to uint64) error {
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "to": {strconv.FormatUint(to, 10)}}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl) - time.Second; d > 0 {
			q.Set("timeout", d.Round(time.Millisecond).String())
		}
	}
	return a.call(ctx, http.MethodPost, "/v1/admin/shards/"+strconv.FormatUint(id, 10)+"/move?"+q.Encode(), nil)
}

// SplitResult is the answer of SplitShard: the shard, now owning the
// lower half of its old token range, and the new shard owning the upper
// half, on the same replicas.
type SplitResult struct {
	Status string     `json:"status"`
	Shard  ShardRange `json:"shard"`
	New    ShardRange `json:"new_shard"`
}

// ShardRange is a shard's descriptor as the admin calls return it.
type ShardRange struct {
	ID       uint64   `json:"id"`
	Start    uint64   `json:"start"`
	End      uint64   `json:"end"`
	Replicas []uint64 `json:"replicas"`
	Learners []uint64 `json:"learners,omitempty"`
	Epoch    uint64   `json:"epoch"`
}

// SplitShard splits shard id at the midpoint of its token range and
// returns both halves once the shard's leader has applied the split.
// Each call splits once more: a call that timed out may have split the
// shard (ClusterInfo tells).
func (a *Admin) SplitShard(ctx context.Context, id uint64) (SplitResult, error) {
	var out SplitResult
	q := url.Values{}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl) - time.Second; d > 0 {
			q.Set("timeout", d.Round(time.Millisecond).String())
		}
	}
	path := "/v1/admin/shards/" + strconv.FormatUint(id, 10) + "/split"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out, a.call(ctx, http.MethodPost, path, &out)
}

// send runs one exchange with a JSON body.
func (a *Admin) send(ctx context.Context, method, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAdminTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cairn: %s %s: %w", method, path, err)
	}
	return nil
}
