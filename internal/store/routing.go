package store

import (
	"sort"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// Routing (docs/split.md). The node's shard map is every descriptor it
// knows (Descriptors): its replicas' own, the bootstrap map's, those it
// learned. Splits make some of them stale: a node that holds no replica
// of a shard that split still knows the shard's old, wider range until
// something tells it. A token is routed to the known shard with the
// highest start whose range holds it — since ranges only split, a shard
// that starts later and holds the token is the more recent knowledge. A
// token no known range holds (the node learned a shard's narrower range
// but not the new shard yet) goes to the shard starting last before it,
// which refuses it and names the owner (kv's wrong-shard answer).

// routeTable is the known shards sorted by start.
type routeTable struct {
	byStart []shard.Descriptor
}

// maxRouteWalk bounds how many stale wider ranges a lookup steps over.
const maxRouteWalk = 64

// lookup returns the index in byStart of the shard that owns t.
func (rt *routeTable) lookup(t uint64) int {
	i := sort.Search(len(rt.byStart), func(i int) bool { return rt.byStart[i].Start > t }) - 1
	if i < 0 {
		return -1
	}
	for j := i; j >= 0 && i-j < maxRouteWalk; j-- {
		if rt.byStart[j].Contains(t) {
			return j
		}
	}
	return i
}

// routes returns the current table, rebuilding it if the known shards
// changed since it was built.
func (s *Store) routes() *routeTable {
	if rt := s.route.table.Load(); rt != nil && !s.route.dirty.Load() {
		return rt
	}
	s.route.dirty.Store(false)
	ds := s.Descriptors()
	sort.Slice(ds, func(i, j int) bool { return ds[i].Start < ds[j].Start })
	rt := &routeTable{byStart: ds}
	s.route.table.Store(rt)
	return rt
}

// routesChanged marks the table for a rebuild (a split, a learned
// descriptor, a replica's range narrowed by a snapshot).
func (s *Store) routesChanged() { s.route.dirty.Store(true) }

// Route returns this node's current view of the shard that owns token t
// (see above); false only when the node knows no shard at all.
func (s *Store) Route(t uint64) (shard.Descriptor, bool) {
	rt := s.routes()
	i := rt.lookup(t)
	if i < 0 {
		return shard.Descriptor{}, false
	}
	return s.Descriptor(rt.byStart[i].ID)
}

// Cover returns, in token order, the shards that together own the whole
// ring in this node's view: the owner of every token, each once. A stale
// one among them (a shard that split since) is refused where it is
// asked, and the caller learns the newer descriptors.
func (s *Store) Cover() []shard.Descriptor {
	rt := s.routes()
	var out []shard.Descriptor
	t := uint64(0)
	for {
		i := rt.lookup(t)
		if i < 0 {
			return out
		}
		d, _ := s.Descriptor(rt.byStart[i].ID)
		if len(out) == 0 || out[len(out)-1].ID != d.ID {
			out = append(out, d)
		}
		// The owner changes at the next start after t or at d's end.
		next := uint64(0) // 0: the end of the ring
		if d.Contains(t) {
			next = d.End
		}
		if j := sort.Search(len(rt.byStart), func(j int) bool { return rt.byStart[j].Start > t }); j < len(rt.byStart) {
			if st := rt.byStart[j].Start; next == 0 || st < next {
				next = st
			}
		}
		if next == 0 || next <= t {
			return out
		}
		t = next
	}
}

// addSplit is every replica's OnSplit: it opens the new shard's replica
// from the state the split wrote, and lets the shard's leader campaign
// for it at once, so the new half has a leader without waiting for an
// election timeout.
func (s *Store) addSplit(child shard.Descriptor, leader bool) {
	s.mu.Lock()
	if s.mu.replicas[child.ID] != nil {
		s.mu.Unlock()
		return
	}
	cfg := s.replicaConfig(child)
	cfg.Created = true // its first leader wins at once (replica.Config.Created)
	r, err := replica.Open(cfg, false)
	if err != nil {
		s.mu.Unlock()
		// The state is in the engine: the next start opens it.
		s.cfg.Logger.Error("opening the replica of a new shard", "shard", child.ID, "err", err)
		return
	}
	s.mu.replicas[child.ID] = r
	if old, ok := s.mu.known[child.ID]; !ok || old.Epoch < child.Epoch {
		s.mu.known[child.ID] = child.Clone()
	}
	s.mu.Unlock()
	s.routesChanged()
	s.sched.add(child.ID)
	if leader {
		r.Campaign()
	}
}
