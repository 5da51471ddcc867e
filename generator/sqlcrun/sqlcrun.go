// Package sqlcrun runs sqlc (github.com/sqlc-dev/sqlc) in a child process.
//
// sqlc's only public API, pkg/cli.Run, may call os.Exit, so skipjack never
// calls it in its own process: the generator starts a copy of the current
// executable with a marker in its environment, and that child runs sqlc and
// exits. This is the only package that links sqlc; only cmd/skipjack imports
// it.
package sqlcrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	sqlc "github.com/sqlc-dev/sqlc/pkg/cli"
)

// childEnv marks a process started by Runner to run sqlc.
const childEnv = "SKIPJACK_SQLC_CHILD"

// Main runs sqlc if this process is a child started by Runner, returning its
// exit status and true; otherwise it returns 0 and false. Call it first
// thing in main (or TestMain):
//
//	if code, ok := sqlcrun.Main(); ok {
//		os.Exit(code)
//	}
func Main() (int, bool) {
	if os.Getenv(childEnv) != "1" {
		return 0, false
	}
	return sqlc.Run(os.Args[1:]), true
}

// Runner returns a function that runs `sqlc generate` on the sqlc.yaml in
// dir, in a child process of the executable at exe (usually
// os.Executable()). sqlc's diagnostics are returned in the error.
func Runner(exe string) func(dir string) error {
	return func(dir string) error {
		cmd := exec.Command(exe, "generate", "-f", filepath.Join(dir, "sqlc.yaml"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), childEnv+"=1")
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("sqlc generate: %v\n%s", err, strings.TrimSpace(out.String()))
		}
		return nil
	}
}
