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
		sv.h.HandleRaft(envs)
	}
}

// snapshotHandler receives one snapshot: a header frame (one MsgSnap
// without data), then data frames until the client closes its side. At
// most MaxIncomingSnapshots run at once and each is cut beyond
// MaxSnapshotBytes; the handler spills the chunks as they come.
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
	var head frame
	if err := stream.RecvMsg(&head); err != nil {
		return err
	}
	envs, err := DecodeBatch(head.b)
	if err != nil || len(envs) != 1 || envs[0].Msg.Snapshot == nil {
		sv.stats.badFrames.Add(1)
		return status.Error(codes.InvalidArgument, "transport: bad snapshot header")
	}
	var total int64
	eof := false
	next := func() ([]byte, error) {
		if eof {
			return nil, io.EOF
		}
		var f frame
		err := stream.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			eof = true
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		total += int64(len(f.b))
		if total > sv.cfg.MaxSnapshotBytes {
			return nil, fmt.Errorf("%w: over %d bytes", ErrSnapshotTooLarge, sv.cfg.MaxSnapshotBytes)
		}
		return f.b, nil
	}
	if err := sv.h.HandleSnapshot(stream.Context(), envs[0], next); err != nil {
		return status.Error(codes.Aborted, err.Error())
	}
	return stream.SendMsg(&frame{})
}
