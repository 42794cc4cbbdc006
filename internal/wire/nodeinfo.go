package wire

// NodeInfo is a node's answer to a KindNodeInfo request, carried in
// Response.Value: its HTTP address and, for every shard it holds a replica
// of, the leader that replica knows (with its term, so that views from
// several replicas can be reconciled: the highest term wins).
type NodeInfo struct {
	HTTPAddr string
	Leaders  []ShardLeader
	// Descriptors are the node's current shard descriptors (each
	// shard.Descriptor.Marshal), so that nodes holding no replica of a
	// shard learn its members and epoch. Optional: older nodes send none.
	Descriptors [][]byte
}

// ShardLeader is one replica's view of its shard's leader.
type ShardLeader struct {
	ShardID uint64
	Leader  uint64 // 0 when the replica knows none
	Term    uint64
}

// maxNodeInfoShards bounds the shards one NodeInfo may list when decoded.
const maxNodeInfoShards = 1 << 20

// Marshal encodes n.
func (n *NodeInfo) Marshal() []byte {
	w := writer{b: make([]byte, 0, 8+len(n.HTTPAddr)+12*len(n.Leaders))}
	w.str(n.HTTPAddr)
	w.u64(uint64(len(n.Leaders)))
	for _, l := range n.Leaders {
		w.u64(l.ShardID)
		w.u64(l.Leader)
		w.u64(l.Term)
	}
	if len(n.Descriptors) > 0 {
		w.u64(uint64(len(n.Descriptors)))
		for _, d := range n.Descriptors {
			w.bytes(d)
		}
	}
	return w.b
}

// Unmarshal decodes b into n.
func (n *NodeInfo) Unmarshal(b []byte) error {
	rd := reader{b: b}
	n.HTTPAddr = rd.str()
	count := rd.u64()
	if count > maxNodeInfoShards || count > uint64(len(b)) {
		rd.fail("node info shard count")
		return rd.err
	}
	n.Leaders = make([]ShardLeader, 0, count)
	for i := uint64(0); i < count && rd.err == nil; i++ {
		n.Leaders = append(n.Leaders, ShardLeader{ShardID: rd.u64(), Leader: rd.u64(), Term: rd.u64()})
	}
	n.Descriptors = nil
	if rd.err == nil && len(rd.b) > 0 {
		// The optional descriptor section: a count (never 0), then each.
		count := rd.u64()
		if count == 0 || count > maxNodeInfoShards || count > uint64(len(b)) {
			rd.fail("node info descriptor count")
			return rd.err
		}
		for i := uint64(0); i < count && rd.err == nil; i++ {
			n.Descriptors = append(n.Descriptors, rd.bytes())
		}
	}
	return rd.done()
}
