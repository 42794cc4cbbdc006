package replica

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// peerState is what a replica keeps about snapshots in flight and about
// the messages it refused.
type peerState struct {
	out outgoing
	// rcv and nextRcv are guarded by Replica.in's mutex: received
	// snapshots spilled to sstables, waiting for raft to take them.
	rcv     map[uint64]*received
	nextRcv uint64
	// dropped counts messages refused before raft could step them.
	dropped atomic.Uint64
}

// received is a snapshot whose data is staged in sstables and whose
// MsgSnap is in the inbox.
type received struct {
	files []string
	md    raftpb.SnapshotMetadata
	// stepped: a round has drained the MsgSnap; if that round's Ready did
	// not take the snapshot, raft refused it.
	stepped bool
	done    chan bool // true: installed; false: refused or dropped
}

func (rc *received) discard(eng *storage.Engine) {
	for _, f := range rc.files {
		_ = eng.RemoveStaged(f)
	}
	rc.done <- false
}

// DroppedMessages counts the messages this replica refused to step
// (heartbeats and acknowledgements naming log positions it cannot have,
// snapshots it did not receive).
func (r *Replica) DroppedMessages() uint64 { return r.peer.dropped.Load() }

// ReceiveSnapshot spills an incoming snapshot's data, read chunk by chunk
// from next until io.EOF, into sstables in the engine's staging folder,
// checking that keys are ordered and inside the shard; then hands the
// MsgSnap to raft and waits until raft has taken it (true: installed) or
// refused it (false), or ctx ends. On any error nothing is installed and
// the files are removed. m.Snapshot.Data is ignored. Memory use is one
// chunk and the sstable writers' blocks, whatever the snapshot's size.
func (r *Replica) ReceiveSnapshot(ctx context.Context, m raftpb.Message, next func() ([]byte, error)) (bool, error) {
	if m.Type != raftpb.MsgSnap || m.Snapshot == nil || m.Snapshot.Metadata.Index == 0 {
		return false, fmt.Errorf("%w: not a snapshot message", ErrBadSnapshot)
	}
	if r.stopped.Load() {
		return false, ErrStopped
	}
	eng := r.cfg.Engine
	base := filepath.Join(eng.StagingDir(), fmt.Sprintf("%d-%d-%016x", r.id, m.Snapshot.Metadata.Index, rand.Uint64()))
	spans := spansOf(r.Desc())
	ws := make([]*storage.SSTWriter, 0, len(spans))
	abort := func() {
		for _, w := range ws {
			w.Abort()
		}
	}
	for i, sp := range spans {
		w, err := eng.NewSSTWriter(fmt.Sprintf("%s-%d.sst", base, i))
		if err != nil {
			abort()
			return false, err
		}
		ws = append(ws, w)
		if err := w.DeleteRange(sp[0], sp[1]); err != nil {
			abort()
			return false, err
		}
	}
	var prev []byte
	cur := 0
	for {
		chunk, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			abort()
			return false, err
		}
		for len(chunk) > 0 {
			k, v, rest, err := nextRecord(chunk)
			if err != nil {
				abort()
				return false, err
			}
			chunk = rest
			if prev != nil && bytes.Compare(k, prev) <= 0 {
				abort()
				return false, fmt.Errorf("%w: key %x out of order", ErrBadSnapshot, k)
			}
			for cur < len(spans) && bytes.Compare(k, spans[cur][1]) >= 0 {
				cur++
			}
			if cur == len(spans) || bytes.Compare(k, spans[cur][0]) < 0 {
				abort()
				return false, fmt.Errorf("%w: key %x outside shard %d", ErrBadSnapshot, k, r.id)
			}
			if err := ws[cur].Set(k, v); err != nil {
				abort()
				return false, err
			}
			prev = append(prev[:0], k...)
		}
	}
	rc := &received{md: m.Snapshot.Metadata, done: make(chan bool, 1)}
	for _, w := range ws {
		if err := w.Finish(); err != nil {
			abort()
			return false, err
		}
		rc.files = append(rc.files, w.Path())
	}
	sn := *m.Snapshot
	r.in.Lock()
	if r.stopped.Load() {
		r.in.Unlock()
		abort()
		return false, ErrStopped
	}
	if r.peer.rcv == nil {
		r.peer.rcv = map[uint64]*received{}
	}
	r.peer.nextRcv++
	id := r.peer.nextRcv
	r.peer.rcv[id] = rc
	sn.Data = snapHeader(snapReceived, id)
	m.Snapshot = &sn
	r.in.msgs = append(r.in.msgs, m)
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
	select {
	case ok := <-rc.done:
		return ok, nil
	case <-ctx.Done():
		// The round that drains it still installs or removes it.
		return false, ctx.Err()
	}
}

// settleSnapshotsLocked runs at the start of every round: a received
// snapshot whose MsgSnap an earlier round stepped without its Ready taking
// it was refused by raft, and its files go. Those still in the inbox are
// marked: this round drains them.
func (r *Replica) settleSnapshotsLocked() {
	r.in.Lock()
	defer r.in.Unlock()
	for id, rc := range r.peer.rcv {
		if rc.stepped {
			delete(r.peer.rcv, id)
			rc.discard(r.cfg.Engine)
		} else {
			rc.stepped = true
		}
	}
}

// closeSnapshots releases every pinned engine snapshot and staged file
// (the replica is stopping).
func (r *Replica) closeSnapshots() {
	r.peer.out.closeAll()
	r.in.Lock()
	defer r.in.Unlock()
	for id, rc := range r.peer.rcv {
		delete(r.peer.rcv, id)
		rc.discard(r.cfg.Engine)
	}
}

// stageSnapshot installs the snapshot raft accepted (step 1 of the
// contract, before b commits). The received sstables, plus two small ones
// holding the applied state, the HardState, the truncated state and the
// removal of the whole raft log, are ingested in one atomic step: after a
// crash the shard is either wholly at the snapshot's index or wholly at
// its old state, never a mix. The ingested HardState commits the
// snapshot's index; b's own writes (the log position again, the entries
// after the snapshot, the HardState with raft's commit index) commit
// afterwards.
func (r *Replica) stageSnapshot(b *storage.Batch, snap raftpb.Snapshot, hs raftpb.HardState) error {
	id, ok := parseSnapHeader(snap.Data, snapReceived)
	r.in.Lock()
	rc := r.peer.rcv[id]
	delete(r.peer.rcv, id)
	r.in.Unlock()
	if !ok || rc == nil {
		return fmt.Errorf("%w: raft accepted a snapshot that was not received (%x)", ErrNoSnapshot, snap.Data)
	}
	md := snap.Metadata
	if raft.IsEmptyHardState(hs) {
		hs, _, _ = r.log.InitialState()
	}
	// The ingestion ends the log at the snapshot's index; entries after it
	// (and the commit index that covers them) are b's, which commits
	// later. A commit index past the snapshot's here would, after a kill
	// in between, be past the end of the log: raft refuses to start.
	// (Raft only takes a snapshot past its commit index, so the commit
	// index never moves back.)
	hs.Commit = md.Index
	hsb, err := hs.Marshal()
	if err != nil {
		rc.discard(r.cfg.Engine)
		return err
	}
	eng := r.cfg.Engine
	base := filepath.Join(eng.StagingDir(), fmt.Sprintf("%d-%d-%016x", r.id, md.Index, rand.Uint64()))
	files := append([]string(nil), rc.files...)
	defer func() {
		for _, f := range files {
			_ = eng.RemoveStaged(f)
		}
	}()
	as := raftlog.AppliedState{Index: md.Index, Term: md.Term, ConfState: md.ConfState}
	aw, err := eng.NewSSTWriter(base + "-applied.sst")
	if err != nil {
		rc.done <- false
		return err
	}
	files = append(files, aw.Path())
	if err := aw.Set(storage.AppliedKey(r.id), as.Marshal()); err != nil {
		aw.Abort()
		rc.done <- false
		return err
	}
	if err := aw.Finish(); err != nil {
		rc.done <- false
		return err
	}
	lw, err := eng.NewSSTWriter(base + "-raft.sst")
	if err != nil {
		rc.done <- false
		return err
	}
	files = append(files, lw.Path())
	for _, err := range []error{
		lw.Set(storage.HardStateKey(r.id), hsb),
		lw.DeleteRange(storage.LogKey(r.id, 0), storage.LogKey(r.id, ^uint64(0))),
		lw.Set(storage.TruncatedKey(r.id), raftlog.MarshalTruncated(md.Index, md.Term)),
		lw.Finish(),
	} {
		if err != nil {
			lw.Abort()
			rc.done <- false
			return err
		}
	}
	// The replica's range before the snapshot: it holds the new one (a
	// range only ever narrows, by a split the snapshot may carry).
	d := r.Desc()
	if err := eng.IngestDerived(files, d.Start, d.End); err != nil { // data and its derived indexes
		rc.done <- false
		return err
	}
	rc.done <- true
	return nil
}
