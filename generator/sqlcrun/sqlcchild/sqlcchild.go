// Package sqlcchild is the child side of package sqlcrun: it runs sqlc in a
// process that sqlcrun.Runner started. It is the only package that links
// sqlc (github.com/sqlc-dev/sqlc/pkg/cli), whose Run may call os.Exit, and
// only cmd/skipjack imports it.
package sqlcchild

import (
	"os"

	sqlc "github.com/sqlc-dev/sqlc/pkg/cli"

	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
)

// Main runs sqlc if this process is a child started by sqlcrun.Runner,
// returning its exit status and true; otherwise it returns 0 and false.
// Call it first thing in main (or TestMain):
//
//	if code, ok := sqlcchild.Main(); ok {
//		os.Exit(code)
//	}
func Main() (int, bool) {
	if os.Getenv(sqlcrun.ChildEnv) != "1" {
		return 0, false
	}
	return sqlc.Run(os.Args[1:]), true
}
