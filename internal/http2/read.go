package http2

// The connection's reader: frames are read whole, so that a read deadline
// may pass, or be moved to now to wake the reader, at any time without
// cutting a frame; and the drain after a GOAWAY, bounded as a whole.

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	frameHeaderLen = 9
	// readBuf holds a frame of the largest size a client may send us
	// (SETTINGS_MAX_FRAME_SIZE is not announced: 16 KiB) with its header.
	readBuf = frameHeaderLen + 16<<10
)

// readLoop reads frames until the connection ends; an error that is a
// ConnectionError is answered with a GOAWAY.
func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, readBuf)
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var pre [len(preface)]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || string(pre[:]) != preface {
		return errors.New("http2: no connection preface")
	}
	fr := http2.NewFramer(nil, br)
	// A frame larger than the 16 KiB a client may send us is a
	// FRAME_SIZE_ERROR before its payload is read: the framer would
	// otherwise allocate up to 16 MiB for it, kept for the connection's
	// life.
	fr.SetMaxReadFrameSize(readBuf - frameHeaderLen)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = uint32(c.s.maxHeader())
	for {
		c.mu.Lock()
		stopping, ctrl := c.mu.goAway, len(c.mu.ctrl)
		if !stopping {
			c.armReadLocked()
		}
		c.mu.Unlock()
		if stopping {
			return c.drainForGoAway(fr, br)
		}
		if ctrl > maxCtrl {
			// A client that sends pings or settings and reads nothing.
			return connErr(http2.ErrCodeEnhanceYourCalm)
		}
		f, err := readFrame(fr, br)
		if err != nil {
			timeout, end := c.readErr(err)
			if end != nil {
				return end
			}
			if timeout {
				c.mu.Lock()
				// A deadline moved to the past by another (Shutdown, or
				// the HTTP/1 server that handed the connection over,
				// stopping) is a graceful GOAWAY, not an idle
				// connection.
				idle := !c.mu.goAway && !c.mu.idleAt.IsZero() && !time.Now().Before(c.mu.idleAt)
				c.mu.goAway = true
				c.mu.Unlock()
				if idle {
					// Nothing came for IdleTimeout while no handler ran:
					// the requests the client left half sent (their
					// bodies unfinished) are reset, and the connection
					// goes away.
					c.resetHalfSent()
					c.s.logf("http2: idle connection closed", "remote", c.remote)
				}
			}
			continue
		}
		if err := c.frame(f); err != nil {
			return err
		}
	}
}

// readFrame reads the next frame once it has arrived whole, with the
// CONTINUATION frames that complete its header block (as far as br
// holds): until then it only peeks, so an error — a read deadline passing
// — consumes nothing, and the frame is read whole at the next try. A
// frame, or header block, larger than br is read as it comes (no client
// within the protocol's limits sends one).
func readFrame(fr *http2.Framer, br *bufio.Reader) (http2.Frame, error) {
	for off := 0; off+frameHeaderLen <= br.Size(); {
		h, err := br.Peek(off + frameHeaderLen)
		if err != nil {
			return nil, err
		}
		h = h[off:]
		end := off + frameHeaderLen + (int(h[0])<<16 | int(h[1])<<8 | int(h[2]))
		typ, flags := http2.FrameType(h[3]), http2.Flags(h[4])
		if end > br.Size() {
			break
		}
		if _, err := br.Peek(end); err != nil {
			return nil, err
		}
		if (typ != http2.FrameHeaders && typ != http2.FrameContinuation) || flags.Has(http2.FlagHeadersEndHeaders) {
			break
		}
		off = end
	}
	return fr.ReadFrame()
}

// drainForGoAway: once a GOAWAY is due, no new stream starts; the reader
// keeps reading the frames of the streams opened before it (the rest of
// their bodies, window updates) until they are answered — the last
// answer written wakes it — but for IdleTimeout from the drain's start
// at most, one deadline for the whole drain: the requests still half
// sent then are reset and reading ends (the answers under way are still
// written, within WriteTimeout's bounds).
func (c *conn) drainForGoAway(fr *http2.Framer, br *bufio.Reader) error {
	c.signal()
	end := time.Now().Add(c.s.idleTimeout())
	for {
		c.mu.Lock()
		done := c.mu.running == 0 && len(c.streams) == 0
		over := !done && !time.Now().Before(end)
		if !done && !over {
			// Set again after each wake (a deadline moved to now).
			_ = c.nc.SetReadDeadline(end)
		}
		c.mu.Unlock()
		if done {
			return io.EOF
		}
		if over {
			c.resetHalfSent()
			c.s.logf("http2: drain after GOAWAY ended at its bound", "remote", c.remote)
			return io.EOF
		}
		f, err := readFrame(fr, br)
		if err != nil {
			if _, end := c.readErr(err); end != nil {
				return end
			}
			continue // a stream reset, or the deadline: the loop's top weighs it
		}
		if f.Header().StreamID > c.lastID {
			if err := c.ignore(f); err != nil {
				return err
			}
			continue
		}
		if err := c.frame(f); err != nil {
			return err
		}
	}
}

// readErr sorts an error of readFrame: a stream's error resets that
// stream; a read deadline passing is a timeout for the caller to weigh;
// anything else ends the connection with end (a frame over the size the
// client may send is a FRAME_SIZE_ERROR, a connection cut mid-frame an
// EOF).
func (c *conn) readErr(err error) (timeout bool, end error) {
	var se http2.StreamError
	if errors.As(err, &se) {
		c.resetStream(se.StreamID, se.Code)
		return false, nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true, nil
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return false, io.EOF
	}
	if errors.Is(err, http2.ErrFrameTooLarge) {
		return false, connErr(http2.ErrCodeFrameSize)
	}
	return false, err
}

// ignore takes a frame of a stream the client opened after the GOAWAY
// (above its last stream id): the stream is not served, but its DATA
// counts against the connection's window (RFC 9113 §6.8).
func (c *conn) ignore(f http2.Frame) error {
	d, ok := f.(*http2.DataFrame)
	if !ok {
		return nil
	}
	n := int64(d.Length)
	if n > c.recvConn {
		return connErr(http2.ErrCodeFlowControl)
	}
	c.recvConn -= n
	c.giveBack(0, n)
	return nil
}

// resetHalfSent resets the requests whose bodies the client began and
// did not finish.
func (c *conn) resetHalfSent() {
	for id := range c.streams {
		c.resetStream(id, http2.ErrCodeCancel)
	}
}
