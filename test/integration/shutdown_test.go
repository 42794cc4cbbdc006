package integration

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A node stops within a bounded time after SIGTERM whatever runs: here a
// trace whose client never reads its answer and a profile in flight. It
// used to wait for the trace's seconds (and ignored SIGTERM meanwhile).
func TestShutdownBoundedWhileTracing(t *testing.T) {
	c := newCluster(t, 1)
	// The bound holds: an unbounded trace is refused outright.
	if r := c.do(http.MethodGet, c.url(1)+"/debug/pprof/trace?seconds=100000", nil); r.code != http.StatusBadRequest || !isJSONError(r.body) {
		t.Fatalf("trace of 100000 s: %s", r)
	}
	// A 30 s trace (the longest allowed), asked for on a raw connection
	// that never reads. It is running once its connection has no answer
	// after a moment (a trace refused as busy would have answered at once).
	var conn net.Conn
	for attempt := 0; ; attempt++ {
		var err error
		if conn, err = net.Dial("tcp", c.lc.Node(1).HTTPAddr); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /debug/pprof/trace?seconds=30 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			break // no answer: the trace runs
		}
		if attempt == 5 {
			t.Fatal("the trace never started")
		}
		conn.Close()
	}
	// While it runs, another long run is refused.
	if r := c.do(http.MethodGet, c.url(1)+"/debug/pprof/profile?seconds=1", nil); r.code != http.StatusServiceUnavailable {
		t.Fatalf("second profile while a trace runs: %s", r)
	}
	start := time.Now()
	c.stop(1) // fails the test if the node needs SIGKILL or exits non-zero
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the node took %v to stop with a trace running", took)
	}
	// The trace's client got its (short) answer or the connection closed:
	// either way nothing hangs.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if line != "" && !strings.HasPrefix(line, "HTTP/1.1 ") {
		t.Fatalf("trace answer starts %q", line)
	}
}
