package migrationtest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestLayoutUpgradesRoundTrip applies the example's committed migrations,
// which were generated over time: 0001 created its tables in layout 1,
// 0002 upgraded them to layout 2 and 0003 to layout 3 (the trace column).
// It checks the columns each step adds, that a trace context written into
// an upgraded table reads back, and that the down migrations, applied one
// by one, remove what their up migrations added, after which the ups apply
// again.
func TestLayoutUpgradesRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "examples", "shop", "migrations")
	ups, err := filepath.Glob(filepath.Join(dir, "*.up.sql"))
	if err != nil || len(ups) < 3 {
		t.Fatalf("example migrations: %v (%d up files), want at least 0001..0003", err, len(ups))
	}
	slices.Sort(ups)
	conn := connect(t, skipjacktest.NewDatabase(t))
	apply := func(file string) {
		t.Helper()
		sql, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := conn.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("apply %s: %v", filepath.Base(file), err)
		}
	}
	// columns reports which of the layout columns send_email has.
	columns := func() (cancelRequested, trace bool) {
		t.Helper()
		q := `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'shop_jobs' AND table_name = 'send_email' AND column_name = $1`
		return queryInt(t, conn, q, "cancel_requested") == 1, queryInt(t, conn, q, "trace") == 1
	}
	want := func(step string, cancelRequested, trace bool) {
		t.Helper()
		if c, tr := columns(); c != cancelRequested || tr != trace {
			t.Errorf("after %s: cancel_requested %v, trace %v; want %v, %v", step, c, tr, cancelRequested, trace)
		}
	}

	for i, up := range ups[:3] {
		apply(up)
		want(filepath.Base(up), i >= 1, i >= 2)
	}
	for _, up := range ups[3:] {
		apply(up)
	}
	execSQL(t, conn, `INSERT INTO shop_jobs.send_email (payload, trace) VALUES ('{}', '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`)
	if n := queryInt(t, conn, `SELECT count(*) FROM shop_jobs.send_email WHERE trace->>'traceparent' LIKE '00-4bf9%'`); n != 1 {
		t.Errorf("jobs with the trace context written = %d, want 1", n)
	}

	for i := len(ups) - 1; i >= 0; i-- {
		down := ups[i][:len(ups[i])-len(".up.sql")] + ".down.sql"
		apply(down)
		if i == 2 {
			want(filepath.Base(down), true, false)
		}
		if i == 1 {
			want(filepath.Base(down), false, false)
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop_jobs'`); n != 0 {
		t.Errorf("after every down migration, %d tables remain in shop_jobs, want 0", n)
	}
	for _, up := range ups {
		apply(up)
	}
	want("every up migration again", true, true)
}
