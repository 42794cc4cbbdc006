package etcdapi

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// maxRangeBytes bounds the keys and values one Range (or a DeleteRange
// with prev_kv) gathers: etcd answers a range in one message, and Cairn
// never holds an unbounded answer. A larger range needs a limit.
const maxRangeBytes = 64 << 20

// errRangeTooLarge is the answer past maxRangeBytes.
var errRangeTooLarge = status.Error(codes.ResourceExhausted,
	"cairn: the range holds more than 64 MiB of keys and values; ask for fewer keys (limit, keys_only) and page with the last key (see docs/etcd-api.md)")

// span is the key range a request names: [from, to), to nil for no end.
func span(key, rangeEnd []byte) (from, to []byte) {
	from = key
	if !bytes.Equal(rangeEnd, []byte{0}) {
		to = rangeEnd
	}
	return from, to
}

// scanRange calls fn for every key of [from, to) in key order, a page at
// a time, until fn returns false.
func (s *Server) scanRange(ctx context.Context, from, to []byte, keysOnly bool, cons kv.Consistency, fn func(kv.Entry) bool) error {
	if to != nil && bytes.Compare(from, to) >= 0 {
		return nil
	}
	// With values, the keys' index terms too: a key's lease is one.
	opts := kv.ListOptions{Start: from, End: to, Limit: kv.MaxListLimit, KeysOnly: keysOnly, Terms: !keysOnly, Consistency: cons}
	for {
		page, err := s.b.List(ctx, opts)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if !fn(e) {
				return nil
			}
		}
		if !page.More {
			return nil
		}
		opts.After = page.Last
	}
}

// rangeMany serves a Range over several keys: scattered over the shards
// and merged in key order by the coordinator, a page at a time.
func (s *Server) rangeMany(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	cons := kv.Linearizable
	if r.Serializable {
		cons = kv.Serializable
	}
	from, to := span(r.Key, r.RangeEnd)
	// Sorted by key ascending is the order keys come in; any other order
	// needs the whole range first, then the limit.
	natural := r.SortTarget == pb.RangeRequest_KEY && r.SortOrder != pb.RangeRequest_DESCEND
	limit := int(r.Limit)
	var (
		kvs   []*mvccpb.KeyValue
		count int64
		size  int
		top   uint64
		big   bool
		// cut: the key one past the limit, after which the keys are
		// only counted, without their values.
		cut []byte
	)
	// Sorting by value needs the values, also when keys_only drops them
	// from the answer (after the sort, as etcd does). So do the revision
	// filters and the sorts by revision: the listing tells a key's
	// version only with its value.
	byRevision := r.SortTarget == pb.RangeRequest_MOD || r.SortTarget == pb.RangeRequest_CREATE ||
		r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
	needValues := r.SortTarget == pb.RangeRequest_VALUE || byRevision
	err := s.scanRange(ctx, from, to, (r.KeysOnly && !needValues) || r.CountOnly, cons, func(e kv.Entry) bool {
		count++
		top = max(top, e.Version)
		if r.CountOnly {
			return true
		}
		if !revisionFilters(r, int64(e.Version)) {
			return true
		}
		// keys_only keeps a value only to sort by it.
		out := keyValue(e.Key, kv.Value{Data: e.Value, Version: e.Version, Index: e.Terms}, r.KeysOnly && r.SortTarget != pb.RangeRequest_VALUE)
		if size += len(out.Key) + len(out.Value); size > maxRangeBytes {
			big = true
			return false
		}
		kvs = append(kvs, out)
		// One past the limit tells whether the limit cut the answer.
		if natural && limit > 0 && len(kvs) > limit {
			cut = e.Key
			return false
		}
		return true
	})
	if err == nil && cut != nil {
		err = s.scanRange(ctx, append(slices.Clone(cut), 0), to, true, cons, func(kv.Entry) bool {
			count++
			return true
		})
	}
	if err != nil {
		return nil, grpcError(err)
	}
	if big {
		return nil, errRangeTooLarge
	}
	if !natural {
		sortKVs(kvs, r.SortTarget, r.SortOrder)
	}
	if count == 0 {
		top = s.emptyRevision(ctx, r.Key, r.RangeEnd)
	}
	resp := &pb.RangeResponse{Header: s.header(top), Count: count}
	if r.CountOnly {
		return resp, nil
	}
	// more: the limit cut the answer (as in etcd; keys the revision
	// filters dropped do not count). count is every key of the range,
	// before the filters.
	if limit > 0 && len(kvs) > limit {
		kvs, resp.More = kvs[:limit], true
	}
	if r.KeysOnly && needValues {
		for _, e := range kvs {
			e.Value = nil
		}
	}
	resp.Kvs = kvs
	return resp, nil
}

// sortKVs orders kvs as a Range asks (etcd's targets and orders).
func sortKVs(kvs []*mvccpb.KeyValue, target pb.RangeRequest_SortTarget, order pb.RangeRequest_SortOrder) {
	less := func(a, b *mvccpb.KeyValue) int {
		switch target {
		case pb.RangeRequest_VERSION:
			return cmpInt(a.Version, b.Version)
		case pb.RangeRequest_CREATE:
			return cmpInt(a.CreateRevision, b.CreateRevision)
		case pb.RangeRequest_MOD:
			return cmpInt(a.ModRevision, b.ModRevision)
		case pb.RangeRequest_VALUE:
			return bytes.Compare(a.Value, b.Value)
		}
		return bytes.Compare(a.Key, b.Key)
	}
	sort.SliceStable(kvs, func(i, j int) bool {
		c := less(kvs[i], kvs[j])
		if order == pb.RangeRequest_DESCEND {
			return c > 0
		}
		return c < 0
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// deleteMany serves a DeleteRange over several keys: each key of the
// range is deleted on its own (the range is not deleted atomically; see
// docs/etcd-api.md), with the value it held when prev_kv asks.
func (s *Server) deleteMany(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	from, to := span(r.Key, r.RangeEnd)
	resp := &pb.DeleteRangeResponse{}
	if r.PrevKv {
		// The answer would hold every deleted value: refuse a range past
		// the bound before deleting anything (errRangeTooLarge tells the
		// client to page; an error after some deletes would leave it not
		// knowing which keys went).
		if err := s.fitsAnswer(ctx, from, to); err != nil {
			return nil, err
		}
	}
	var (
		top  uint64
		size int
		err  error
	)
	scanErr := s.scanRange(ctx, from, to, !r.PrevKv, kv.Linearizable, func(e kv.Entry) bool {
		opts := kv.WriteOptions{}
		if r.PrevKv {
			// The value reported is the one deleted: delete only that
			// version (another write in between keeps the key).
			opts = kv.WriteOptions{Cond: kv.CondIfMatch, Version: e.Version}
		}
		var ver uint64
		ver, err = s.b.Delete(ctx, e.Key, opts)
		switch {
		case errors.Is(err, kv.ErrNotFound), errors.Is(err, kv.ErrPreconditionFailed):
			err = nil // gone or rewritten since the listing: not this call's delete
			return true
		case err != nil:
			return false
		}
		top = max(top, ver)
		resp.Deleted++
		if r.PrevKv {
			if size += len(e.Key) + len(e.Value); size > maxRangeBytes {
				err = errRangeTooLarge
				return false
			}
			resp.PrevKvs = append(resp.PrevKvs, keyValue(e.Key, kv.Value{Data: e.Value, Version: e.Version, Index: e.Terms}, false))
		}
		return true
	})
	if scanErr != nil {
		return nil, grpcError(scanErr)
	}
	if err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			return nil, err
		}
		return nil, grpcError(err)
	}
	if resp.Deleted == 0 {
		top = s.emptyRevision(ctx, r.Key, r.RangeEnd)
	}
	resp.Header = s.header(top)
	return resp, nil
}

// fitsAnswer reads the keys and values of [from, to) and returns
// errRangeTooLarge if they hold more than an answer may.
func (s *Server) fitsAnswer(ctx context.Context, from, to []byte) error {
	size := 0
	err := s.scanRange(ctx, from, to, false, kv.Linearizable, func(e kv.Entry) bool {
		size += len(e.Key) + len(e.Value)
		return size <= maxRangeBytes
	})
	switch {
	case err != nil:
		return grpcError(err)
	case size > maxRangeBytes:
		return errRangeTooLarge
	}
	return nil
}

// emptyRevision is the header revision of a call over the range [key,
// end) that found no key: the highest current revision of the shards
// the range spans (those this node cannot ask count nothing). With 0, a
// client that lists an empty range and then watches it from the
// answer's revision + 1, as etcd's clients do, would be answered
// "compacted" at every try; from this revision + 1 it is not (no
// shard's history begins above its current revision).
func (s *Server) emptyRevision(ctx context.Context, key, end []byte) uint64 {
	if len(key) == 0 {
		key = []byte{0} // etcd's reading: the smallest key
	}
	var top uint64
	for _, id := range s.b.WatchShards(key, end) {
		if rev, err := s.b.ShardRevision(ctx, id); err == nil {
			top = max(top, rev)
		}
	}
	return top
}
