package http2

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A frame announced larger than the 16 KiB a client may send is refused
// from its header, with a GOAWAY FRAME_SIZE_ERROR, and the connection
// ends: the server does not wait for, nor make room for, 16 MiB.
func TestOversizeFrameRefused(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	addr := serveLocal(t, s)
	nc, fr := rawConn(t, addr)
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	// The header of a DATA frame of 16 MiB - 1 on stream 1; no payload.
	if _, err := nc.Write([]byte{0xff, 0xff, 0xff, byte(http2.FrameData), 0, 0, 0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY before the connection ended: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeFrameSize {
				t.Fatalf("GOAWAY %v, want FRAME_SIZE_ERROR", g.ErrCode)
			}
			break
		}
	}
	waitConns(t, s, 0, 3*time.Second)
}
