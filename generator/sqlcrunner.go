package generator

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SQLCChildEnv marks a process started by SQLCRunner: an executable that
// links package sqlcrun runs sqlc instead of its own main when it is set.
const SQLCChildEnv = "SKIPJACK_SQLC_CHILD"

// SQLCRunner returns an Options.SQLC function that runs `sqlc generate` on
// the sqlc.yaml in a folder, in a child process of exe: an executable whose
// main (or TestMain) calls sqlcrun.Main first. sqlc's diagnostics are
// returned in the error.
func SQLCRunner(exe string) func(dir string) error {
	return func(dir string) error {
		cmd := exec.Command(exe, "generate", "-f", filepath.Join(dir, "sqlc.yaml"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), SQLCChildEnv+"=1")
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("sqlc generate: %v\n%s", err, strings.TrimSpace(out.String()))
		}
		return nil
	}
}
