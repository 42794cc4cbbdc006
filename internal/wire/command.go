package wire

import "encoding/binary"

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

// Command is one write, proposed as one Raft entry.
type Command struct {
	RequestID []byte
	// UnixNano is the proposer's wall clock; it only ages dedup records, so
	// every replica ages them identically.
	UnixNano int64
	Op       Op
	Cond     Cond
	Version  uint64 // for CondIfMatch
	Key      []byte
	Value    []byte
}

const commandV1 = 1

// Marshal encodes c.
func (c *Command) Marshal() []byte {
	w := writer{b: make([]byte, 0, 24+len(c.RequestID)+len(c.Key)+len(c.Value))}
	w.u8(commandV1)
	w.bytes(c.RequestID)
	w.i64(c.UnixNano)
	w.u8(uint8(c.Op))
	w.u8(uint8(c.Cond))
	w.u64(c.Version)
	w.bytes(c.Key)
	w.bytes(c.Value)
	return w.b
}

// Unmarshal decodes b into c; c's slices alias b.
func (c *Command) Unmarshal(b []byte) error {
	r := reader{b: b}
	if v := r.u8(); v != commandV1 && r.err == nil {
		r.fail("command version")
	}
	c.RequestID = r.bytes()
	c.UnixNano = r.i64()
	c.Op = Op(r.u8())
	c.Cond = Cond(r.u8())
	c.Version = r.u64()
	c.Key = r.bytes()
	c.Value = r.bytes()
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
	// StatusWrongShard: the receiver's descriptor of the shard disagrees
	// with the request (a key outside its token range, another epoch);
	// nothing was done.
	StatusWrongShard Status = 11
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

// An entry's data is either one command (first byte commandV1) or a batch
// of commands (first byte batchV1): a count, then each command's encoding
// length-prefixed. A batch never holds two commands on the same key, so a
// command's version (its entry's log index) stays unique per key.
const batchV1 = 2

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

// maxBatch bounds the commands of one entry a decoder accepts.
const maxBatch = 1 << 16

// SplitEntry returns the encoded commands of an entry's data (one for a
// plain command, aliasing data).
func SplitEntry(data []byte) ([][]byte, error) {
	if len(data) == 0 || data[0] != batchV1 {
		return [][]byte{data}, nil
	}
	r := reader{b: data[1:]}
	n := r.u64()
	if r.err == nil && (n == 0 || n > maxBatch) {
		r.fail("batch size")
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([][]byte, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.bytes())
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}
