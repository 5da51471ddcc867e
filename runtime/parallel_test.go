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
// default is GOMAXPROCS). The heaviest tests hold, at most: TestUniqueRace
// 34 (its pool) + 1; TestPeriodicProcesses 5 worker processes of about 8
// (a handler connection, a control pool of up to 6, a LISTEN connection)
// + 4; TestPoisonJobCrashLoop and the other child-process tests less; every
// other test at most a pool of 20 + a control pool of 6 + 1 per worker.
// Two of them at once: at most 34 + 1 + 44 = 79, beside the skipjackimpl
// and skipjacktest packages (a few connections each) that go test may run
// at the same time. scripts/connbudget.sh measured a peak of 37 client
// connections for the whole module on a 100-connection cluster.
const maxParallel = 2

func init() {
	testing.Init()
	if n := min(runtime.GOMAXPROCS(0), maxParallel); n > 0 {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
