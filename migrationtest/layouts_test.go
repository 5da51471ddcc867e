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

// TestLayoutUpgradesRoundTrip applies the example's committed migrations:
// 0001 created its tables in layout 1 and the units after it upgrade them
// to layout 3, live (the cancel_requested and trace columns, the CHECK
// added NOT VALID and validated, the indexes built concurrently). It
// checks that the upgrade adds the columns, that a trace context written
// into an upgraded table reads back, and that each down migration, applied
// one by one from the last, takes send_email back to the columns it had
// before the matching up migration, after which the ups apply again. Each
// file is sent as one query, as golang-migrate sends it: a
// non-transactional one must hold a single statement.
func TestLayoutUpgradesRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "examples", "shop", "migrations")
	ups, err := filepath.Glob(filepath.Join(dir, "*.up.sql"))
	if err != nil || len(ups) < 3 {
		t.Fatalf("example migrations: %v (%d up files), want the first migration and the layout upgrade", err, len(ups))
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
	type cols struct{ cancelRequested, trace bool }
	columns := func() cols {
		t.Helper()
		q := `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'shop_jobs' AND table_name = 'send_email' AND column_name = $1`
		return cols{queryInt(t, conn, q, "cancel_requested") == 1, queryInt(t, conn, q, "trace") == 1}
	}

	after := make([]cols, len(ups)) // send_email's columns after each up
	for i, up := range ups {
		apply(up)
		after[i] = columns()
	}
	if after[0] != (cols{}) || after[len(ups)-1] != (cols{true, true}) {
		t.Errorf("send_email's layout columns after 0001: %+v, after every up: %+v; want none, then both", after[0], after[len(ups)-1])
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_constraint WHERE conname = 'send_email_running_lease' AND convalidated`); n != 1 {
		t.Errorf("validated running-lease CHECKs on send_email = %d, want 1", n)
	}
	execSQL(t, conn, `INSERT INTO shop_jobs.send_email (payload, trace) VALUES ('{}', '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}')`)
	if n := queryInt(t, conn, `SELECT count(*) FROM shop_jobs.send_email WHERE trace->>'traceparent' LIKE '00-4bf9%'`); n != 1 {
		t.Errorf("jobs with the trace context written = %d, want 1", n)
	}

	for i := len(ups) - 1; i >= 0; i-- {
		down := ups[i][:len(ups[i])-len(".up.sql")] + ".down.sql"
		apply(down)
		if i > 0 {
			if got := columns(); got != after[i-1] {
				t.Errorf("after %s: send_email has %+v, want %+v as after %s", filepath.Base(down), got, after[i-1], filepath.Base(ups[i-1]))
			}
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop_jobs'`); n != 0 {
		t.Errorf("after every down migration, %d tables remain in shop_jobs, want 0", n)
	}
	for _, up := range ups {
		apply(up)
	}
	if got := columns(); got != (cols{true, true}) {
		t.Errorf("after every up migration again: %+v, want both columns", got)
	}
}
