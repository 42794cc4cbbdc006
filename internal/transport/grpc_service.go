package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"runtime/debug"

	"github.com/cairn-db/cairn/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// frame is the only message type on the wire: opaque bytes whose encoding
// belongs to this package (batches) or to package wire (requests).
type frame struct{ b []byte }

// codec passes frames through gRPC without protobuf.
type codec struct{}

func (codec) Name() string { return "cairn-frame" }

func (codec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("transport: cannot marshal %T", v)
	}
	return f.b, nil
}

func (codec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("transport: cannot unmarshal into %T", v)
	}
	f.b = append([]byte(nil), data...)
	return nil
}

type server struct {
	h       Handler
	cfg     Config
	stats   *counters
	snapSem chan struct{}
	disk    *diskRoom
}

// guard turns a handler panic into an error that closes the stream, so
// no input crashes the node. It is the last line of defence: the handler
// validates messages before they reach raft.
func (s *server) guard(what string, err *error) {
	if p := recover(); p != nil {
		s.stats.panics.Add(1)
		s.cfg.Logger.Error("peer handler panicked: stream dropped", "rpc", what, "panic", p, "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "transport: %s handler failed", what)
	}
}

type peerService interface{}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "cairn.Peer",
	HandlerType: (*peerService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Request",
		Handler:    requestHandler,
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Raft", Handler: raftHandler, ClientStreams: true},
		{StreamName: "Snapshot", Handler: snapshotHandler, ClientStreams: true},
	},
}

func requestHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (out any, err error) {
	sv := srv.(*server)
	defer sv.guard("request", &err)
	var in frame
	if err := dec(&in); err != nil {
		return nil, err
	}
	var req wire.Request
	if err := req.Unmarshal(in.b); err != nil {
		sv.stats.badFrames.Add(1)
		resp := wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
		return &frame{b: resp.Marshal()}, nil
	}
	if node := authNode(ctx); node != 0 && req.Sender != 0 && req.Sender != node {
		sv.stats.wrongSender.Add(1)
		resp := wire.Response{Status: wire.StatusInvalid, Message: fmt.Sprintf("transport: sender %d on a connection of node %d", req.Sender, node)}
		return &frame{b: resp.Marshal()}, nil
	}
	resp := sv.h.HandleRequest(ctx, &req)
	return &frame{b: resp.Marshal()}, nil
}

func raftHandler(srv any, stream grpc.ServerStream) (err error) {
	sv := srv.(*server)
	defer sv.guard("raft", &err)
	for {
		var f frame
		if err := stream.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.SendMsg(&frame{})
			}
			return err
		}
		envs, err := DecodeBatch(f.b)
		if err != nil {
			sv.stats.badFrames.Add(1)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if envs = sv.stats.fromNode(envs, authNode(stream.Context())); len(envs) > 0 {
			sv.h.HandleRaft(envs)
		}
	}
}

// snapshotHandler receives one snapshot: a header frame (one MsgSnap
// without data), then data frames until the client closes its side. At
// most MaxIncomingSnapshots run at once, each is cut beyond
// MaxSnapshotBytes and ends (DeadlineExceeded) when a frame takes longer
// than SnapshotIdleTimeout to come; one that would take the disk below
// its reserve is refused at its start or cut as a chunk arrives
// (ResourceExhausted, ErrDiskReserve). The handler spills the chunks as
// they come and discards them if the stream fails.
func snapshotHandler(srv any, stream grpc.ServerStream) (err error) {
	sv := srv.(*server)
	defer sv.guard("snapshot", &err)
	select {
	case sv.snapSem <- struct{}{}:
		defer func() { <-sv.snapSem }()
	default:
		sv.stats.snapsRefused.Add(1)
		return status.Error(codes.ResourceExhausted, "transport: too many incoming snapshots")
	}
	defer func() {
		if err != nil {
			sv.stats.snapsRefused.Add(1)
		}
	}()
	frames := newFrameReader(stream, sv.cfg.SnapshotIdleTimeout)
	defer frames.close()
	head, err := frames.next()
	if err != nil {
		if frames.idled {
			return status.Error(codes.DeadlineExceeded, frames.err.Error())
		}
		return err
	}
	envs, err := DecodeBatch(head)
	if err != nil || len(envs) != 1 || envs[0].Msg.Snapshot == nil {
		sv.stats.badFrames.Add(1)
		return status.Error(codes.InvalidArgument, "transport: bad snapshot header")
	}
	if node := authNode(stream.Context()); node != 0 && envs[0].Msg.From != node {
		sv.stats.wrongSender.Add(1)
		return status.Errorf(codes.PermissionDenied, "transport: a snapshot from %d on a connection of node %d", envs[0].Msg.From, node)
	}
	// full is the disk reserve's refusal, at the start or of a chunk.
	full := sv.disk.check(0)
	if full != nil {
		return sv.refuseFull(envs[0], full)
	}
	var total int64
	next := func() ([]byte, error) {
		b, err := frames.next()
		if err != nil {
			return nil, err
		}
		total += int64(len(b))
		if total > sv.cfg.MaxSnapshotBytes {
			return nil, fmt.Errorf("%w: over %d bytes", ErrSnapshotTooLarge, sv.cfg.MaxSnapshotBytes)
		}
		if full = sv.disk.check(len(b)); full != nil {
			return nil, full
		}
		return b, nil
	}
	if err := sv.h.HandleSnapshot(stream.Context(), envs[0], next); err != nil {
		if full != nil {
			return sv.refuseFull(envs[0], full)
		}
		if frames.idled {
			return status.Error(codes.DeadlineExceeded, frames.err.Error())
		}
		return status.Error(codes.Aborted, err.Error())
	}
	return stream.SendMsg(&frame{})
}

// refuseFull logs (at most every diskLogEvery) and answers a snapshot
// refused for the disk reserve: ResourceExhausted, which the sender takes
// as a failure to retry later.
func (s *server) refuseFull(head Envelope, full error) error {
	s.disk.warn("snapshot refused: the disk is at its reserve", "shard", head.ShardID, "from", head.Msg.From, "err", full)
	return status.Error(codes.ResourceExhausted, full.Error())
}
