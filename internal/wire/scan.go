package wire

// ScanShard names one shard a scan covers on the receiving node: the
// receiver serves it only if it holds a replica of the shard at this epoch
// and token range.
type ScanShard struct {
	ID, Epoch  uint64
	Start, End uint64 // token range [Start, End), End 0 = 2^64
}

// ScanRequest is the Command of a KindScan request: scan one ordered
// space of the receiver — the key order (Index "") or a secondary index —
// from After (exclusive) or From (inclusive) up to To (exclusive, nil:
// the space's end), keeping the entries whose token falls in one of
// Shards. Sort keys are the user key (key order) or the encoded term
// followed by the key (an index; see internal/storage).
type ScanRequest struct {
	Index  string
	Shards []ScanShard
	From   []byte
	After  []byte // nil: start at From
	To     []byte
	// Limit bounds the entries answered, MaxBytes their keys, terms and
	// values (at least one entry is answered whatever its size).
	Limit, MaxBytes uint64
	// KeysOnly: read no values.
	KeysOnly bool
	// Linearizable: each shard's part waits for a read index first.
	Linearizable bool
	// Terms: a key-order scan with values also answers each object's
	// index terms (ScanEntry.Terms). A node from before the flag ignores
	// it and answers none.
	Terms bool
}

// ScanEntry is one entry of a ScanResult.
type ScanEntry struct {
	// SortKey is the entry's place in the scanned space (the key, or the
	// encoded term and the key).
	SortKey []byte
	Key     []byte
	Term    []byte // the encoded term (index scans)
	Version uint64 // with values only
	Value   []byte
	// Terms are the object's index terms (ScanRequest.Terms).
	Terms []IndexTerm
}

// ScanResult answers a ScanRequest.
type ScanResult struct {
	Entries []ScanEntry
	// More: the scan stopped before To (limit, byte or work budget); Last
	// is then the last sort key it answered or passed over, and every
	// entry of the listed shards up to Last is in Entries.
	More bool
	Last []byte
	// Failed lists the shards the receiver could not serve (no replica,
	// another epoch or range, no read index in time); Entries then hold
	// nothing of them.
	Failed []uint64
}

// Scan versions: a result with index terms (ScanRequest.Terms, which only
// a node that decodes them asks for) is scanV2; everything else scanV1.
const (
	scanV1 = 1
	scanV2 = 2
)

// Bounds a decoder accepts.
const (
	maxScanShards  = 1 << 20
	maxScanEntries = 1 << 20
)

// Marshal encodes s.
func (s *ScanRequest) Marshal() []byte {
	w := writer{b: make([]byte, 0, 64+len(s.From)+len(s.After)+len(s.To)+len(s.Shards)*24)}
	w.u8(scanV1)
	w.str(s.Index)
	w.u64(uint64(len(s.Shards)))
	for _, sh := range s.Shards {
		w.u64(sh.ID)
		w.u64(sh.Epoch)
		w.u64(sh.Start)
		w.u64(sh.End)
	}
	w.bytes(s.From)
	w.optBytes(s.After)
	w.optBytes(s.To)
	w.u64(s.Limit)
	w.u64(s.MaxBytes)
	f := flags(s.KeysOnly, s.Linearizable)
	if s.Terms {
		f |= 4
	}
	w.u8(f)
	return w.b
}

// Unmarshal decodes b into s; slices alias b.
func (s *ScanRequest) Unmarshal(b []byte) error {
	r := reader{b: b}
	if v := r.u8(); v != scanV1 && r.err == nil {
		r.fail("scan version")
	}
	s.Index = r.str()
	n := r.u64()
	if r.err == nil && n > maxScanShards {
		r.fail("too many shards")
	}
	s.Shards = nil
	for i := uint64(0); i < n && r.err == nil; i++ {
		s.Shards = append(s.Shards, ScanShard{ID: r.u64(), Epoch: r.u64(), Start: r.u64(), End: r.u64()})
	}
	s.From = r.bytes()
	s.After = r.optBytes()
	s.To = r.optBytes()
	s.Limit = r.u64()
	s.MaxBytes = r.u64()
	f := r.u8()
	s.KeysOnly, s.Linearizable, s.Terms = f&1 != 0, f&2 != 0, f&4 != 0
	if err := r.done(); err != nil {
		return err
	}
	if s.Index != "" {
		if err := ValidIndexName(s.Index); err != nil {
			r.fail(err.Error())
		}
	}
	return r.err
}

// Marshal encodes s.
func (s *ScanResult) Marshal() []byte {
	n := 16 + len(s.Last)
	for _, e := range s.Entries {
		n += 24 + len(e.SortKey) + len(e.Key) + len(e.Term) + len(e.Value)
	}
	v := uint8(scanV1)
	for _, e := range s.Entries {
		if len(e.Terms) > 0 {
			v = scanV2
			break
		}
	}
	w := writer{b: make([]byte, 0, n)}
	w.u8(v)
	w.u64(uint64(len(s.Entries)))
	for _, e := range s.Entries {
		w.bytes(e.SortKey)
		w.bytes(e.Key)
		w.bytes(e.Term)
		w.u64(e.Version)
		w.bytes(e.Value)
		if v == scanV2 {
			w.b = AppendIndexTerms(w.b, e.Terms)
		}
	}
	w.u8(flags(s.More, false))
	w.bytes(s.Last)
	w.u64(uint64(len(s.Failed)))
	for _, id := range s.Failed {
		w.u64(id)
	}
	return w.b
}

// Unmarshal decodes b into s; slices alias b.
func (s *ScanResult) Unmarshal(b []byte) error {
	r := reader{b: b}
	v := r.u8()
	if v != scanV1 && v != scanV2 && r.err == nil {
		r.fail("scan result version")
	}
	n := r.u64()
	if r.err == nil && n > maxScanEntries {
		r.fail("too many entries")
	}
	s.Entries = nil
	if r.err == nil && n > 0 {
		s.Entries = make([]ScanEntry, 0, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		e := ScanEntry{SortKey: r.bytes(), Key: r.bytes(), Term: r.bytes(), Version: r.u64(), Value: r.bytes()}
		if v == scanV2 && r.err == nil {
			var err error
			if e.Terms, err = r.indexTerms(); err != nil {
				break
			}
		}
		s.Entries = append(s.Entries, e)
	}
	s.More = r.u8()&1 != 0
	s.Last = r.bytes()
	m := r.u64()
	if r.err == nil && m > maxScanShards {
		r.fail("too many shards")
	}
	s.Failed = nil
	for i := uint64(0); i < m && r.err == nil; i++ {
		s.Failed = append(s.Failed, r.u64())
	}
	return r.done()
}

func flags(a, b bool) uint8 {
	var f uint8
	if a {
		f |= 1
	}
	if b {
		f |= 2
	}
	return f
}

// optBytes writes a presence byte, then v if present (nil and empty
// differ).
func (w *writer) optBytes(v []byte) {
	if v == nil {
		w.u8(0)
		return
	}
	w.u8(1)
	w.bytes(v)
}

func (r *reader) optBytes() []byte {
	if r.u8() == 0 || r.err != nil {
		return nil
	}
	v := r.bytes()
	if v == nil && r.err == nil {
		v = []byte{}
	}
	return v
}
