//go:build !linux

package integration

import "syscall"

// sysProcAttr: without Pdeathsig, nodes rely on t.Cleanup alone.
func sysProcAttr() *syscall.SysProcAttr { return nil }
