// Command skipjack generates typed PostgreSQL job queues for Go from a
// skipjack.yaml file and checks that committed output is up to date.
//
// Usage:
//
//	skipjack generate [-f skipjack.yaml]
//	skipjack check    [-f skipjack.yaml]
//	skipjack migrate  [-f skipjack.yaml] [--database-url URL]
//	skipjack stats    [-f skipjack.yaml] [--database-url URL] [--json]
//
// Exit status: 0 ok, 1 a user-facing failure (bad config, drift, database
// error), 2 a usage error.
package main

import (
	"os"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
)

func main() {
	if code, ok := sqlcrun.Main(); ok {
		os.Exit(code)
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	os.Exit(run(os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, sqlc: generator.SQLCRunner(exe)}))
}
