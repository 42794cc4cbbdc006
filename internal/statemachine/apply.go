package statemachine

import (
	"errors"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"github.com/cespare/xxhash/v2"
)

// applyCommand executes one write deterministically in round rd. Its
// version is index, the log index of its entry (an entry holds at most one
// command per key).
func (m *Machine) applyCommand(rd *Round, index uint64, cmd *wire.Command) Result {
	res, _ := m.apply(rd, index, cmd)
	return res
}

// apply is applyCommand that also returns the command's fingerprint.
//
// A command whose request id has a record is not executed: a retry (same
// fingerprint) gets the recorded result; another command reusing the id
// gets StatusRequestIDReused, and nothing is written or recorded.
func (m *Machine) apply(rd *Round, index uint64, cmd *wire.Command) (Result, uint64) {
	b := rd.b
	tok := shard.Token(cmd.Key)
	if !m.rng.Load().contains(tok) {
		// The shard split and the key's half is another shard's now (a
		// write proposed before the split, committed after it): nothing
		// is applied or recorded here, so the retry on the right shard
		// applies it once. Every replica applies the split at the same
		// index, so every replica refuses alike.
		return Result{Result: wire.Result{Status: wire.StatusWrongShard}, Index: index}, cmd.Fingerprint()
	}
	var idHash, fp uint64
	if len(cmd.RequestID) > 0 {
		fp = cmd.Fingerprint()
		idHash = xxhash.Sum64(cmd.RequestID)
		b.entry(m.id, index)
		// The index rules out every first attempt without a Pebble read
		// (but for a hash shared with another id); a retry reads its
		// group.
		var buf [4]dedupRef
		for _, ref := range m.dedup.candidates(idHash, buf[:0]) {
			var g []byte
			if ref.index == index {
				g = b.groups[ref.bucket]
			} else if v, err := b.Get(storage.DedupKey(m.id, ref.bucket, ref.index)); err == nil {
				g = v
			} else if !errors.Is(err, storage.ErrNotFound) {
				panic("statemachine: apply read: " + err.Error())
			}
			if rec, ok := findDedupRecord(g, cmd.RequestID); ok {
				recFP, res, err := decodeDedupResult(rec)
				switch {
				case err != nil:
					continue
				case recFP != fp:
					return Result{Result: wire.Result{Status: wire.StatusRequestIDReused}, Index: index}, fp
				}
				return Result{Result: res, Index: index}, fp
			}
		}
	}
	key := storage.DataKey(tok, cmd.Key)
	// An unconditional put's outcome does not depend on the key's current
	// state; only whether it created the key does, and only the replica
	// that answers the write (it holds the proposal's waiter) needs to
	// know that. Other replicas skip looking the version up — with a large
	// key space the read is most of the cost of applying a write — unless
	// the shard holds indexed objects, whose old index entries a write
	// must remove (index.go).
	unconditionalPut := cmd.Op == wire.OpPut && cmd.Cond == wire.CondNone
	answers := unconditionalPut && rd.waiting(cmd.RequestID)
	var curVersion uint64
	var oldTerms []wire.IndexTerm
	var curData []byte // the current value, read only for the history
	history := m.hist.retention > 0
	looked := !unconditionalPut || answers || m.clock.indexed || history
	haveData := false // curData is the current value (nil: absent)
	prevRef := false  // the event refers to the key's event at curVersion for the value
	if looked {
		var known bool
		// The history needs the value replaced, unless the (exact)
		// cache knows it, or knows the key is absent, or knows its
		// version and the history still holds the write of that version
		// (then the event refers to it: see refersBack).
		curVersion, curData, haveData, known = m.versions.get(cmd.Key)
		// On an indexed shard the write also needs the terms it
		// replaces, which the cache may know too.
		termsKnown := !m.clock.indexed
		if known && !termsKnown {
			oldTerms, termsKnown = m.versions.termsOf(cmd.Key)
		}
		if history && known && curVersion != 0 && !haveData && termsKnown && m.refersBack(index, curVersion) {
			prevRef = true
		} else if !known || !termsKnown || (history && curVersion != 0 && !haveData) {
			cur, err := b.Get(key)
			switch {
			case err == nil:
				if curVersion, oldTerms, curData, err = storage.DecodeValueMeta(cur); err != nil {
					panic("statemachine: apply read: " + err.Error())
				}
			case !errors.Is(err, storage.ErrNotFound):
				panic("statemachine: apply read: " + err.Error())
			default:
				curVersion, curData = 0, nil
			}
			haveData = true
		}
	}
	exists := curVersion != 0
	res := wire.Result{Status: wire.StatusOK}
	created := false
	switch {
	case cmd.Cond == wire.CondIfMatch && (!exists || curVersion != cmd.Version):
		res.Status = wire.StatusPreconditionFailed
	case cmd.Cond == wire.CondIfAbsent && exists:
		res.Status = wire.StatusPreconditionFailed
	case cmd.Op == wire.OpPut:
		b.Set(key, storage.EncodeValueMeta(index, cmd.Index, cmd.Value))
		m.maintainIndex(b, tok, cmd, oldTerms, exists, false)
		if history {
			m.recordEvent(rd, index, &Event{Key: cmd.Key, Value: cmd.Value, PrevVersion: curVersion, PrevValue: curData, Terms: cmd.Index, PrevTerms: oldTerms, prevRef: prevRef && exists})
		}
		res.Version = index
		created = !exists && (answers || !unconditionalPut)
		// Every replica knows it for a conditional put, so the dedup
		// record (replicated state) holds it; for an unconditional one it
		// is the answer's alone, and a retry answered from the record
		// reports the key as not created.
		res.Created = created && !unconditionalPut
		curVersion = index
	case cmd.Op == wire.OpDelete && exists:
		b.Delete(key)
		m.maintainIndex(b, tok, cmd, oldTerms, true, true)
		if history {
			m.recordEvent(rd, index, &Event{Delete: true, Key: cmd.Key, PrevVersion: curVersion, PrevValue: curData, PrevTerms: oldTerms, prevRef: prevRef})
		}
		// A delete's version is its own index: the revision at which
		// the key stopped existing (the etcd API reports it).
		res.Version = index
		curVersion = 0
	default:
		res.Status = wire.StatusNotFound
	}
	// The key's value now: the put's, none after a delete, unchanged
	// otherwise (curData, when it was read or cached).
	switch {
	case res.Status != wire.StatusOK:
	case cmd.Op == wire.OpPut:
		curData, haveData = cmd.Value, true
	default:
		curData, haveData = nil, true
	}
	// And its index terms: the put's, none after a delete, unchanged
	// otherwise (oldTerms, read or cached: a shard without indexed
	// objects has none, and an indexed one always looks them up).
	curTerms := oldTerms
	switch {
	case res.Status != wire.StatusOK:
	case cmd.Op == wire.OpPut:
		curTerms = cmd.Index
	default:
		curTerms = nil
	}
	if looked {
		m.versions.put(cmd.Key, curVersion, curData, haveData, curTerms)
	} else {
		// A replica that did not need the version does not cache it: an
		// entry it holds is kept current, and a missing one costs a
		// Pebble read only where it is needed.
		m.versions.update(cmd.Key, curVersion, curData, haveData, curTerms)
	}
	if len(cmd.RequestID) > 0 {
		bucket := m.dedupBucket(m.clock.now)
		g := appendDedupRecord(b.groups[bucket], cmd.RequestID, encodeDedupResult(fp, res))
		if b.groups == nil {
			b.groups = map[uint64][]byte{}
		}
		b.groups[bucket] = g
		m.dedup.add(bucket, idHash, index)
	}
	answer := res
	answer.Created = created
	return Result{Result: answer, Index: index}, fp
}

// pruneDedup drops the dedup buckets whose every record is older than
// DedupTTL by the shard clock: the rule depends on the log only, so every
// replica drops the same records at the same entry. (A replica that
// restarted repeats a deletion once; that changes nothing.)
func (m *Machine) pruneDedup(b *applyBatch) {
	ttl := uint64(m.cfg.DedupTTL)
	if m.clock.now <= ttl {
		return
	}
	limit := m.dedupBucket(m.clock.now - ttl)
	if limit <= m.dedupFloor {
		return
	}
	b.DeleteRange(storage.DedupBucketStart(m.id, 0), storage.DedupBucketStart(m.id, limit))
	b.dropGroupsBelow(limit)
	m.dedupFloor = limit
	m.dedup.dropBelow(limit)
}
