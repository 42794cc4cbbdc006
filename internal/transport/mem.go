package transport

import (
	"context"
	"sync"

	"github.com/cairn-db/cairn/internal/wire"
)

// Network is an in-memory network of nodes for tests. Links can be cut.
type Network struct {
	mu       sync.Mutex
	handlers map[uint64]Handler
	cut      map[[2]uint64]bool
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{handlers: map[uint64]Handler{}, cut: map[[2]uint64]bool{}}
}

// Join registers node's handler and returns its transport.
func (n *Network) Join(node uint64, h Handler, unreachable UnreachableFunc) *Mem {
	n.mu.Lock()
	n.handlers[node] = h
	n.mu.Unlock()
	return &Mem{net: n, self: node, unreachable: unreachable}
}

// Leave removes node (as if it crashed).
func (n *Network) Leave(node uint64) {
	n.mu.Lock()
	delete(n.handlers, node)
	n.mu.Unlock()
}

// Isolate cuts (or heals, with on=false) every link of node.
func (n *Network) Isolate(node uint64, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.handlers {
		n.cut[[2]uint64{node, id}] = on
		n.cut[[2]uint64{id, node}] = on
	}
}

func (n *Network) handler(from, to uint64) (Handler, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[[2]uint64{from, to}] {
		return nil, false
	}
	h, ok := n.handlers[to]
	return h, ok
}

// Mem is one node's transport on a Network.
type Mem struct {
	net         *Network
	self        uint64
	unreachable UnreachableFunc
}

var _ Transport = (*Mem)(nil)

// Send implements Transport.
func (m *Mem) Send(to uint64, envs []Envelope) {
	h, ok := m.net.handler(m.self, to)
	if !ok {
		if m.unreachable != nil {
			ids := make([]uint64, 0, len(envs))
			for _, e := range envs {
				ids = append(ids, e.ShardID)
			}
			m.unreachable(to, ids)
		}
		return
	}
	// Copy through the wire encoding so no memory is shared.
	out, err := DecodeBatch(EncodeBatch(envs))
	if err != nil {
		panic(err)
	}
	h.HandleRaft(out)
}

// SendSnapshot implements Transport.
func (m *Mem) SendSnapshot(ctx context.Context, to uint64, env Envelope, data SnapshotReader) error {
	h, ok := m.net.handler(m.self, to)
	if !ok {
		return ErrUnreachable
	}
	head := env
	if env.Msg.Snapshot != nil {
		sn := *env.Msg.Snapshot
		sn.Data = nil
		head.Msg.Snapshot = &sn
	}
	out, err := DecodeBatch(EncodeBatch([]Envelope{head}))
	if err != nil {
		return err
	}
	next := func() ([]byte, error) {
		if _, ok := m.net.handler(m.self, to); !ok {
			return nil, ErrUnreachable
		}
		b, err := data.Next()
		return append([]byte(nil), b...), err
	}
	return h.HandleSnapshot(ctx, out[0], next)
}

// Request implements Transport.
func (m *Mem) Request(ctx context.Context, to uint64, req *wire.Request) (*wire.Response, error) {
	h, ok := m.net.handler(m.self, to)
	if !ok {
		return nil, ErrUnreachable
	}
	var cp wire.Request
	if err := cp.Unmarshal(req.Marshal()); err != nil {
		return nil, err
	}
	resp := h.HandleRequest(ctx, &cp)
	if _, ok := m.net.handler(to, m.self); !ok {
		return nil, ErrUnreachable
	}
	return resp, nil
}

// Reachable implements Transport.
func (m *Mem) Reachable(to uint64) bool {
	_, ok := m.net.handler(m.self, to)
	return ok
}

// Close implements Transport.
func (m *Mem) Close() error { return nil }
