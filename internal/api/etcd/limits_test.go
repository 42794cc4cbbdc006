package etcdapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// listenLimited serves s on a loopback port of 40000-41999.
func listenLimited(t *testing.T, s *Server) string {
	t.Helper()
	var lis net.Listener
	var err error
	for range 50 {
		lis, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 40000+rand.IntN(2000)))
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(func() { s.Stop(time.Second) })
	return lis.Addr().String()
}

func newLimitedServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.ClusterID, cfg.MemberID = 7, 1
	s, err := New(newFake(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A connection carries at most MaxStreams streams at once (the server
// announces it in its SETTINGS): a client that honours it, as gRPC's
// and so clientv3 do, waits to open one more until one ends, and one
// that does not is refused it (RST_STREAM REFUSED_STREAM), so many
// Watch or LeaseKeepAlive streams cannot grow the node's memory without
// bound.
func TestStreamsPerConnectionAreBounded(t *testing.T) {
	const max = 4
	s := newLimitedServer(t, Config{MaxStreams: max})
	addr := listenLimited(t, s)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wc := pb.NewWatchClient(conn)
	var cancels []context.CancelFunc
	for i := range max {
		sctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		st, err := wc.Watch(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if r := create(t, st, &pb.WatchCreateRequest{Key: []byte(fmt.Sprint("k", i))}); !r.Created || r.Canceled {
			t.Fatalf("watch %d: %v", i, r)
		}
	}
	// One more waits (the client holds it back) rather than being served.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pb.NewKVClient(conn).Range(wctx, &pb.RangeRequest{Key: []byte("k")}, grpc.WaitForReady(true))
	wcancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a call beyond %d streams: %v, want it held back until its deadline", max, err)
	}
	cancels[0]()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if _, err := pb.NewKVClient(conn).Range(rctx, &pb.RangeRequest{Key: []byte("k")}); err != nil {
		t.Fatalf("a call after a stream ended: %v", err)
	}

	// A client that does not honour the bound is refused the stream.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/etcdserverpb.Watch/Watch"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := range max + 1 {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM for stream %d of a connection over the bound: %v", 2*max+1, err)
		}
		if f, ok := f.(*http2.SettingsFrame); ok && !f.IsAck() {
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); !ok || v != max {
				t.Errorf("the server announces SETTINGS_MAX_CONCURRENT_STREAMS %d (%v), want %d", v, ok, max)
			}
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			if rst.StreamID != 2*max+1 || rst.ErrCode != http2.ErrCodeRefusedStream {
				t.Fatalf("RST_STREAM of stream %d (%v), want stream %d refused", rst.StreamID, rst.ErrCode, 2*max+1)
			}
			return
		}
	}
}

// The server serves at most MaxConns connections at once: one more is
// closed at once, unserved (a gRPC client reports it Unavailable and
// tries again, clientv3 on another endpoint), and is served once one of
// the others has gone.
func TestConnectionsAreBounded(t *testing.T) {
	const max = 2
	s := newLimitedServer(t, Config{MaxConns: max})
	addr := listenLimited(t, s)
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	var conns []*grpc.ClientConn
	for i := range max {
		c := dial()
		defer c.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := pb.NewMaintenanceClient(c).Status(rctx, &pb.StatusRequest{})
		cancel()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	// One more TCP connection is closed without a byte of HTTP/2.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(nc, http2.ClientPreface)
	n, err := nc.Read(make([]byte, 64))
	var ne net.Error
	if n != 0 || err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection %d over the bound: read %d bytes, %v; want it closed unserved", max+1, n, err)
	}
	// A gRPC client over the bound fails its call rather than being served.
	extra := dial()
	defer extra.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = pb.NewMaintenanceClient(extra).Status(rctx, &pb.StatusRequest{})
	cancel()
	if err == nil {
		t.Fatalf("a call on connection %d over the bound was served", max+1)
	}
	conns[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := pb.NewMaintenanceClient(extra).Status(rctx, &pb.StatusRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a connection closed, another is not served: %v", err)
		}
	}
}
