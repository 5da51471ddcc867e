//go:build unix

package skipjacktest

import "syscall"

// detached puts the watchdog in its own session, so it outlives the test
// binary and is not killed with its process group.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
