package integration

import "syscall"

// sysProcAttr makes the kernel kill a node when the test process dies (a
// `go test -timeout` panic skips every t.Cleanup), so no node outlives its
// test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
