package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// ListOptions of List. Keys are listed in byte order, from the larger of
// Prefix and Start (inclusive) to the smaller of Prefix's end and End
// (exclusive); all empty: every key.
type ListOptions struct {
	Prefix, Start, End []byte
	// Limit bounds the page's entries: 0 is DefaultListLimit, at most
	// MaxListLimit.
	Limit int
	// After continues a listing: the page starts after this key (the Last
	// of the previous page). Nil: from the start.
	After []byte
	// KeysOnly: the entries carry no value nor version.
	KeysOnly bool
	// Terms: the entries carry their objects' index terms too (not with
	// KeysOnly). Nodes from before this option answer none.
	Terms bool
	// Consistency: Linearizable (the default) makes each shard's part wait
	// for a read index, so the page holds every write acknowledged before
	// the request; Serializable reads the chosen replicas' applied state.
	Consistency Consistency
}

// Entry is one object of a listing.
type Entry struct {
	Key     []byte
	Version uint64
	Value   []byte
	Terms   []wire.IndexTerm // ListOptions.Terms
}

// ListPage is one page of a listing. More: more keys may follow; Last is
// then the key to continue after (ListOptions.After).
type ListPage struct {
	Entries []Entry
	More    bool
	Last    []byte
}

// List returns one page of keys in order, scattered over every shard and
// merged. ErrInvalidArgument for a bad limit or an After outside the
// listed range.
func (c *Coordinator) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	limit, err := pageLimit(opts.Limit)
	if err != nil {
		return ListPage{}, err
	}
	from, to := opts.Start, opts.End
	if len(opts.Prefix) > 0 {
		if bytes.Compare(opts.Prefix, from) > 0 {
			from = opts.Prefix
		}
		if pe := storage.PrefixEnd(opts.Prefix); pe != nil && (to == nil || bytes.Compare(pe, to) < 0) {
			to = pe
		}
	}
	if from == nil {
		from = []byte{}
	}
	if opts.After != nil && (bytes.Compare(opts.After, from) < 0 || to != nil && bytes.Compare(opts.After, to) >= 0) {
		return ListPage{}, fmt.Errorf("%w: the continuation is outside the listed range", ErrInvalidArgument)
	}
	p, err := c.scan(ctx, scanQuery{from: from, to: to, after: opts.After, limit: limit,
		keysOnly: opts.KeysOnly, terms: opts.Terms && !opts.KeysOnly, linear: opts.Consistency == Linearizable})
	if err != nil {
		return ListPage{}, err
	}
	out := ListPage{More: p.more, Last: p.last, Entries: make([]Entry, 0, len(p.entries))}
	for _, e := range p.entries {
		out.Entries = append(out.Entries, Entry{Key: e.Key, Version: e.Version, Value: e.Value, Terms: e.Terms})
	}
	return out, nil
}

// IndexQueryOptions of IndexQuery: the objects whose term in index Name
// is in [Start, End] (inclusive, in the index's order: integer order for
// _int), in (term, key) order. Start and End are sort encodings
// (wire.ParseIndexTerm); an exact query has Start equal to End.
type IndexQueryOptions struct {
	Name       string
	Start, End []byte
	// Limit as in ListOptions.
	Limit int
	// After continues a query: the Last of the previous page.
	After       []byte
	Consistency Consistency
}

// IndexEntry is one match of an index query.
type IndexEntry struct {
	Key  []byte
	Term wire.IndexTerm
}

// IndexPage is one page of an index query; More and Last as in ListPage.
type IndexPage struct {
	Entries []IndexEntry
	More    bool
	Last    []byte
}

// IndexQuery returns one page of the objects matching a secondary-index
// query. ErrInvalidArgument for a bad name, limit, range or continuation.
func (c *Coordinator) IndexQuery(ctx context.Context, opts IndexQueryOptions) (IndexPage, error) {
	limit, err := pageLimit(opts.Limit)
	if err != nil {
		return IndexPage{}, err
	}
	if err := wire.ValidIndexName(opts.Name); err != nil {
		return IndexPage{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	for _, t := range [][]byte{opts.Start, opts.End} {
		if _, err := wire.NormalizeIndex([]wire.IndexTerm{{Name: opts.Name, Term: t}}); err != nil {
			return IndexPage{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
	}
	from := storage.AppendTerm(nil, opts.Name, opts.Start)
	to := storage.PrefixEnd(storage.AppendTerm(nil, opts.Name, opts.End))
	if to != nil && bytes.Compare(from, to) >= 0 {
		return IndexPage{}, fmt.Errorf("%w: the range's start is after its end", ErrInvalidArgument)
	}
	if opts.After != nil {
		if _, _, err := storage.SplitIndexSortKey(opts.Name, opts.After); err != nil ||
			bytes.Compare(opts.After, from) < 0 || to != nil && bytes.Compare(opts.After, to) >= 0 {
			return IndexPage{}, fmt.Errorf("%w: the continuation does not belong to this query", ErrInvalidArgument)
		}
	}
	p, err := c.scan(ctx, scanQuery{index: opts.Name, from: from, to: to, after: opts.After, limit: limit,
		keysOnly: true, linear: opts.Consistency == Linearizable})
	if err != nil {
		return IndexPage{}, err
	}
	out := IndexPage{More: p.more, Last: p.last, Entries: make([]IndexEntry, 0, len(p.entries))}
	for _, e := range p.entries {
		out.Entries = append(out.Entries, IndexEntry{Key: e.Key, Term: wire.IndexTerm{Name: opts.Name, Term: e.Term}})
	}
	return out, nil
}

func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultListLimit, nil
	case n < 0 || n > MaxListLimit:
		return 0, fmt.Errorf("%w: limit %d: want 1 to %d", ErrInvalidArgument, n, MaxListLimit)
	}
	return n, nil
}

// scanOptions is the storage scan of a scan request.
func scanOptions(sq *wire.ScanRequest, keep func(uint64) bool) storage.ScanOptions {
	limit := int(min(sq.Limit, MaxListLimit))
	return storage.ScanOptions{Index: sq.Index, From: sq.From, After: sq.After, To: sq.To, Keep: keep,
		Limit: max(limit, 1), MaxBytes: int(min(sq.MaxBytes, MaxPageBytes)), MaxExamined: maxExamined,
		Values: !sq.KeysOnly, Terms: sq.Terms}
}
