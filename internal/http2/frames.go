package http2

// The frames a connection's reader handles — SETTINGS, WINDOW_UPDATE,
// HEADERS (a new request), DATA, PING, RST_STREAM, GOAWAY; PRIORITY is
// ignored, PUSH_PROMISE and a stray CONTINUATION end the connection — and
// the flow-control windows they move.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
	"golang.org/x/net/http2"
)

func connErr(code http2.ErrCode) error { return http2.ConnectionError(code) }

// frame handles one frame.
func (c *conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.settings(f)
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		d := f.Data
		c.ctrl(func(fr *http2.Framer) error { return fr.WritePing(true, d) })
	case *http2.RSTStreamFrame:
		if st := c.streams[f.StreamID]; st != nil {
			delete(c.streams, f.StreamID)
			st.drop(c)
		} else if f.StreamID > c.lastID {
			return connErr(http2.ErrCodeProtocol) // idle stream
		}
		c.mu.Lock()
		c.markReset(f.StreamID)
		c.mu.Unlock()
		c.signal()
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.mu.goAway = true
		c.mu.Unlock()
	case *http2.PriorityFrame:
	case *http2.PushPromiseFrame:
		return connErr(http2.ErrCodeProtocol)
	case *http2.ContinuationFrame:
		return connErr(http2.ErrCodeProtocol) // the Framer joins them
	default:
		// Unknown frame types are ignored (RFC 9113 §4.1).
	}
	return nil
}

// markReset marks the answer of stream id dropped (c.mu held).
func (c *conn) markReset(id uint32) {
	if st := c.mu.active[id]; st != nil {
		st.reset = true
		if st.cancel != nil {
			st.cancel()
		}
	}
}

func (c *conn) settings(f *http2.SettingsFrame) error {
	var err error
	c.mu.Lock()
	_ = f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			if s.Val > 1<<31-1 {
				err = connErr(http2.ErrCodeFlowControl)
				return nil
			}
			delta := int64(s.Val) - c.mu.initialWindow
			c.mu.initialWindow = int64(s.Val)
			c.adjustWindows(delta)
		case http2.SettingMaxFrameSize:
			if s.Val < 16<<10 || s.Val > 1<<24-1 {
				err = connErr(http2.ErrCodeProtocol)
				return nil
			}
			c.mu.maxFrame = s.Val
		}
		return nil
	})
	c.mu.ctrl = append(c.mu.ctrl, func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
	c.mu.Unlock()
	c.signal()
	return err
}

// adjustWindows moves every open stream's send window by delta (c.mu held).
func (c *conn) adjustWindows(delta int64) {
	for _, st := range c.mu.active {
		st.sendWin += delta
	}
	for _, st := range c.streams {
		if c.mu.active[st.id] != st {
			st.sendWin += delta
		}
	}
}

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// An update to the connection's window restarts its clock; a
	// stream's clock restarts only once enough is sent (stall.go).
	if f.StreamID == 0 {
		c.mu.sendConn += int64(f.Increment)
		c.mu.connStallAt = time.Time{}
		if c.mu.sendConn > 1<<31-1 {
			return connErr(http2.ErrCodeFlowControl)
		}
	} else {
		st := c.mu.active[f.StreamID]
		if st == nil {
			st = c.streams[f.StreamID]
		}
		if st != nil {
			st.sendWin += int64(f.Increment)
		}
	}
	c.signal()
	return nil
}

// headers starts a stream (or ends one with trailers).
func (c *conn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if st := c.streams[id]; st != nil {
		// Trailers: they must end the stream; they are not passed on.
		if !f.StreamEnded() {
			return connErr(http2.ErrCodeProtocol)
		}
		c.endStream(st)
		return nil
	}
	if id%2 == 0 || id <= c.lastID {
		return connErr(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	gone := c.mu.goneAway
	if !gone {
		c.mu.lastID = id
	}
	c.mu.Unlock()
	if gone {
		// Opened after the GOAWAY went out, whose last stream id is
		// lower: ignored, as the client knows (it may retry it).
		return nil
	}
	c.lastID = id
	if f.Truncated {
		c.answer(&stream{id: id, refused: true}, http.StatusRequestHeaderFieldsTooLarge, "header fields too large", f.StreamEnded())
		return nil
	}
	c.mu.Lock()
	open := c.mu.running + len(c.streams)
	c.mu.Unlock()
	if open >= int(c.s.maxStreams()) {
		c.resetStream(id, http2.ErrCodeRefusedStream)
		return nil
	}
	st := &stream{id: id, recv: streamWindow}
	st.ctx, st.cancel = context.WithCancel(c.ctx)
	req, err := c.request(st.ctx, f)
	if err != nil {
		st.cancel()
		c.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	st.req = req
	c.mu.Lock()
	st.sendWin = c.mu.initialWindow
	c.mu.Unlock()
	c.streams[id] = st
	if f.StreamEnded() {
		c.endStream(st)
	}
	return nil
}

// lengthMismatch says what is wrong when a request's content-length
// fields (cl) do not announce the n bytes its DATA frames carried.
func lengthMismatch(cl []string, n int) string {
	if len(cl) == 0 {
		return ""
	}
	if len(cl) > 1 {
		return "more than one content-length"
	}
	v, err := strconv.ParseUint(cl[0], 10, 63)
	if err != nil {
		return fmt.Sprintf("bad content-length %q", cl[0])
	}
	if v != uint64(n) {
		return fmt.Sprintf("content-length %d, but the body has %d bytes", v, n)
	}
	return ""
}

// giveBack returns n bytes of receive window to the client (stream 0:
// only the connection's).
func (c *conn) giveBack(id uint32, n int64) {
	if n == 0 {
		return
	}
	c.recvConn += n
	c.mu.Lock()
	c.mu.connUpdate += uint32(n)
	if st := c.streams[id]; id != 0 && st != nil {
		st.recv += n
		c.mu.streamUpdates[id] += uint32(n)
	}
	c.mu.Unlock()
	c.signal()
}

// endStream: the request is complete; run its handler.
func (c *conn) endStream(st *stream) {
	delete(c.streams, st.id)
	c.mu.Lock()
	delete(c.mu.streamUpdates, st.id)
	c.mu.Unlock()
	if st.refused {
		st.drop(c)
		return
	}
	req := st.req
	if msg := lengthMismatch(req.Header["Content-Length"], len(st.body)); msg != "" {
		// Malformed (RFC 9113 §8.1.1): the body is not the one announced.
		c.answer(st, http.StatusBadRequest, msg, true)
		st.drop(c)
		return
	}
	if len(st.body) > 0 {
		req.Body = http1.NewBody(st.body)
		req.ContentLength = int64(len(st.body))
	} else {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	c.mu.Lock()
	c.mu.running++
	c.mu.active[st.id] = st
	c.mu.Unlock()
	c.s.work.Run(func() { c.handle(st) })
}
