package replica

import (
	"context"
	"fmt"
	"io"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// WriteBackup writes the shard's data (every user key, its version and
// value) to w as a wire backup stream, from one engine snapshot: the data
// is exactly the state at the applied index the header gives. The caller
// makes it linearizable by waiting for a read index first. ctx ends a
// long scan early (the stream is then left without its end, which its
// reader detects).
func (r *Replica) WriteBackup(ctx context.Context, w io.Writer, epoch uint64) (wire.BackupHeader, error) {
	s := r.cfg.Engine.NewSnapshot()
	defer s.Close()
	ab, err := s.Get(storage.AppliedKey(r.id))
	if err != nil {
		return wire.BackupHeader{}, err
	}
	as, err := raftlog.UnmarshalAppliedState(ab)
	if err != nil {
		return wire.BackupHeader{}, err
	}
	d, found, err := loadDescriptor(s, r.id)
	if err != nil || !found {
		return wire.BackupHeader{}, fmt.Errorf("replica: shard %d: no descriptor in the snapshot (%v)", r.id, err)
	}
	hdr := wire.BackupHeader{Shard: r.id, TokenStart: d.Start, TokenEnd: d.End, Epoch: epoch, Applied: as.Index}
	bw, err := wire.NewBackupWriter(w, hdr)
	if err != nil {
		return hdr, err
	}
	start, end := storage.DataSpan(d.Start, d.End)
	it, err := s.NewIter(start, end)
	if err != nil {
		return hdr, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return hdr, ctx.Err()
		}
		_, key, err := storage.DecodeDataKey(it.Key())
		if err != nil {
			return hdr, err
		}
		version, terms, data, err := storage.DecodeValueMeta(it.Value())
		if err != nil {
			return hdr, err
		}
		if err := bw.Add(key, version, terms, data); err != nil {
			return hdr, err
		}
	}
	return hdr, bw.Close()
}
