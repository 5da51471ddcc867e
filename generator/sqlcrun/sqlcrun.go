// Package sqlcrun runs sqlc (github.com/sqlc-dev/sqlc) in a child process.
//
// sqlc's only public API, pkg/cli.Run, may call os.Exit, so skipjack never
// calls it in its own process: Runner starts a copy of an executable with
// ChildEnv set in its environment, and that executable's main (or TestMain)
// hands over to package sqlcchild, which runs sqlc and exits. This package
// does not link sqlc, so the generator's tests can run sqlc through the
// CLI without building its parser themselves; sqlcchild is the only package
// that links it, and only cmd/skipjack imports it.
package sqlcrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ChildEnv marks a process started by Runner: an executable that links
// package sqlcchild runs sqlc instead of its own main when it is set.
const ChildEnv = "SKIPJACK_SQLC_CHILD"

// Runner returns a generator.Options.SQLC function that runs `sqlc
// generate` on the sqlc.yaml in a folder, in a child process of exe: an
// executable whose main (or TestMain) calls sqlcchild.Main first. sqlc's
// diagnostics are returned in the error.
func Runner(exe string) func(dir string) error {
	return func(dir string) error {
		cmd := exec.Command(exe, "generate", "-f", filepath.Join(dir, "sqlc.yaml"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), ChildEnv+"=1")
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("sqlc generate: %v\n%s", err, strings.TrimSpace(out.String()))
		}
		return nil
	}
}
