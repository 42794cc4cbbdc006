package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY returns a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Skipf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Skipf("ptsname: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

func kvServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/kv/bad" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"bad_request","message":"key too long"}`))
			return
		}
		w.Header().Set("ETag", `"7"`)
		w.Write([]byte("hello"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runKV(t *testing.T, out *os.File, buf *bytes.Buffer, args ...string) error {
	root := newRootCmd()
	root.SetArgs(append([]string{"kv"}, args...))
	if out != nil {
		root.SetOut(out)
	} else {
		root.SetOut(buf)
	}
	return root.Execute()
}

// Defect "cairn kv rough edges": on a terminal `kv get` ends the value with
// a newline; piped, it writes the value's bytes as they are.
func TestKVGetNewlineOnTerminal(t *testing.T) {
	srv := kvServer(t)
	master, slave := openPTY(t)
	if err := runKV(t, slave, nil, "get", "k", "--endpoints", srv.URL); err != nil {
		t.Fatal(err)
	}
	_ = master.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 64)
	n, err := master.Read(got)
	if err != nil || string(got[:n]) != "hello\r\n" {
		t.Fatalf("on a terminal: %q %v, want \"hello\\r\\n\"", got[:n], err)
	}
	var buf bytes.Buffer
	if err := runKV(t, nil, &buf, "get", "k", "--endpoints", srv.URL); err != nil || buf.String() != "hello" {
		t.Fatalf("piped: %q %v, want the raw value", buf.String(), err)
	}
}

// An error answer is reported without the client's own "cairn:" prefix
// (main prints one).
func TestKVErrorPrefixedOnce(t *testing.T) {
	srv := kvServer(t)
	var buf bytes.Buffer
	err := runKV(t, nil, &buf, "get", "bad", "--endpoints", srv.URL)
	if err == nil || strings.Contains(err.Error(), "cairn:") || !strings.Contains(err.Error(), "400 bad_request: key too long") {
		t.Fatalf("error %v", err)
	}
}
