package skipjack_test

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// maxParallel is how many of this package's parallel tests run at once
// unless -parallel says otherwise, so the suite's connections fit a server
// with the default max_connections of 100 on a machine of any size (the
// default is GOMAXPROCS).
//
// The rule that keeps it so: a parallel test holds at most about 45
// connections, so two of them fit beside the skipjackimpl and skipjacktest
// packages (a few connections each) that go test may run at the same time.
// The heaviest parallel tests: TestUniqueRace 34 (its pool) + 1;
// TestPeriodicProcesses 5 worker processes of about 8 (a handler
// connection, a control pool of up to 6, a LISTEN connection) + 4; every
// other test at most a pool of 20 + a control pool of 6 + 1 per worker. A
// test whose processes hold more does not call t.Parallel, so it runs
// alone: the workflow tests' worker processes (TestWorkflowDiamonds*) held
// 59 and 80, and CI once failed TestUniqueRace with "too many clients" when
// both ran beside it. scripts/connbudget.sh measures the peaks, of the
// whole suite and of each test's database.
const maxParallel = 2

func init() {
	testing.Init()
	if n := min(runtime.GOMAXPROCS(0), maxParallel); n > 0 {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
