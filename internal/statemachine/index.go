package statemachine

import (
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Secondary indexes and the key order (docs/indexes.md). A write stages,
// in its round's batch — so in the same Pebble batch as the object — the
// derived entries of the object's new state and the removal of those of
// its old state that the new one does not keep: the key-order entry
// 0x04|key and one 0x05 entry per index term. The object's terms are
// stored with it (storage.EncodeValueMeta), so a later overwrite or delete
// knows which entries to remove, and storage.Engine.RebuildDerived can
// rebuild them all from the data alone.
//
// Removing old entries needs the old terms, so a write reads the key's
// current value — except an unconditional put on a replica that does not
// answer it, which otherwise skips that read. It may still skip it while
// no write to the shard has ever carried index terms: the shard's
// "indexed" flag (stored with the shard clock, so replicated and carried
// by snapshots) says when one has, and from then on every write reads.
// A shard created by a split must take its parent's flag.

// maintainIndex stages the derived-entry writes of cmd on the object at
// token tok, which had the index terms old (existed: it existed; a blind
// put on an unindexed shard passes false, its old object having no terms).
func (m *Machine) maintainIndex(b *applyBatch, tok uint64, cmd *wire.Command, old []wire.IndexTerm, existed, deleted bool) {
	var terms []wire.IndexTerm
	if !deleted {
		terms = cmd.Index
		if len(terms) > 0 {
			m.clock.indexed = true
		}
	}
	storage.DerivedWrites(tok, cmd.Key, old, existed, terms, deleted, b.Delete, b.Set)
}

// Indexed reports whether some write to the shard carried index terms.
func (m *Machine) Indexed() bool { return m.clock.indexed }
