package wire

// Kind of a forwarded request.
type Kind uint8

// Request kinds.
const (
	KindWrite        Kind = 1 // Command, needs the shard leader
	KindRead         Kind = 2 // linearizable read, needs the shard leader
	KindReadLocal    Kind = 3 // serializable read from the receiver's replica
	KindAppliedIndex Kind = 4 // the receiver replica's applied index
	KindNodeInfo     Kind = 5 // read-only: the receiver's NodeInfo (no shard)
	// KindScan: an ordered scan of the receiver's key-order or secondary
	// index over the shards a ScanRequest (in Command) lists; the answer's
	// Value is a ScanResult. ShardID is 0.
	KindScan Kind = 6
	// KindHead: a read of the key's version, size and index terms but not
	// its value; Index 1 asks for a linearizable read (KindRead's path),
	// 0 for a serializable one.
	KindHead Kind = 7
	// KindCreateReplica asks the receiver to create an empty learner
	// replica of ShardID; Command is the shard's descriptor
	// (shard.Descriptor.Marshal) listing the receiver as a learner.
	KindCreateReplica Kind = 8
	// KindMembers asks the receiver, the shard's leader, to run a
	// membership change of ShardID (a move, an addition, a removal);
	// Command encodes it (store.MemberChange).
	KindMembers Kind = 9
	// KindScrub asks the receiver for its replica's hashes of the scrub
	// whose id is Index (docs/scrub.md); the answer's Value is a
	// ScrubResult, or StatusNotFound while the receiver has none.
	KindScrub Kind = 10
)

// Request is what a coordinator sends to another node.
type Request struct {
	Kind Kind
	// Sender is the sending node (0 when unknown).
	Sender  uint64
	ShardID uint64
	Epoch   uint64
	// Ack and From are the replicas=ACK/FROM setting (0 = default).
	Ack, From uint32
	// DeadlineUnixNano bounds the work at the receiver.
	DeadlineUnixNano int64
	// Index is the applied index to wait for (KindAppliedIndex).
	Index   uint64
	Key     []byte
	Command []byte // a marshalled Command for KindWrite
	// Decoded, when set, is Command decoded (in-process requests: the
	// node that built the request skips decoding it again). Never encoded.
	Decoded *Command
}

const requestV1 = 1

// Marshal encodes r.
func (r *Request) Marshal() []byte {
	w := writer{b: make([]byte, 0, 32+len(r.Key)+len(r.Command))}
	w.u8(requestV1)
	w.u8(uint8(r.Kind))
	w.u64(r.Sender)
	w.u64(r.ShardID)
	w.u64(r.Epoch)
	w.u64(uint64(r.Ack))
	w.u64(uint64(r.From))
	w.i64(r.DeadlineUnixNano)
	w.u64(r.Index)
	w.bytes(r.Key)
	w.bytes(r.Command)
	return w.b
}

// Unmarshal decodes b into r; slices alias b.
func (r *Request) Unmarshal(b []byte) error {
	rd := reader{b: b}
	if v := rd.u8(); v != requestV1 && rd.err == nil {
		rd.fail("request version")
	}
	r.Kind = Kind(rd.u8())
	r.Sender = rd.u64()
	r.ShardID = rd.u64()
	r.Epoch = rd.u64()
	ack, from := rd.u64(), rd.u64()
	if ack > 1<<16 || from > 1<<16 {
		rd.fail("replicas out of range")
	}
	r.Ack, r.From = uint32(ack), uint32(from)
	r.DeadlineUnixNano = rd.i64()
	r.Index = rd.u64()
	r.Key = rd.bytes()
	r.Command = rd.bytes()
	if err := rd.done(); err != nil {
		return err
	}
	if r.Kind < KindWrite || r.Kind > KindScrub {
		rd.fail("unknown kind")
	}
	return rd.err
}

// Response answers a Request.
type Response struct {
	Status Status
	// Leader is a hint when Status is StatusNotLeader (0 = unknown).
	Leader  uint64
	Version uint64
	Created bool
	// Index: KindAppliedIndex's answer; a read's: the shard's applied
	// index when it was served (kv.Value.Revision), found or not; a
	// write's: the log index it was applied at (0 from older nodes).
	Index   uint64
	Value   []byte
	Message string
	// Size and Terms: a read's value size (KindHead, whose Value is
	// empty) and the object's index terms. Encoded after Message only
	// when either is set, so other answers encode as before.
	Size  uint64
	Terms []IndexTerm
	// Queue is the answering node's queue depth for the request's shard
	// (other requests it was working on), which serializable reads use
	// to pick the least busy replica. Encoded after Terms only when set.
	Queue uint32
}

// Marshal encodes r.
func (r *Response) Marshal() []byte {
	w := writer{b: make([]byte, 0, 24+len(r.Value)+len(r.Message))}
	w.u8(uint8(r.Status))
	w.u64(r.Leader)
	w.u64(r.Version)
	c := uint8(0)
	if r.Created {
		c = 1
	}
	w.u8(c)
	w.u64(r.Index)
	w.bytes(r.Value)
	w.str(r.Message)
	if r.Size != 0 || len(r.Terms) > 0 || r.Queue != 0 {
		w.u64(r.Size)
		w.b = AppendIndexTerms(w.b, r.Terms)
	}
	if r.Queue != 0 {
		w.u64(uint64(r.Queue))
	}
	return w.b
}

// Unmarshal decodes b into r; Value aliases b.
func (r *Response) Unmarshal(b []byte) error {
	rd := reader{b: b}
	r.Status = Status(rd.u8())
	r.Leader = rd.u64()
	r.Version = rd.u64()
	r.Created = rd.u8() == 1
	r.Index = rd.u64()
	r.Value = rd.bytes()
	r.Message = rd.str()
	r.Size, r.Terms, r.Queue = 0, nil, 0
	if rd.err == nil && len(rd.b) > 0 {
		r.Size = rd.u64()
		r.Terms, _ = rd.indexTerms()
	}
	if rd.err == nil && len(rd.b) > 0 {
		r.Queue = uint32(min(rd.u64(), 1<<32-1))
	}
	return rd.done()
}
