package httpapi

import (
	"bytes"
	"context"
	"sort"

	"github.com/cairn-db/cairn/internal/kv"
)

// Head answers from the fake's data without counting a read of the value.
func (f *fakeBackend) Head(ctx context.Context, key []byte, o kv.ReadOptions) (kv.Meta, error) {
	if err := f.wait(ctx); err != nil {
		return kv.Meta{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastR = o
	f.heads++
	v, ok := f.data[string(key)]
	if !ok {
		return kv.Meta{}, kv.ErrNotFound
	}
	return kv.Meta{Version: v.Version, Size: len(v.Data), Index: v.Index}, nil
}

// List lists the fake's keys in order (the coordinator's bounds apply).
func (f *fakeBackend) List(ctx context.Context, o kv.ListOptions) (kv.ListPage, error) {
	if err := f.wait(ctx); err != nil {
		return kv.ListPage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastList = o
	var keys []string
	for k := range f.data {
		kb := []byte(k)
		if bytes.HasPrefix(kb, o.Prefix) && bytes.Compare(kb, o.Start) >= 0 && (o.End == nil || bytes.Compare(kb, o.End) < 0) &&
			(o.After == nil || bytes.Compare(kb, o.After) > 0) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	limit := o.Limit
	if limit == 0 {
		limit = kv.DefaultListLimit
	}
	var p kv.ListPage
	for i, k := range keys {
		if i == limit {
			p.More, p.Last = true, []byte(keys[i-1])
			break
		}
		e := kv.Entry{Key: []byte(k)}
		if !o.KeysOnly {
			e.Version, e.Value = f.data[k].Version, f.data[k].Data
		}
		p.Entries = append(p.Entries, e)
	}
	return p, nil
}

// IndexQuery answers exact and range queries over the fake's terms
// (byte order of the sort encodings), without paging.
func (f *fakeBackend) IndexQuery(ctx context.Context, o kv.IndexQueryOptions) (kv.IndexPage, error) {
	if err := f.wait(ctx); err != nil {
		return kv.IndexPage{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastIndex = o
	var p kv.IndexPage
	for k, v := range f.data {
		for _, t := range v.Index {
			if t.Name == o.Name && bytes.Compare(t.Term, o.Start) >= 0 && bytes.Compare(t.Term, o.End) <= 0 {
				p.Entries = append(p.Entries, kv.IndexEntry{Key: []byte(k), Term: t})
			}
		}
	}
	sort.Slice(p.Entries, func(i, j int) bool {
		if c := bytes.Compare(p.Entries[i].Term.Term, p.Entries[j].Term.Term); c != 0 {
			return c < 0
		}
		return bytes.Compare(p.Entries[i].Key, p.Entries[j].Key) < 0
	})
	return p, nil
}
