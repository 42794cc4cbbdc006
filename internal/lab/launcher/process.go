package launcher

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// Errors of the process layer.
var (
	// ErrKilled: a process did not exit within its bound after SIGTERM and
	// was killed with SIGKILL.
	ErrKilled = errors.New("launcher: no exit after SIGTERM within the bound; killed")
	// ErrAddrInUse: an address a node needs is taken.
	ErrAddrInUse = errors.New("launcher: address already in use")
	// ErrNotReady: the cluster did not become ready in time.
	ErrNotReady = errors.New("launcher: cluster not ready")
)

// pipeDrain bounds how long Wait keeps copying a process's output after it
// exited (a grandchild may hold the pipe open).
const pipeDrain = time.Second

// Process is one child process. Its methods are safe for concurrent use.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result; read after done is closed
}

// StartProcess starts name with args, its stdout and stderr going to out
// (nil: discarded). attr may be nil.
func StartProcess(name string, args []string, out io.Writer, attr *syscall.SysProcAttr) (*Process, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = attr
	cmd.WaitDelay = pipeDrain
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is the process's exit error (nil: status 0); only meaningful
// once Done is closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.err
}

// Signal sends s unless the process has exited.
func (p *Process) Signal(s syscall.Signal) error {
	if !p.Running() {
		return nil
	}
	return p.cmd.Process.Signal(s)
}

// Stop sends SIGTERM (and SIGCONT, so that a paused process sees it) and
// waits up to timeout for the process to exit; then it sends SIGKILL and
// returns ErrKilled once the process is gone. A process that exits in
// time returns its exit error (nil for status 0).
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
	}
	p.Kill()
	return fmt.Errorf("%w (pid %d, %v)", ErrKilled, p.Pid(), timeout)
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Pause stops the process with SIGSTOP; Resume continues it (SIGCONT).
func (p *Process) Pause() error  { return p.Signal(syscall.SIGSTOP) }
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }
