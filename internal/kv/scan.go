package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Ordered scans (docs/indexes.md). A listing or index query is a coverage
// query: the coordinator picks one replica of every shard — this node's
// where it holds one, then as few other nodes as it can — and sends each
// chosen node one KindScan request naming its shards. Each node scans its
// node-global ordered index (key order or a secondary index) once, keeps
// the entries of its listed shards, and answers at most a page, bounded in
// entries and bytes. The coordinator merges the answers in sort-key order.
// A node that stopped early (a bound) reports the last sort key it
// examined; the coordinator emits entries only up to the smallest such
// key, so no entry of a shard is skipped, and scans on from there.

// Bounds of a page.
const (
	// DefaultListLimit is a page's entries when the caller names none.
	DefaultListLimit = 100
	// MaxListLimit is the most entries a page holds.
	MaxListLimit = 1000
	// MaxPageBytes bounds the keys, terms and values of a page: the
	// coordinator splits it between the nodes it asks, and a node answers
	// at most its share (but always one entry).
	MaxPageBytes = 4 << 20
	// minNodeBytes is the least share of MaxPageBytes a node gets.
	minNodeBytes = 256 << 10
	// maxRounds bounds the rounds of one page: a page that is not full
	// after them ends early, with a continuation.
	maxRounds = 16
)

// The work and time of one node's scan for one request. A node that
// reaches either ends its answer at the entry reached (storage.Scan), a
// partial page the coordinator continues from, like any other bound.
var (
	// maxExamined bounds the steps of the scan: the entries it looks at,
	// kept or not (entries of shards it was not asked for), and the
	// tombstones of deleted keys not yet compacted away.
	maxExamined = 50000
	// scanTimeShare is the share of the time left to the request's
	// deadline that the scan may take, so that its answer still reaches
	// a coordinator that waits until then.
	scanTimeShare = 0.5
)

// scanQuery is one page of an ordered scan of a space: the key order
// (index "") or a secondary index. Sort keys are in [from, to) (to nil:
// no bound) and after after (nil: none).
type scanQuery struct {
	index     string
	from, to  []byte
	after     []byte
	limit     int
	keysOnly  bool
	terms     bool // entries with their index terms (wire.ScanRequest.Terms)
	linear    bool
	pageBytes int
}

// scanPage is what a scan returns: the entries in sort-key order and,
// when more may follow, the sort key to continue after.
type scanPage struct {
	entries []wire.ScanEntry
	more    bool
	last    []byte
}

// scan runs q over every shard of the map.
func (c *Coordinator) scan(ctx context.Context, q scanQuery) (scanPage, error) {
	if c.cfg.Engine == nil {
		return scanPage{}, fmt.Errorf("%w: this node cannot scan (no engine)", ErrInvalidArgument)
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if q.pageBytes == 0 {
		q.pageBytes = MaxPageBytes
	}
	var page scanPage
	size := 0
	after := q.after
	bad := map[uint64]map[uint64]bool{} // shard -> nodes that failed it
	backoff := 5 * time.Millisecond
	for round := 0; ; round++ {
		cover := c.cfg.Store.Cover()
		if at, gap := coverGap(cover); gap {
			// This node knows a shard's narrower range after a split
			// but not the shard that took the rest: ask the peers, and
			// never scan with part of the ring missing.
			c.learnFromPeers(ctx)
			cover = c.cfg.Store.Cover()
			if _, gap := coverGap(cover); gap {
				select {
				case <-ctx.Done():
					return scanPage{}, fmt.Errorf("%w: scan: no shard known to own token %#x", ErrTimeout, at)
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 100*time.Millisecond)
				continue
			}
		}
		plan := c.planScan(cover, bad, q.linear)
		share := max(q.pageBytes/len(plan), minNodeBytes)
		answers, failed, lastErr := c.scatter(ctx, plan, q, after, q.limit-len(page.entries), share)
		if len(failed) > 0 {
			// A shard may have split since this node learned of it: ask
			// the peers for their replicas' descriptors.
			c.learnFromPeers(ctx)
			for _, f := range failed {
				if bad[f[0]] == nil {
					bad[f[0]] = map[uint64]bool{}
				}
				bad[f[0]][f[1]] = true
			}
			select {
			case <-ctx.Done():
				return scanPage{}, fmt.Errorf("%w: scan: %v", ErrTimeout, lastErr)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 100*time.Millisecond)
			continue
		}
		// bound: the smallest last key of the nodes that stopped early.
		var bound []byte
		more := false
		for _, a := range answers {
			if a.More && (!more || bytes.Compare(a.Last, bound) < 0) {
				bound, more = a.Last, true
			}
		}
		full, leftover := false, false
		mergeAnswers(answers, bound, more, func(e wire.ScanEntry) bool {
			if len(page.entries) >= q.limit {
				full, leftover = true, true
				return false
			}
			if n := len(page.entries); n > 0 && bytes.Equal(page.entries[n-1].SortKey, e.SortKey) {
				return true // defensive: a key served twice
			}
			// Each node keeps to its share but answers one entry at
			// least: together they may hold more than a page.
			n := storage.EntryBytes(e)
			if len(page.entries) > 0 && size+n > q.pageBytes {
				full, leftover = true, true
				return false
			}
			page.entries = append(page.entries, e)
			size += n
			return true
		})
		full = full || len(page.entries) >= q.limit
		switch {
		case full:
			page.more = more || leftover
			if page.more {
				page.last = page.entries[len(page.entries)-1].SortKey
			}
			return page, nil
		case !more:
			return page, nil
		}
		after = bound
		if size >= q.pageBytes || round+1 >= maxRounds || ctx.Err() != nil {
			page.more, page.last = true, bound
			return page, nil
		}
	}
}

// mergeAnswers calls emit with the answers' entries of sort key up to
// bound (all of them if !bounded) in sort-key order, until emit returns
// false.
func mergeAnswers(answers []wire.ScanResult, bound []byte, bounded bool, emit func(wire.ScanEntry) bool) {
	pos := make([]int, len(answers))
	for {
		best := -1
		for i, a := range answers {
			if pos[i] >= len(a.Entries) {
				continue
			}
			sk := a.Entries[pos[i]].SortKey
			if bounded && bytes.Compare(sk, bound) > 0 {
				continue
			}
			if best < 0 || bytes.Compare(sk, answers[best].Entries[pos[best]].SortKey) < 0 {
				best = i
			}
		}
		if best < 0 {
			return
		}
		e := answers[best].Entries[pos[best]]
		pos[best]++
		if !emit(e) {
			return
		}
	}
}

// planScan assigns every shard of the map to one of its replicas that has
// not failed it (bad): this node where it holds one, else a node already
// chosen, else the replica that holds the most shards. For a serializable
// query (!linear), a shard whose queue on this node is long goes to the
// replica with the shortest queue instead (coverQueue), as serializable
// reads do. A shard every replica failed is tried on all of them again.
// coverGap returns the first token no shard of ds owns, ds in token
// order as Store.Cover returns them; gap is false when they own the
// whole ring.
func coverGap(ds []shard.Descriptor) (at uint64, gap bool) {
	return shard.FirstGap(ds, func(d shard.Descriptor) (uint64, uint64) { return d.Start, d.End })
}

func (c *Coordinator) planScan(cover []shard.Descriptor, bad map[uint64]map[uint64]bool, linear bool) map[uint64][]wire.ScanShard {
	return c.planCover(cover, func(id uint64) bool { return c.cfg.Store.Replica(id) != nil }, bad, linear, time.Now())
}

// planCover is planScan over shards; holds reports whether this node
// holds a replica of a shard.
func (c *Coordinator) planCover(shards []shard.Descriptor, holds func(uint64) bool, bad map[uint64]map[uint64]bool, linear bool, now time.Time) map[uint64][]wire.ScanShard {
	held := map[uint64]int{}
	for _, d := range shards {
		for _, n := range d.Replicas {
			held[n]++
		}
	}
	plan := map[uint64][]wire.ScanShard{}
	for _, d := range shards {
		cands := make([]uint64, 0, len(d.Replicas))
		for _, n := range d.Replicas {
			if !bad[d.ID][n] {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			delete(bad, d.ID)
			cands = append(cands, d.Replicas...)
		}
		local := holds(d.ID)
		if !linear && local && slices.Contains(cands, c.cfg.NodeID) {
			if n := c.coverQueue(d, true, now); n != c.cfg.NodeID && slices.Contains(cands, n) {
				plan[n] = append(plan[n], scanShard(d))
				continue
			}
		}
		pick := cands[0]
		score := func(n uint64) int {
			switch {
			case n == c.cfg.NodeID && local:
				return 1 << 30
			case plan[n] != nil:
				return 1<<20 + held[n]
			}
			return held[n]
		}
		for _, n := range cands[1:] {
			if s, p := score(n), score(pick); s > p || s == p && n < pick {
				pick = n
			}
		}
		plan[pick] = append(plan[pick], scanShard(d))
	}
	return plan
}

func scanShard(d shard.Descriptor) wire.ScanShard {
	return wire.ScanShard{ID: d.ID, Epoch: d.Epoch, Start: d.Start, End: d.End}
}

// scatter sends each node of plan its part of q and collects the answers;
// failed lists (shard, node) pairs that were not served.
func (c *Coordinator) scatter(ctx context.Context, plan map[uint64][]wire.ScanShard, q scanQuery, after []byte, limit, share int) ([]wire.ScanResult, [][2]uint64, error) {
	type answer struct {
		node uint64
		res  wire.ScanResult
		err  error
	}
	out := make(chan answer, len(plan))
	var wg sync.WaitGroup
	for node, shards := range plan {
		sq := &wire.ScanRequest{Index: q.index, Shards: shards, From: q.from, After: after, To: q.to,
			Limit: uint64(limit), MaxBytes: uint64(share), KeysOnly: q.keysOnly, Linearizable: q.linear, Terms: q.terms}
		wg.Add(1)
		go func(node uint64) {
			defer wg.Done()
			res, err := c.scanOn(ctx, node, sq)
			out <- answer{node, res, err}
		}(node)
	}
	wg.Wait()
	close(out)
	var answers []wire.ScanResult
	var failed [][2]uint64
	var lastErr error
	for a := range out {
		if a.err != nil {
			lastErr = a.err
			for _, sh := range plan[a.node] {
				failed = append(failed, [2]uint64{sh.ID, a.node})
			}
			continue
		}
		for _, id := range a.res.Failed {
			failed = append(failed, [2]uint64{id, a.node})
			lastErr = fmt.Errorf("node %d could not serve shard %d", a.node, id)
		}
		answers = append(answers, a.res)
	}
	return answers, failed, lastErr
}

// scanOn runs sq on node: in process for this node, else forwarded.
func (c *Coordinator) scanOn(ctx context.Context, node uint64, sq *wire.ScanRequest) (wire.ScanResult, error) {
	if node == c.cfg.NodeID {
		return c.serveScan(ctx, sq)
	}
	// One attempt is bounded, as in onLeader, so a node that hangs costs
	// at most this before its shards are planned on other replicas.
	ctx, cancel := context.WithTimeout(ctx, 2*forwardAttempt)
	defer cancel()
	req := &wire.Request{Kind: wire.KindScan, Sender: c.cfg.NodeID, Command: sq.Marshal()}
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
	}
	resp, err := c.cfg.Transport.Request(ctx, node, req)
	if err != nil {
		return wire.ScanResult{}, err
	}
	if resp.Status != wire.StatusOK {
		return wire.ScanResult{}, statusErr(resp)
	}
	var res wire.ScanResult
	if err := res.Unmarshal(resp.Value); err != nil {
		return wire.ScanResult{}, err
	}
	return res, nil
}

// serveScan runs a scan request on this node's engine.
func (c *Coordinator) serveScan(ctx context.Context, sq *wire.ScanRequest) (wire.ScanResult, error) {
	if c.cfg.Engine == nil {
		return wire.ScanResult{}, errors.New("kv: this node cannot scan (no engine)")
	}
	var res wire.ScanResult
	var served []wire.ScanShard
	for _, sh := range sq.Shards {
		r := c.cfg.Store.Replica(sh.ID)
		if r == nil {
			res.Failed = append(res.Failed, sh.ID)
			continue
		}
		// A replica that has applied nothing (a new one waiting for its
		// first snapshot) holds none of the shard's data yet.
		if d := r.Desc(); d.Epoch != sh.Epoch || d.Start != sh.Start || d.End != sh.End || r.Applied() == 0 {
			res.Failed = append(res.Failed, sh.ID)
			continue
		}
		served = append(served, sh)
	}
	if sq.Linearizable && len(served) > 0 {
		served = c.readIndexAll(ctx, served, &res.Failed)
	}
	snap := c.cfg.Engine.NewSnapshot()
	defer snap.Close()
	// A replica removed before the snapshot was taken may have lost its
	// data in it: check again, after.
	kept := served[:0]
	for _, sh := range served {
		// Nor split: the snapshot may hold another shard's newer writes
		// of the range that left.
		if r := c.cfg.Store.Replica(sh.ID); r != nil && r.Desc().Epoch == sh.Epoch {
			kept = append(kept, sh)
		} else {
			res.Failed = append(res.Failed, sh.ID)
		}
	}
	served = kept
	if len(served) == 0 {
		return res, nil
	}
	sort.Slice(served, func(i, j int) bool { return served[i].Start < served[j].Start })
	keep := func(tok uint64) bool {
		i := sort.Search(len(served), func(i int) bool { return served[i].Start > tok }) - 1
		return i >= 0 && (served[i].End == 0 || tok < served[i].End)
	}
	sctx, cancel := scanContext(ctx)
	defer cancel()
	o := scanOptions(sq, keep)
	o.Ctx = sctx
	out, err := snap.Scan(o)
	if err != nil {
		return wire.ScanResult{}, err
	}
	res.Entries, res.More, res.Last = out.Entries, out.More, out.Last
	return res, nil
}

// scanContext is ctx, ending at scanTimeShare of the time left to its
// deadline (none: ctx).
func scanContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, time.Now().Add(time.Duration(float64(time.Until(dl))*scanTimeShare)))
}

// readIndexAll waits, for each shard, until the local replica has applied
// a read index obtained after the call started; shards that fail are
// appended to failed and left out of the result.
func (c *Coordinator) readIndexAll(ctx context.Context, shards []wire.ScanShard, failed *[]uint64) []wire.ScanShard {
	ok := make([]bool, len(shards))
	var wg sync.WaitGroup
	for i, sh := range shards {
		r := c.cfg.Store.Replica(sh.ID)
		if r == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, forwardAttempt)
			defer cancel()
			_, err := r.ReadIndexForward(actx)
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	var kept []wire.ScanShard
	for i, sh := range shards {
		if ok[i] {
			kept = append(kept, sh)
		} else {
			*failed = append(*failed, sh.ID)
		}
	}
	return kept
}
