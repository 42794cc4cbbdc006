package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// Errors returned by transports.
var (
	ErrUnknownPeer = errors.New("transport: unknown peer")
	ErrUnreachable = errors.New("transport: peer unreachable")
	ErrClosed      = errors.New("transport: closed")
	// ErrSnapshotTooLarge: an incoming snapshot stream went over
	// Config.MaxSnapshotBytes.
	ErrSnapshotTooLarge = errors.New("transport: snapshot too large")
	// ErrSnapshotIdle: an incoming snapshot stream brought nothing for
	// Config.SnapshotIdleTimeout.
	ErrSnapshotIdle = errors.New("transport: snapshot stream idle")
)

// Envelope is one raft message of one shard.
type Envelope struct {
	ShardID uint64
	Msg     raftpb.Message
}

// Handler receives what other nodes send. Its methods must not block for
// long: HandleRaft only queues. Nothing received is trusted: the handler
// checks every message against its shard descriptors.
type Handler interface {
	HandleRaft(envs []Envelope)
	HandleRequest(ctx context.Context, req *wire.Request) *wire.Response
	// HandleSnapshot receives a MsgSnap (metadata only; Snapshot.Data is
	// nil) and its data: next returns the chunks in order, then io.EOF,
	// or an error if the stream broke or went over its bound. A nil error
	// tells the sender the snapshot was delivered.
	HandleSnapshot(ctx context.Context, env Envelope, next func() ([]byte, error)) error
}

// SnapshotReader yields the data of an outgoing snapshot in chunks.
type SnapshotReader interface {
	// Next returns the next chunk, which the transport may keep, or
	// io.EOF after the last.
	Next() ([]byte, error)
}

// Transport sends to other nodes.
type Transport interface {
	// Send queues messages for node to (never blocks; may drop).
	Send(to uint64, envs []Envelope)
	// SendSnapshot streams a MsgSnap's metadata (env.Msg.Snapshot.Data is
	// not sent) and then data's chunks, with flow control, and waits
	// until the receiver has handled it.
	SendSnapshot(ctx context.Context, to uint64, env Envelope, data SnapshotReader) error
	// Request forwards a client request and waits for the answer.
	Request(ctx context.Context, to uint64, req *wire.Request) (*wire.Response, error)
	// Reachable reports whether the last exchange with node succeeded.
	Reachable(to uint64) bool
	Close() error
}

// UnreachableFunc is told which shards' messages to node to were lost.
type UnreachableFunc func(to uint64, shardIDs []uint64)

// EncodeBatch encodes envelopes into one frame.
func EncodeBatch(envs []Envelope) []byte {
	size := 8
	for i := range envs {
		size += envBytes(&envs[i])
	}
	return appendBatch(make([]byte, 0, size), envs)
}

// envBytes is what one envelope takes in a batch, at most: its message
// and 20 bytes for the shard id and the length.
func envBytes(e *Envelope) int { return 20 + e.Msg.Size() }

// appendBatch appends the EncodeBatch of envs to b.
func appendBatch(b []byte, envs []Envelope) []byte {
	b = binary.AppendUvarint(b, uint64(len(envs)))
	for i := range envs {
		b = binary.AppendUvarint(b, envs[i].ShardID)
		n := envs[i].Msg.Size()
		b = binary.AppendUvarint(b, uint64(n))
		start := len(b)
		b = slices.Grow(b, n)[:start+n]
		if _, err := envs[i].Msg.MarshalTo(b[start:]); err != nil {
			panic(fmt.Sprintf("transport: marshal message: %v", err))
		}
	}
	return b
}

// DecodeBatch decodes a frame made by EncodeBatch.
func DecodeBatch(b []byte) ([]Envelope, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("transport: bad batch header")
	}
	b = b[k:]
	// The count is the sender's word: capacity grows with what decodes,
	// never with what the header claims.
	envs := make([]Envelope, 0, min(n, 64))
	for i := uint64(0); i < n; i++ {
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("transport: bad shard id")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("transport: bad message length")
		}
		b = b[k:]
		var e Envelope
		e.ShardID = id
		if err := e.Msg.Unmarshal(b[:l]); err != nil {
			return nil, fmt.Errorf("transport: bad message: %w", err)
		}
		b = b[l:]
		envs = append(envs, e)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("transport: trailing bytes in batch")
	}
	return envs, nil
}
