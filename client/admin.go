package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// NodeStatus is what GET /v1/status reports about one node.
type NodeStatus struct {
	NodeID        uint64  `json:"node_id"`
	HTTPAddr      string  `json:"http_addr"`
	PeerAddr      string  `json:"peer_addr"`
	Replicas      int     `json:"replicas"`
	Leaders       int     `json:"leaders"`
	Replication   int     `json:"replication"`
	Shards        int     `json:"shards"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Version       string  `json:"version"`
	// Disk is what the node's disk guard last found (nil from a node
	// without one).
	Disk *DiskState `json:"disk,omitempty"`
}

// DiskState is a node's disk guard's finding: Refusing is "" while the
// node takes new values, else "disk_full" or "quota_exceeded" (its puts
// answer 507; reads and deletes still work).
type DiskState struct {
	Refusing     string `json:"refusing,omitempty"`
	Injected     bool   `json:"injected,omitempty"`
	FreeBytes    uint64 `json:"free_bytes"`
	ReserveBytes uint64 `json:"reserve_bytes"`
	UsedBytes    uint64 `json:"used_bytes"`
	QuotaBytes   uint64 `json:"quota_bytes,omitempty"`
}

// MemberInfo describes one cluster member.
type MemberInfo struct {
	NodeID    uint64 `json:"node_id"`
	PeerAddr  string `json:"peer_addr"`
	HTTPAddr  string `json:"http_addr,omitempty"` // "" when the answering node could not learn it
	Reachable bool   `json:"reachable"`
	// State in the membership record (active, decommissioning); "" before
	// the answering node has read it.
	State string `json:"state,omitempty"`
	// Role: "read-replica" for a read replica ("" for a voter node).
	Role string `json:"role,omitempty"`
	// MaxLag: on the answering node's own entry, when it holds learners,
	// the largest number of entries one is behind its leader.
	MaxLag *uint64 `json:"max_lag,omitempty"`
}

// ShardInfo describes one shard as the answering node sees it.
type ShardInfo struct {
	ID         uint64   `json:"id"`
	TokenStart string   `json:"token_start"` // hex, inclusive
	TokenEnd   string   `json:"token_end"`   // hex, exclusive; "10000000000000000" is 2^64
	Epoch      uint64   `json:"epoch"`
	Replicas   []uint64 `json:"replicas"`           // voters
	Learners   []uint64 `json:"learners,omitempty"` // non-voting replicas (a move's destination catching up, or a read replica)
	Leader     uint64   `json:"leader"`             // 0 when unknown
	Term       uint64   `json:"term,omitempty"`
	Applied    uint64   `json:"applied,omitempty"` // the answering node's replica, if any
	Commit     uint64   `json:"commit,omitempty"`
	// Verified: false while the answering node's replica was opened from
	// disk and no scrub has compared it with its peers yet.
	Verified *bool `json:"verified,omitempty"`
	// Scrub is the answering node's replica's last scrub, if any.
	Scrub *ShardScrub `json:"scrub,omitempty"`
	// Lag: when the answering node's replica is a learner (a read
	// replica), how many entries its applied index is behind its leader's.
	Lag *uint64 `json:"lag,omitempty"`
	// LearnerLag: when the answering node leads the shard, the committed
	// entries each learner lacks, by node id.
	LearnerLag map[uint64]uint64 `json:"learner_lag,omitempty"`
}

// ShardScrub is one replica's last scrub (docs/scrub.md).
type ShardScrub struct {
	Index   uint64    `json:"index"`
	Keys    uint64    `json:"keys"`
	Root    string    `json:"root"`
	Outcome string    `json:"outcome"` // agree, mismatch, inconclusive, repaired
	Agree   int       `json:"agree"`
	Ranges  []int     `json:"differing_ranges,omitempty"`
	Nodes   []uint64  `json:"disagreeing_nodes,omitempty"`
	At      time.Time `json:"at"`
}

// ScrubStats counts one node's scrubs since it started.
type ScrubStats struct {
	Scrubs         uint64 `json:"scrubs"`
	Mismatches     uint64 `json:"mismatches"`
	Repairs        uint64 `json:"repairs"`
	RepairFailures uint64 `json:"repair_failures"`
	Inconclusive   uint64 `json:"inconclusive"`
	ChecksumRuns   uint64 `json:"checksum_runs"`
	ChecksumErrors uint64 `json:"checksum_errors"`
	Unverified     int    `json:"unverified"`
}

// Owns reports whether token (a key's xxhash64) falls in the shard's
// range [TokenStart, TokenEnd).
func (s ShardInfo) Owns(token uint64) bool {
	start, err := strconv.ParseUint(s.TokenStart, 16, 64)
	if err != nil || token < start {
		return false
	}
	end, err := strconv.ParseUint(s.TokenEnd, 16, 64)
	return err != nil || token < end // err: the end is 2^64
}

// HasReplica reports whether node holds a replica of the shard.
func (s ShardInfo) HasReplica(node uint64) bool {
	for _, r := range s.Replicas {
		if r == node {
			return true
		}
	}
	return false
}

// ClusterInfo is what GET /v1/cluster reports.
type ClusterInfo struct {
	NodeID      uint64       `json:"node_id"` // the answering node
	Replication int          `json:"replication"`
	Members     []MemberInfo `json:"members"`
	Shards      []ShardInfo  `json:"shards"`
	Scrub       ScrubStats   `json:"scrub"`
}

// ShardHash fingerprints one replica's data (GET /v1/admin/hashes).
type ShardHash struct {
	Shard   uint64 `json:"shard"`
	Applied uint64 `json:"applied"`
	Hash    string `json:"hash"`
}

// Admin talks to one node's status, cluster and admin endpoints. Each call
// is one HTTP exchange, never retried on another node: it asks about the
// node it names. An Admin is safe for concurrent use.
type Admin struct {
	base string
	hc   *http.Client
}

// DefaultAdminTimeout bounds one Admin call when the context has no
// deadline.
const DefaultAdminTimeout = 5 * time.Second

// NewAdmin returns an Admin of the node at endpoint (a base URL or
// host:port). hc nil means http.DefaultClient.
func NewAdmin(endpoint string, hc *http.Client) *Admin {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Admin{base: normalize(endpoint), hc: hc}
}

// Endpoint is the node's base URL.
func (a *Admin) Endpoint() string { return a.base }

// Status returns GET /v1/status.
func (a *Admin) Status(ctx context.Context) (NodeStatus, error) {
	var st NodeStatus
	return st, a.call(ctx, http.MethodGet, "/v1/status", &st)
}

// Cluster returns GET /v1/cluster: the members and shards as the node sees
// them.
func (a *Admin) Cluster(ctx context.Context) (ClusterInfo, error) {
	var ci ClusterInfo
	return ci, a.call(ctx, http.MethodGet, "/v1/cluster", &ci)
}

// Hashes returns the fingerprints of the node's replicas.
func (a *Admin) Hashes(ctx context.Context) ([]ShardHash, error) {
	var hs []ShardHash
	return hs, a.call(ctx, http.MethodGet, "/v1/admin/hashes", &hs)
}

// Partition makes the node drop everything it exchanges with nodes (none:
// heal). It needs a node started with --fault-injection (else an *Error
// with status 403).
func (a *Admin) Partition(ctx context.Context, nodes ...uint64) error {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = strconv.FormatUint(n, 10)
	}
	return a.fault(ctx, url.Values{"partition": {strings.Join(ids, ",")}})
}

// DiskStall delays every storage commit of the node by d (0: heal).
func (a *Admin) DiskStall(ctx context.Context, d time.Duration) error {
	return a.fault(ctx, url.Values{"disk-stall": {d.String()}})
}

// ClockSkew sets the offset of the node's clocks (wall and monotonic)
// from the real ones to d (0: heal).
func (a *Admin) ClockSkew(ctx context.Context, d time.Duration) error {
	return a.fault(ctx, url.Values{"clock-skew": {d.String()}})
}

// ClockJump moves the node's clocks by d, once, from where they are.
func (a *Admin) ClockJump(ctx context.Context, d time.Duration) error {
	return a.fault(ctx, url.Values{"clock-jump": {d.String()}})
}

// DiskFull makes the node's disk look full (on: it answers new values
// with 507 disk_full and hands its leaderships away) or lifts that.
func (a *Admin) DiskFull(ctx context.Context, on bool) error {
	return a.fault(ctx, url.Values{"disk-full": {strconv.FormatBool(on)}})
}

// HealFaults lifts the node's partition, disk stall, clock offset and
// disk-full fault.
func (a *Admin) HealFaults(ctx context.Context) error {
	return a.fault(ctx, url.Values{"partition": {""}, "disk-stall": {"0s"}, "clock-skew": {"0s"}, "disk-full": {"false"}})
}

func (a *Admin) fault(ctx context.Context, q url.Values) error {
	return a.call(ctx, http.MethodPost, "/v1/admin/fault?"+q.Encode(), nil)
}

// call runs one exchange and decodes a 200 answer's JSON into out (nil:
// ignore the body). Other answers become an *Error.
func (a *Admin) call(ctx context.Context, method, path string, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAdminTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cairn: %s %s: %w", method, path, err)
	}
	return nil
}

// Cluster returns GET /v1/cluster from the first of the client's nodes
// that answers.
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	var errs []error
	for _, ep := range c.eps {
		actx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
		ci, err := NewAdmin(ep, c.opts.HTTP).Cluster(actx)
		cancel()
		if err == nil {
			return ci, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return ClusterInfo{}, errors.Join(errs...)
}

func normalize(endpoint string) string {
	e := strings.TrimRight(strings.TrimSpace(endpoint), "/")
	if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		e = "http://" + e
	}
	return e
}

// errorOf is the *Error of a non-2xx answer with body data (the
// contract's {"error", "message"}).
func errorOf(status int, data []byte) *Error {
	e := &Error{Status: status, kind: ErrBadRequest}
	var body struct{ Error, Message string }
	if json.Unmarshal(data, &body) == nil {
		e.Code, e.Message = body.Error, body.Message
	}
	switch status {
	case http.StatusNotFound:
		e.kind = ErrNotFound
	case http.StatusPreconditionFailed:
		e.kind = ErrPreconditionFailed
	case http.StatusConflict:
		e.kind = ErrRequestIDReused
	case http.StatusServiceUnavailable:
		e.kind = ErrOverloaded
	case http.StatusGatewayTimeout:
		e.kind = ErrTimeout
	}
	return e
}
