package http2

import (
	"bufio"
	"bytes"
	"runtime"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// chunk is what the writer sends of one part in one round.
type chunk struct {
	p    *part
	head bool
	data []byte
	// last: the part is done after this chunk.
	last bool
}

// writeLoop writes the connection's frames: the server's settings first,
// then in rounds everything ready — control frames, window updates, and
// the answers (as far as the client's windows allow) — flushing once the
// round finds nothing more ready. Answers finish in bursts (one Raft
// round resolves many requests), so a round usually carries many.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	bw := bufio.NewWriterSize(c.nc, 32<<10)
	fr := http2.NewFramer(bw, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	broken := false
	fail := func() {
		if broken {
			return
		}
		broken = true
		c.cancel()
		c.nc.Close()
		c.mu.Lock()
		c.mu.dead = true
		q := c.mu.queue
		c.mu.queue = nil
		for _, p := range q {
			p.drop(errStreamGone)
			if p.end {
				c.answeredLocked(p.st)
			}
		}
		c.mu.Unlock()
	}
	deadline := func() { _ = c.nc.SetWriteDeadline(time.Now().Add(c.s.writeTimeout())) }
	deadline()
	if fr.WriteSettings(
		// No dynamic header table for the client's requests: their paths
		// (keys) differ each time, so indexing them costs both sides a
		// table insert and eviction per request for nothing.
		http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0},
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.maxStreams()},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: uint32(c.s.maxHeader())},
	) != nil || fr.WriteWindowUpdate(0, connWindow-defaultWindow) != nil || bw.Flush() != nil {
		fail()
	}
	var chunks []chunk
	var ups []streamUpdate
	yielded := false
	for {
		c.mu.Lock()
		ctrl := c.mu.ctrl
		c.mu.ctrl = nil
		// Windows are given back a quarter at a time (fewer frames).
		var connUp uint32
		if c.mu.connUpdate >= connWindow/4 {
			connUp = c.mu.connUpdate
			c.mu.connUpdate = 0
		}
		ups = ups[:0]
		for id, n := range c.mu.streamUpdates {
			if n >= streamWindow/4 {
				ups = append(ups, streamUpdate{id, n})
				delete(c.mu.streamUpdates, id)
			}
		}
		var sl stall
		chunks, sl = c.takeChunks(chunks[:0])
		var goAway bool
		var lastID uint32
		if (c.mu.goAway && !c.mu.goneAway) || sl.kill {
			goAway, lastID = true, c.mu.lastID
			c.mu.goneAway = true
		}
		exit := c.mu.readDone && c.mu.running == 0 && len(c.mu.queue) == 0
		maxFrame := int(c.mu.maxFrame)
		c.mu.Unlock()

		if broken {
			for _, ch := range chunks {
				ch.p.drop(errStreamGone)
				if ch.last && ch.p.end {
					c.answered(ch.p.st)
				}
			}
			if exit {
				return
			}
			c.wait(nil)
			continue
		}
		if sl.resets > 0 || sl.kill {
			c.s.logf("http2: answers waited too long for the client's flow-control window",
				"remote", c.remote, "streams_reset", sl.resets, "connection_closed", sl.kill)
		}
		work := len(ctrl) > 0 || connUp > 0 || len(ups) > 0 || len(chunks) > 0 || goAway
		if work {
			yielded = false
			deadline()
			ok := true
			for _, f := range ctrl {
				ok = ok && f(fr) == nil
			}
			if connUp > 0 {
				ok = ok && fr.WriteWindowUpdate(0, connUp) == nil
			}
			for _, u := range ups {
				ok = ok && fr.WriteWindowUpdate(u.id, u.n) == nil
			}
			for _, ch := range chunks {
				ok = ok && c.writeChunk(fr, enc, &hbuf, ch, maxFrame) == nil
			}
			switch {
			case sl.kill:
				// The client opened no connection window for the
				// answers: it is told why, and the connection ends.
				_ = fr.WriteGoAway(lastID, http2.ErrCodeFlowControl, []byte("flow-control window closed for "+c.s.writeTimeout().String()))
				_ = bw.Flush()
				ok = false
			case goAway:
				ok = ok && fr.WriteGoAway(lastID, http2.ErrCodeNo, nil) == nil
			}
			if !ok {
				fail()
			}
			for _, ch := range chunks {
				if !ch.last {
					continue
				}
				if broken {
					ch.p.drop(errStreamGone)
				} else if ch.p.done != nil {
					close(ch.p.done)
				}
				if ch.p.end {
					c.answered(ch.p.st)
				}
			}
			continue
		}
		if bw.Buffered() > 0 {
			if !yielded {
				// Give the answers finishing now a moment to join this write.
				yielded = true
				runtime.Gosched()
				continue
			}
			deadline()
			if bw.Flush() != nil {
				fail()
			}
			continue
		}
		if exit {
			return
		}
		c.waitTimer(sl.next)
		yielded = false
	}
}

type streamUpdate struct {
	id uint32
	n  uint32
}

// wait waits for the writer's next wake, or a value from timer (if not
// nil).
func (c *conn) wait(timer <-chan time.Time) {
	select {
	case <-c.wake:
	case <-timer:
	case <-c.ctx.Done():
		// The connection is done for: poll until the handlers return.
		select {
		case <-c.wake:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// takeChunks moves what may be sent now off the queue (c.mu held): reset
// streams' parts are dropped; data is cut to the send windows; a part
// that waited too long for window becomes its stream's reset (stall.go).
func (c *conn) takeChunks(out []chunk) ([]chunk, stall) {
	var sl stall
	var now time.Time
	q := c.mu.queue
	keep := q[:0]
	for _, p := range q {
		st := p.st
		if st.reset {
			p.drop(errStreamGone)
			if p.end {
				c.answeredLocked(st)
			}
			continue
		}
		if p.rst != 0 {
			out = append(out, chunk{p: p, last: true})
			continue
		}
		head := p.status > 0 && !p.headSent
		n := int64(len(p.data))
		allow := min(n, c.mu.sendConn, st.sendWin)
		if allow < 0 {
			allow = 0
		}
		if allow < n {
			if allow == 0 {
				if now.IsZero() {
					now = time.Now()
				}
				if c.waitWindow(st, now, &sl) {
					c.resetStalled(p, &sl)
					out = append(out, chunk{p: p, last: true})
					continue
				}
			} else {
				c.spend(st, allow, false, &now)
			}
			if head || allow > 0 {
				out = append(out, chunk{p: p, head: head, data: p.data[:allow]})
				p.headSent = true
				p.data = p.data[allow:]
			}
			keep = append(keep, p)
			continue
		}
		out = append(out, chunk{p: p, head: head, data: p.data, last: true})
		c.spend(st, n, p.end, &now)
	}
	for i := len(keep); i < len(q); i++ {
		q[i] = nil
	}
	c.mu.queue = keep
	if !sl.connWaits && !c.mu.connStallAt.IsZero() {
		c.mu.connStallAt = time.Time{}
	}
	return out, sl
}

// spend takes n bytes of st's answer off the send windows and counts
// them on the connection and on the answer's stall clock (c.mu held);
// ended: the answer's last. *now is read once a round, when a clock
// runs.
func (c *conn) spend(st *stream, n int64, ended bool, now *time.Time) {
	c.mu.sendConn -= n
	st.sendWin -= n
	c.mu.sent += n
	if st.clock && now.IsZero() {
		*now = time.Now()
	}
	st.sent(n, ended, *now)
}

// writeChunk writes a chunk's frames.
func (c *conn) writeChunk(fr *http2.Framer, enc *hpack.Encoder, hbuf *bytes.Buffer, ch chunk, maxFrame int) error {
	p := ch.p
	id := p.st.id
	if p.rst != 0 {
		return fr.WriteRSTStream(id, p.rst)
	}
	endData := ch.last && p.end
	if ch.head {
		hbuf.Reset()
		headerBlock(enc, p.status, p.header)
		block := hbuf.Bytes()
		endStream := endData && len(ch.data) == 0
		first := block
		if len(first) > maxFrame {
			first = first[:maxFrame]
		}
		block = block[len(first):]
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
			EndStream: endStream, EndHeaders: len(block) == 0}); err != nil {
			return err
		}
		for len(block) > 0 {
			n := min(len(block), maxFrame)
			if err := fr.WriteContinuation(id, n == len(block), block[:n]); err != nil {
				return err
			}
			block = block[n:]
		}
		if endStream {
			return nil
		}
	}
	data := ch.data
	for {
		n := min(len(data), maxFrame)
		end := endData && n == len(data)
		if n > 0 || end {
			if err := fr.WriteData(id, end, data[:n]); err != nil {
				return err
			}
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}
