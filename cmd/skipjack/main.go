// Command skipjack generates typed PostgreSQL job queues for Go from a
// skipjack.yaml file and checks that committed output is up to date.
//
// Usage:
//
//	skipjack generate    [-f skipjack.yaml] [--allow-breaking] [--contract]
//	skipjack check       [-f skipjack.yaml] [--allow-breaking]
//	skipjack migrate     [-f skipjack.yaml] [--database-url URL]
//	skipjack migrate status [-f skipjack.yaml] [--database-url URL]
//	skipjack migrate down   [N] [--force] [-f skipjack.yaml] [--database-url URL]
//	skipjack stats       [-f skipjack.yaml] [--database-url URL] [--json]
//	skipjack ui          [-f skipjack.yaml] [--database-url URL] [--listen ADDR] [--allowed-host HOST]... [--actions]
//	skipjack schema
//	skipjack version
//	skipjack jobs list   QUEUE [--state STATE] [--after ID] [--limit N] [--json]
//	skipjack jobs show   QUEUE ID... [--json]
//	skipjack jobs retry  QUEUE (ID... | --state STATE)
//	skipjack jobs cancel QUEUE (ID... | --state STATE)
//	skipjack queues pause  QUEUE
//	skipjack queues resume QUEUE
//	skipjack bench       [--database-url URL] [--jobs N] [--latency-jobs N] [--concurrency N]
//
// migrate, stats, jobs, queues and ui need only the YAML, the migrations folder and
// the database, no Go toolchain and no Go module: migrate applies the
// migrations folder with the runtime's applier; stats, jobs and ui run the
// queries of each queue's generated Admin on its table directly.
// --database-url defaults to $DATABASE_URL. Flags may follow arguments.
//
// Exit status: 0 ok, 1 a user-facing failure (bad config, drift, database
// error), 2 a usage error.
package main

import (
	"os"

	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
	"github.com/skipjack-dev/skipjack/generator/sqlcrun/sqlcchild"
)

func main() {
	if code, ok := sqlcchild.Main(); ok {
		os.Exit(code)
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	os.Exit(run(os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, sqlc: sqlcrun.Runner(exe)}))
}
