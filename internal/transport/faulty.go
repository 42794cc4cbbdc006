package transport

import (
	"context"
	"sync"

	"github.com/cairn-db/cairn/internal/wire"
)

// Faulty wraps a Transport and its Handler with a fault hook that drops
// everything exchanged with blocked nodes (a network partition as this node
// sees it). It exists only on nodes started with fault injection enabled.
type Faulty struct {
	Transport
	h  Handler
	mu sync.RWMutex
	bl map[uint64]bool
}

// NewFaulty wraps h; call Wrap with the real transport once built.
func NewFaulty(h Handler) *Faulty { return &Faulty{h: h, bl: map[uint64]bool{}} }

// Wrap sets the transport underneath.
func (f *Faulty) Wrap(t Transport) { f.Transport = t }

// Block replaces the set of blocked nodes (nil heals).
func (f *Faulty) Block(nodes []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bl = map[uint64]bool{}
	for _, n := range nodes {
		f.bl[n] = true
	}
}

// Blocked lists the blocked nodes.
func (f *Faulty) Blocked() []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []uint64
	for n := range f.bl {
		out = append(out, n)
	}
	return out
}

func (f *Faulty) blocked(n uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bl[n]
}

// Send implements Transport.
func (f *Faulty) Send(to uint64, envs []Envelope) {
	if !f.blocked(to) {
		f.Transport.Send(to, envs)
	}
}

// SendSnapshot implements Transport.
func (f *Faulty) SendSnapshot(ctx context.Context, to uint64, env Envelope, data SnapshotReader) error {
	if f.blocked(to) {
		return ErrUnreachable
	}
	return f.Transport.SendSnapshot(ctx, to, env, data)
}

// Request implements Transport.
func (f *Faulty) Request(ctx context.Context, to uint64, req *wire.Request) (*wire.Response, error) {
	if f.blocked(to) {
		return nil, ErrUnreachable
	}
	return f.Transport.Request(ctx, to, req)
}

// Reachable implements Transport.
func (f *Faulty) Reachable(to uint64) bool { return !f.blocked(to) && f.Transport.Reachable(to) }

// HandleRaft implements Handler, dropping messages from blocked nodes.
func (f *Faulty) HandleRaft(envs []Envelope) {
	kept := envs[:0]
	for _, e := range envs {
		if !f.blocked(e.Msg.From) {
			kept = append(kept, e)
		}
	}
	if len(kept) > 0 {
		f.h.HandleRaft(kept)
	}
}

// HandleRequest implements Handler, refusing requests from blocked nodes.
func (f *Faulty) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	if req.Sender != 0 && f.blocked(req.Sender) {
		return &wire.Response{Status: wire.StatusError, Message: "partitioned (fault injection)"}
	}
	return f.h.HandleRequest(ctx, req)
}

// HandleSnapshot implements Handler, refusing snapshots from blocked nodes.
func (f *Faulty) HandleSnapshot(ctx context.Context, env Envelope, next func() ([]byte, error)) error {
	if f.blocked(env.Msg.From) {
		return ErrUnreachable
	}
	return f.h.HandleSnapshot(ctx, env, next)
}
