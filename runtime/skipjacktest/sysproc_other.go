//go:build !unix

package skipjacktest

import "syscall"

// detached has nothing to do on systems without sessions.
func detached() *syscall.SysProcAttr { return nil }
