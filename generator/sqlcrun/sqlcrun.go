// Package sqlcrun runs sqlc (github.com/sqlc-dev/sqlc) in a child process.
//
// sqlc's only public API, pkg/cli.Run, may call os.Exit, so skipjack never
// calls it in its own process: generator.SQLCRunner starts a copy of the
// current executable with a marker in its environment, and that child runs
// sqlc and exits. This is the only package that links sqlc; only cmd/skipjack imports
// it.
package sqlcrun

import (
	"os"

	sqlc "github.com/sqlc-dev/sqlc/pkg/cli"

	"github.com/skipjack-dev/skipjack/generator"
)

// Main runs sqlc if this process is a child started by
// generator.SQLCRunner, returning its exit status and true; otherwise it
// returns 0 and false. Call it first thing in main (or TestMain):
//
//	if code, ok := sqlcrun.Main(); ok {
//		os.Exit(code)
//	}
func Main() (int, bool) {
	if os.Getenv(generator.SQLCChildEnv) != "1" {
		return 0, false
	}
	return sqlc.Run(os.Args[1:]), true
}
