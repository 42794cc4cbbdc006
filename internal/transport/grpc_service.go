package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-db/cairn/internal/wire"
	"google.golang.org/grpc"
)

// maxSnapshot bounds the data of one received snapshot.
const maxSnapshot = 4 << 30

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

type server struct{ h Handler }

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

func requestHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in frame
	if err := dec(&in); err != nil {
		return nil, err
	}
	var req wire.Request
	if err := req.Unmarshal(in.b); err != nil {
		resp := wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
		return &frame{b: resp.Marshal()}, nil
	}
	resp := srv.(*server).h.HandleRequest(ctx, &req)
	return &frame{b: resp.Marshal()}, nil
}

func raftHandler(srv any, stream grpc.ServerStream) error {
	h := srv.(*server).h
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
			return err
		}
		h.HandleRaft(envs)
	}
}

func snapshotHandler(srv any, stream grpc.ServerStream) error {
	var head frame
	if err := stream.RecvMsg(&head); err != nil {
		return err
	}
	envs, err := DecodeBatch(head.b)
	if err != nil || len(envs) != 1 {
		return fmt.Errorf("transport: bad snapshot header")
	}
	var data []byte
	for {
		var f frame
		err := stream.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(data)+len(f.b) > maxSnapshot {
			return fmt.Errorf("transport: snapshot over %d bytes", maxSnapshot)
		}
		data = append(data, f.b...)
	}
	envs[0].Msg.Snapshot.Data = data
	srv.(*server).h.HandleRaft(envs)
	return stream.SendMsg(&frame{})
}
