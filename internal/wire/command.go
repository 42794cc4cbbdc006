package wire

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Op is the kind of a write command.
type Op uint8

// Write operations.
const (
	OpPut    Op = 1
	OpDelete Op = 2
)

// Cond is the condition of a write.
type Cond uint8

// Conditions.
const (
	CondNone     Cond = 0
	CondIfMatch  Cond = 1 // key exists with version == Version
	CondIfAbsent Cond = 2 // key does not exist
)

// MaxRequestID is the longest request id accepted.
const MaxRequestID = 32

// Command is one write, proposed in a Raft entry. It carries no time:
// dedup records age by the shard clock, which only the entries' leader
// stamps move (see internal/statemachine).
type Command struct {
	RequestID []byte
	Op        Op
	Cond      Cond
	Version   uint64 // for CondIfMatch
	Key       []byte
	Value     []byte
	// Index holds a put's secondary-index terms, in NormalizeIndex's
	// canonical order (none: the object is in no index).
	Index []IndexTerm
}

// Command encodings: commandV1 also held the proposer's wall clock (read
// and ignored, for logs written by an earlier Cairn); commandV2 does not;
// commandV3 is commandV2 followed by the index terms (written only for a
// command that has some, so other commands encode as before).
const (
	commandV1 = 1
	commandV2 = 3
	commandV3 = 5
)

// Fingerprint identifies what c does — its operation, condition, compared
// version, key and value, but not its request id or time — so a retry of
// a write can be told apart from another write that reuses its request
// id. Two commands with equal fingerprints are the same write (up to a
// 2^-64 chance).
//
// A command with index terms hashes them too, after the value's length:
// its first byte has the top bit set, so its fingerprint never equals one
// of a command without terms by construction, and the fingerprints of
// commands without terms are what they were before indexes existed.
func (c *Command) Fingerprint() uint64 {
	var h xxhash.Digest
	h.Reset()
	var hdr [2 + 8 + binary.MaxVarintLen64]byte
	hdr[0], hdr[1] = byte(c.Op), byte(c.Cond)
	if len(c.Index) > 0 {
		hdr[0] |= 0x80
	}
	binary.BigEndian.PutUint64(hdr[2:10], c.Version)
	n := 10 + binary.PutUvarint(hdr[10:], uint64(len(c.Key)))
	_, _ = h.Write(hdr[:n])
	_, _ = h.Write(c.Key)
	if len(c.Index) > 0 {
		n = binary.PutUvarint(hdr[:], uint64(len(c.Value)))
		_, _ = h.Write(hdr[:n])
		_, _ = h.Write(c.Value)
		_, _ = h.Write(AppendIndexTerms(nil, c.Index))
		return h.Sum64()
	}
	_, _ = h.Write(c.Value)
	return h.Sum64()
}

// Marshal encodes c.
func (c *Command) Marshal() []byte {
	w := writer{b: make([]byte, 0, 24+len(c.RequestID)+len(c.Key)+len(c.Value))}
	if len(c.Index) > 0 {
		w.u8(commandV3)
	} else {
		w.u8(commandV2)
	}
	w.bytes(c.RequestID)
	w.u8(uint8(c.Op))
	w.u8(uint8(c.Cond))
	w.u64(c.Version)
	w.bytes(c.Key)
	w.bytes(c.Value)
	if len(c.Index) > 0 {
		w.b = AppendIndexTerms(w.b, c.Index)
	}
	return w.b
}

// Unmarshal decodes b into c; c's slices alias b.
func (c *Command) Unmarshal(b []byte) error {
	r := reader{b: b}
	v := r.u8()
	if v != commandV1 && v != commandV2 && v != commandV3 && r.err == nil {
		r.fail("command version")
	}
	c.RequestID = r.bytes()
	if v == commandV1 {
		_ = r.i64() // the proposer's wall clock, no longer used
	}
	c.Op = Op(r.u8())
	c.Cond = Cond(r.u8())
	c.Version = r.u64()
	c.Key = r.bytes()
	c.Value = r.bytes()
	c.Index = nil
	if v == commandV3 {
		c.Index, _ = r.indexTerms()
		if r.err == nil && (len(c.Index) == 0 || c.Op != OpPut) {
			r.fail("index terms on a command that cannot carry them")
		}
	}
	if err := r.done(); err != nil {
		return err
	}
	if c.Op != OpPut && c.Op != OpDelete {
		r.fail("unknown op")
	}
	if c.Cond > CondIfAbsent {
		r.fail("unknown condition")
	}
	if len(c.RequestID) > MaxRequestID {
		r.fail("request id too long")
	}
	return r.err
}

// Status of an applied command or a forwarded request.
type Status uint8

// Statuses.
const (
	StatusOK                 Status = 0
	StatusNotFound           Status = 1
	StatusPreconditionFailed Status = 2
	StatusNotLeader          Status = 3
	StatusTimeout            Status = 4
	StatusAckTimeout         Status = 5
	StatusOverloaded         Status = 6
	StatusStopping           Status = 7
	StatusInvalid            Status = 8
	StatusError              Status = 9
	StatusNoReplica          Status = 10
	// StatusRequestIDReused: the request id names an earlier, different
	// write; nothing was applied.
	StatusRequestIDReused Status = 11
	// StatusWrongShard: the receiver's descriptor of the shard disagrees
	// with the request (a key outside its token range, another epoch);
	// nothing was done.
	StatusWrongShard Status = 12
)

// Result is the outcome of an applied command; it is stored in the dedup
// table so a retried request gets the first attempt's answer.
type Result struct {
	Status  Status
	Version uint64 // version written (put) or removed (delete)
	Created bool   // a put that created the key
}

// Marshal encodes r.
func (r *Result) Marshal() []byte {
	w := writer{}
	w.u8(uint8(r.Status))
	w.u64(r.Version)
	if r.Created {
		w.u8(1)
	} else {
		w.u8(0)
	}
	return w.b
}

// Unmarshal decodes b into r.
func (r *Result) Unmarshal(b []byte) error {
	rd := reader{b: b}
	r.Status = Status(rd.u8())
	r.Version = rd.u64()
	r.Created = rd.u8() == 1
	return rd.done()
}

// An entry's data is one command (first byte commandV1 or commandV2), a
// batch of commands (first byte batchV1: a count, then each command's
// encoding length-prefixed), or a stamped entry (first byte stampedV1: the
// proposing leader's clock reading, then a count that may be 0 and the
// commands as in a batch). Only a leader stamps the entries it proposes
// (see internal/statemachine's shard clock). An entry never holds two
// commands on the same key, so a command's version (its entry's log index)
// stays unique per key.
const (
	batchV1   = 2
	stampedV1 = 4
)

// MarshalBatch encodes already encoded commands as one entry.
func MarshalBatch(cmds [][]byte) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, c := range cmds {
		n += binary.MaxVarintLen64 + len(c)
	}
	w := writer{b: make([]byte, 0, n)}
	w.u8(batchV1)
	w.u64(uint64(len(cmds)))
	for _, c := range cmds {
		w.bytes(c)
	}
	return w.b
}

// MarshalStamped encodes already encoded commands (none for an entry that
// only moves the shard clock) as one entry stamped with a leader's clock
// reading.
func MarshalStamped(clock uint64, cmds [][]byte) []byte {
	n := 1 + 2*binary.MaxVarintLen64
	for _, c := range cmds {
		n += binary.MaxVarintLen64 + len(c)
	}
	w := writer{b: make([]byte, 0, n)}
	w.u8(stampedV1)
	w.u64(clock)
	w.u64(uint64(len(cmds)))
	for _, c := range cmds {
		w.bytes(c)
	}
	return w.b
}

// maxBatch bounds the commands of one entry a decoder accepts.
const maxBatch = 1 << 16

// Entry is a decoded entry's data.
type Entry struct {
	// Stamped: a leader stamped the entry with its clock reading Clock.
	Stamped bool
	Clock   uint64
	// Commands are the encoded commands, aliasing the data.
	Commands [][]byte
}

// DecodeEntry decodes an entry's data.
func DecodeEntry(data []byte) (Entry, error) {
	if len(data) == 0 || (data[0] != batchV1 && data[0] != stampedV1) {
		return Entry{Commands: [][]byte{data}}, nil
	}
	var e Entry
	r := reader{b: data[1:]}
	if data[0] == stampedV1 {
		e.Stamped = true
		e.Clock = r.u64()
	}
	n := r.u64()
	if r.err == nil && (n > maxBatch || n == 0 && !e.Stamped) {
		r.fail("batch size")
	}
	if r.err != nil {
		return Entry{}, r.err
	}
	e.Commands = make([][]byte, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		e.Commands = append(e.Commands, r.bytes())
	}
	if err := r.done(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// SplitEntry returns the encoded commands of an entry's data (one for a
// plain command, aliasing data).
func SplitEntry(data []byte) ([][]byte, error) {
	e, err := DecodeEntry(data)
	return e.Commands, err
}
