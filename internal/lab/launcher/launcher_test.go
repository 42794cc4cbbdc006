package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stubborn is a stand-in for cairn that ignores SIGTERM (it keeps the
// disposition across exec) and never exits on its own. It prints
// "trapped" once SIGTERM is ignored, so a test knows when its signal
// will be ignored rather than kill the shell.
const stubborn = "#!/bin/sh\ntrap '' TERM\necho trapped\nexec sleep 60\n"

// lockedBuffer collects a process's output; the test reads it while the
// process's output copier writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitOutput waits until out() holds want: a shell that prints a line
// after its trap has installed the trap. A fixed pause is not enough on
// a loaded machine, where the shell may not have run its first line
// yet, and a SIGTERM sent then kills it.
func waitOutput(t *testing.T, what string, out func() string, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %q within 30 s; output so far: %q", what, want, out())
		}
	}
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-cairn")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProcessStopKillsWhatIgnoresTERM(t *testing.T) {
	var out lockedBuffer
	p, err := StartProcess("sh", []string{"-c", `trap "" TERM; echo trapped; exec sleep 60`}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, "the shell", out.String, "trapped")
	start := time.Now()
	err = p.Stop(300 * time.Millisecond)
	if !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop of a process ignoring SIGTERM: %v, want ErrKilled", err)
	}
	if p.Running() {
		t.Fatal("still running after Stop")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Stop took %v with a 300ms bound", took)
	}
}

func TestProcessStopCleanExit(t *testing.T) {
	p, err := StartProcess("sleep", []string{"60"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// sleep dies of SIGTERM: an exit error, but not a kill after the bound.
	if err := p.Stop(10 * time.Second); err == nil || errors.Is(err, ErrKilled) {
		t.Fatalf("Stop: %v", err)
	}
	var out lockedBuffer
	p, err = StartProcess("sh", []string{"-c", `trap "exit 0" TERM; echo trapped; while :; do sleep 0.05; done`}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, "the shell", out.String, "trapped")
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop of a process exiting 0 on SIGTERM: %v", err)
	}
}

// Defect "cairn demo can hang on stop": every node gets its own bound, so
// two nodes that ignore SIGTERM are both killed.
func TestStopAllKillsEveryStuckNode(t *testing.T) {
	c, err := New(Config{Bin: script(t, stubborn), Nodes: 3, Dir: t.TempDir(), StopTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= 3; id++ {
		waitOutput(t, fmt.Sprint("node ", id), func() string { return c.Log(id) }, "trapped")
	}
	done := make(chan error, 1)
	go func() { done <- c.StopAll() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrKilled) {
			t.Fatalf("StopAll: %v, want ErrKilled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StopAll did not return within 10 s with a 300ms bound per node")
	}
	for id := 1; id <= 3; id++ {
		if c.Running(id) {
			t.Errorf("node %d still running", id)
		}
	}
}

func TestLifecycle(t *testing.T) {
	var exits []int
	exited := make(chan struct{}, 4)
	dir := t.TempDir()
	c, err := New(Config{Bin: script(t, "#!/bin/sh\necho started \"$@\"\nexec sleep 60\n"), Nodes: 2, Dir: dir,
		OnExit: func(id int, err error) { exits = append(exits, id); exited <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid(1)
	if !c.Running(1) || !c.Running(2) || pid == 0 {
		t.Fatal("nodes not running after StartAll")
	}
	// The stand-in has printed its command line before it is killed.
	waitOutput(t, "node 1", func() string { return c.Log(1) }, "started serve")
	if err := c.Pause(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(1); err != nil {
		t.Fatal(err)
	}
	c.Kill(1)
	if c.Running(1) {
		t.Fatal("node 1 running after Kill")
	}
	if err := c.Start(1); err != nil || c.Pid(1) == pid {
		t.Fatalf("restart: %v, pid %d (was %d)", err, c.Pid(1), pid)
	}
	// An exit the launcher did not cause is reported.
	if ep := c.Admin(1).Endpoint(); ep != "http://"+c.Node(1).HTTPAddr {
		t.Fatalf("endpoint %q", ep)
	}
	if p := c.proc(2); p != nil {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("exit of node 2 not reported")
	}
	if len(exits) != 1 || exits[0] != 2 {
		t.Fatalf("exits %v", exits)
	}
	log := c.Log(1)
	for _, want := range []string{"starting node 1", "started serve --node-id 1 --http-addr " + c.Node(1).HTTPAddr, "exited"} {
		if !strings.Contains(log, want) {
			t.Errorf("log of node 1 lacks %q:\n%s", want, log)
		}
	}
	// The first run's exit is logged before the second run starts.
	if ex, second := strings.Index(log, "exited"), strings.LastIndex(log, "starting node 1"); ex < 0 || ex > second {
		t.Errorf("log of node 1: the first run's exit is not before the restart:\n%s", log)
	}
	if !strings.Contains(log, "--initial-cluster 1="+c.Node(1).PeerAddr+",2="+c.Node(2).PeerAddr) {
		t.Errorf("log of node 1: no --initial-cluster:\n%s", log)
	}
	// A node that exits on its own fails readiness at once.
	err = c.WaitReady(t.Context(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "node 2 exited") {
		t.Fatalf("WaitReady with node 2 gone: %v", err)
	}
}

func TestFixedAddressTaken(t *testing.T) {
	addrs, err := FreeAddrs([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = New(Config{Bin: "cairn", Nodes: 1, Dir: t.TempDir(), HTTPAddrs: addrs})
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "not free") {
		t.Fatalf("New on a taken address: %v", err)
	}
}

// Exits of a try Launch gives up are never reported; a kept try's are,
// those before it was kept included.
func TestHeldExits(t *testing.T) {
	var got []int
	given := &heldExits{onExit: func(id int, _ error) { got = append(got, id) }}
	given.note(1, nil)
	if len(got) != 0 {
		t.Fatalf("reported before the try was kept: %v", got)
	}
	kept := &heldExits{onExit: given.onExit}
	kept.note(2, nil)
	kept.release()
	kept.note(3, nil)
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("reported %v, want [2 3] (node 1 was in a try given up)", got)
	}
}
