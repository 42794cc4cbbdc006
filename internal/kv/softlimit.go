package kv

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// Per-shard soft limits (Riak's vnode soft limits). Every data request a
// node works on — one a client sent it (Get, Head, Put, Delete) or one
// another node forwarded to it (HandleRequest) — waits in its shard's
// queue on that node until it is answered. When a shard's queue holds
// Config.ShardSoftLimit requests, the next one for that shard is refused
// at once (ErrShardOverloaded, HTTP 503 with Retry-After) instead of
// waiting: a slow or stuck shard (a hot key, a shard that lost its
// quorum) then holds at most its limit of the node's in-flight budget
// (--max-inflight) and the other shards keep being served.
//
// Every answer to a forwarded request carries the answering node's queue
// depth for the shard; serializable reads go to the replica whose last
// known queue is the shortest (shortestQueue).

// ErrShardOverloaded: the key's shard has ShardSoftLimit requests queued
// on a node. It wraps ErrOverloaded (HTTP 503 with Retry-After).
var ErrShardOverloaded = fmt.Errorf("%w: shard queue over its soft limit", ErrOverloaded)

// remoteDepthTTL is how long a queue depth another node reported stays
// believed; an older one counts as an empty queue, so a node whose own
// queue is busy asks the others again and learns their depth.
const remoteDepthTTL = time.Second

// shardQueue is one shard's queue on this node.
type shardQueue struct {
	depth    atomic.Int64
	rejected atomic.Uint64
	mu       struct {
		sync.Mutex
		// remote: node -> the depth it last reported for the shard.
		remote map[uint64]reportedDepth
	}
}

type reportedDepth struct {
	depth int64
	at    time.Time
}

// ShardQueue is one shard's queue on this node, for metrics.
type ShardQueue struct {
	Shard uint64
	// Depth: requests for the shard this node is working on now.
	Depth int64
	// Rejected: requests refused over the soft limit since the start.
	Rejected uint64
}

// queue returns shard id's queue, made on first use.
func (c *Coordinator) queue(id uint64) *shardQueue {
	if q, ok := c.queues.Load(id); ok {
		return q.(*shardQueue)
	}
	q, _ := c.queues.LoadOrStore(id, new(shardQueue))
	return q.(*shardQueue)
}

// admit enters a request into shard id's queue, or refuses it with
// ErrShardOverloaded when the queue is at its soft limit. The caller
// calls leave on the returned queue when the request is answered.
func (c *Coordinator) admit(id uint64) (*shardQueue, error) {
	q := c.queue(id)
	n := q.depth.Add(1)
	if limit := c.cfg.ShardSoftLimit; limit > 0 && n > int64(limit) {
		q.depth.Add(-1)
		q.rejected.Add(1)
		return nil, fmt.Errorf("%w: shard %d has %d requests queued on node %d (limit %d)",
			ErrShardOverloaded, id, n-1, c.cfg.NodeID, limit)
	}
	return q, nil
}

func (q *shardQueue) leave() { q.depth.Add(-1) }

// ShardQueues lists the queue of every shard this node has served.
func (c *Coordinator) ShardQueues() []ShardQueue {
	var out []ShardQueue
	c.queues.Range(func(k, v any) bool {
		q := v.(*shardQueue)
		out = append(out, ShardQueue{Shard: k.(uint64), Depth: q.depth.Load(), Rejected: q.rejected.Load()})
		return true
	})
	return out
}

// admitForwarded is admit for a request another node sent: nil when it
// may run, else the answer refusing it. Only data requests queue.
func (c *Coordinator) admitForwarded(req *wire.Request) (*shardQueue, *wire.Response) {
	switch req.Kind {
	case wire.KindWrite, wire.KindRead, wire.KindReadLocal, wire.KindHead:
	default:
		return nil, nil
	}
	q, err := c.admit(req.ShardID)
	if err != nil {
		return nil, &wire.Response{Status: wire.StatusOverloaded, Message: err.Error(),
			Queue: uint32(c.queue(req.ShardID).depth.Load())}
	}
	return q, nil
}

// noteDepth records the queue depth node reported for shard id.
func (c *Coordinator) noteDepth(id, node uint64, depth uint32) {
	q := c.queue(id)
	q.mu.Lock()
	if q.mu.remote == nil {
		q.mu.remote = map[uint64]reportedDepth{}
	}
	q.mu.remote[node] = reportedDepth{depth: int64(depth), at: time.Now()}
	q.mu.Unlock()
}

// localMargin: a serializable read leaves this node's replica only when
// its queue holds at least this many other requests (see shortestQueue).
const localMargin = 8

// shortestQueue picks the replica of d a serializable read goes to: the
// one with the shortest queue for the shard, as far as this node knows —
// its own queue exactly (without the read itself: a Get or Head admitted
// into it; see coverQueue for a coverage query), the others' as they
// last reported it (an empty queue once the report is older than
// remoteDepthTTL). A read served by this node's replica waits for no
// network hop, so it stays unless another replica's queue is clearly
// shorter: the local queue holds at least localMargin requests and the
// other's less than half as many. Among other replicas the shortest wins,
// a tie going to a random one of them, so reads spread. localOK: this
// node has a replica of d that can serve the read.
func (c *Coordinator) shortestQueue(d shard.Descriptor, localOK bool, now time.Time) uint64 {
	return c.shortestQueueOf(d, localOK, 1, now)
}

// coverQueue is shortestQueue for one shard of a serializable coverage
// query (a listing or 2i query page, scan.go), which holds no place in
// the shard's queue: the replica that scans the shard's part.
func (c *Coordinator) coverQueue(d shard.Descriptor, localOK bool, now time.Time) uint64 {
	return c.shortestQueueOf(d, localOK, 0, now)
}

// shortestQueueOf is shortestQueue for a read that holds self places in
// this node's queue for the shard.
func (c *Coordinator) shortestQueueOf(d shard.Descriptor, localOK bool, self int64, now time.Time) uint64 {
	q := c.queue(d.ID)
	local := max(q.depth.Load()-self, 0)
	if localOK && local < localMargin {
		return c.cfg.NodeID
	}
	best, bestDepth, ties := uint64(0), int64(0), 0
	q.mu.Lock()
	for _, node := range d.Replicas {
		if node == c.cfg.NodeID {
			continue
		}
		var depth int64
		if r, ok := q.mu.remote[node]; ok && now.Sub(r.at) < remoteDepthTTL {
			depth = r.depth
		}
		switch {
		case best == 0 || depth < bestDepth:
			best, bestDepth, ties = node, depth, 1
		case depth == bestDepth:
			ties++
			if rand.IntN(ties) == 0 {
				best = node
			}
		}
	}
	q.mu.Unlock()
	if localOK && (best == 0 || 2*bestDepth >= local) {
		return c.cfg.NodeID
	}
	return best
}
