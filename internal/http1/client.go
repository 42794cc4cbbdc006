package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Request is one client request. Path is the request target as sent
// (escaped path and query).
type Request struct {
	Method string
	Path   string
	// Header fields as name, value pairs.
	Header [][2]string
	Body   []byte
}

// Response is an answer; Body is read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrConnClosed is returned for requests on (or pending in) a connection
// that failed or was closed.
var ErrConnClosed = errors.New("http1: connection closed")

// maxResponseBody bounds an answer's body the client reads.
const maxResponseBody = 64 << 20

// Conn is one client connection that pipelines: requests from many
// goroutines are written back to back by one writer goroutine (in one
// write while they queue up) and their answers matched in order. After an
// error every pending and later request fails; dial a new Conn.
type Conn struct {
	nc   net.Conn
	host string
	// sem bounds the requests in flight (queued, sent or being answered).
	sem     chan struct{}
	queue   chan *call // to the writer
	pending chan *call // written, in order, to the reader
	failed  chan struct{}
	failErr error
	once    sync.Once
	// writerDone: the writer has stopped after a failure; nothing enters
	// pending any more.
	writerDone chan struct{}
}

type call struct {
	req  *Request
	head bool
	resp Response
	err  error
	done chan struct{}
}

// Dial connects to addr (host:port). maxInFlight bounds the requests the
// connection carries at once (1: no pipelining).
func Dial(ctx context.Context, addr string, maxInFlight int) (*Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newClientConn(nc, addr, maxInFlight), nil
}

// newClientConn starts the writer and reader of a dialed connection.
func newClientConn(nc net.Conn, addr string, maxInFlight int) *Conn {
	if maxInFlight <= 0 {
		maxInFlight = 1
	}
	c := &Conn{
		nc: nc, host: addr,
		sem:     make(chan struct{}, maxInFlight),
		queue:   make(chan *call, maxInFlight),
		pending: make(chan *call, maxInFlight),
		failed:  make(chan struct{}),

		writerDone: make(chan struct{}),
	}
	go c.writeLoop()
	go c.readLoop(bufio.NewReaderSize(nc, 16<<10))
	return c
}

// Close closes the connection; pending requests fail.
func (c *Conn) Close() error {
	c.fail(ErrConnClosed)
	return nil
}

// Failed reports whether the connection is no longer usable.
func (c *Conn) Failed() bool { return closed(c.failed) }

func (c *Conn) fail(err error) {
	c.once.Do(func() {
		c.failErr = err
		close(c.failed)
		c.nc.Close()
	})
}

// Do sends req and waits for its answer. When ctx ends first, Do returns
// ctx's error; the request may still be sent and served.
func (c *Conn) Do(ctx context.Context, req *Request) (*Response, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.failed:
		return nil, c.failErr
	}
	cl := &call{req: req, head: req.Method == http.MethodHead, done: make(chan struct{})}
	c.queue <- cl // never blocks: sem bounds it
	select {
	case <-cl.done:
		<-c.sem
		if cl.err != nil {
			return nil, cl.err
		}
		return &cl.resp, nil
	case <-c.writerDone:
		// Failed; the call may never have been written.
		select {
		case <-cl.done:
		default:
		}
		<-c.sem
		return nil, c.failErr
	case <-ctx.Done():
		// The answer still arrives in order (or the connection fails);
		// the slot frees then.
		go func() {
			select {
			case <-cl.done:
			case <-c.writerDone:
			}
			<-c.sem
		}()
		return nil, ctx.Err()
	}
}

// writeLoop writes queued requests, flushing once the queue is empty.
func (c *Conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 16<<10)
	for {
		var cl *call
		select {
		case cl = <-c.queue:
		case <-c.failed:
			c.failAll(c.queue) // the requests the writer never took
			close(c.writerDone)
			return
		}
		c.pending <- cl // never blocks: sem bounds it
		writeRequest(bw, c.host, cl.req)
		if len(c.queue) == 0 && len(c.sem) > 1 {
			// Others share the connection: answers arrive in bursts and
			// their callers send again at once. Let those requests join
			// this write while they keep coming.
			for i := 0; i < 4; i++ {
				n := len(c.queue)
				runtime.Gosched()
				if len(c.queue) == n {
					break
				}
			}
		}
		if len(c.queue) == 0 {
			if err := bw.Flush(); err != nil {
				c.fail(fmt.Errorf("http1: write: %w", err))
			}
		}
	}
}

// failAll fails every call waiting in ch (after the connection failed).
func (c *Conn) failAll(ch chan *call) {
	for {
		select {
		case cl := <-ch:
			cl.err = c.failErr
			close(cl.done)
		default:
			return
		}
	}
}

func writeRequest(bw *bufio.Writer, host string, req *Request) {
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(req.Path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	for _, h := range req.Header {
		bw.WriteString(h[0])
		bw.WriteString(": ")
		bw.WriteString(h[1])
		bw.WriteString("\r\n")
	}
	if len(req.Body) > 0 || req.Method == http.MethodPut || req.Method == http.MethodPost {
		var n [20]byte
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(n[:0], int64(len(req.Body)), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	bw.Write(req.Body)
}

// readLoop reads answers in order and hands each to its call.
func (c *Conn) readLoop(br *bufio.Reader) {
	for {
		var cl *call
		select {
		case cl = <-c.pending:
		case <-c.failed:
			c.drain()
			return
		}
		err := readResponse(br, cl)
		if errors.Is(err, errLastAnswer) {
			close(cl.done)
			c.fail(ErrConnClosed)
			c.drain()
			return
		}
		if err != nil {
			c.fail(fmt.Errorf("http1: read: %w", err))
			cl.err = c.failErr
			close(cl.done)
			c.drain()
			return
		}
		close(cl.done)
	}
}

// drain fails every call still pending after the connection failed.
func (c *Conn) drain() {
	<-c.failed
	<-c.writerDone
	c.failAll(c.pending)
}

// errLastAnswer: the answer was delimited by the end of the connection.
var errLastAnswer = errors.New("http1: answer ends the connection")

// parseStatusLine returns the status code of a status line
// ("HTTP/1.1 200 OK").
func parseStatusLine(line []byte) (int, error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, fmt.Errorf("malformed status line %q", truncate(line))
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("malformed status line %q", truncate(line))
	}
	return status, nil
}

// readResponse reads one final answer (skipping interim 1xx ones).
func readResponse(br *bufio.Reader, cl *call) error {
	for {
		lr := &lineReader{br: br, budget: 1 << 20}
		line, err := lr.line()
		if err != nil {
			return err
		}
		status, err := parseStatusLine(line)
		if err != nil {
			return err
		}
		h := make(http.Header, 8)
		fr := framer{minor: int(line[7] - '0')}
		if err := lr.readHeader(h, &fr); err != nil {
			return err
		}
		if status >= 100 && status < 200 {
			continue
		}
		cl.resp.Status, cl.resp.Header = status, h
		if cl.head || status == http.StatusNoContent || status == http.StatusNotModified {
			return nil
		}
		f, _, err := fr.result()
		if err != nil {
			return err
		}
		if !f.chunked && f.length < 0 {
			// Delimited by the connection's end.
			body, err := io.ReadAll(io.LimitReader(br, maxResponseBody))
			cl.resp.Body = body
			if err == nil {
				err = errLastAnswer
			}
			return err
		}
		if f.length > maxResponseBody {
			return fmt.Errorf("%w: answer body of %d bytes (limit %d)", ErrBodyTooLarge, f.length, maxResponseBody)
		}
		body, _, err := readBody(br, f, maxResponseBody, nil)
		cl.resp.Body = body
		return err
	}
}
