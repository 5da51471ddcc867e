package skipjackimpl

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// statsShape is the shape StatsRow names.
type statsShape struct {
	Pending, Scheduled, Running, Completed, Failed int64
	OldestPending                                  time.Duration
	Paused                                         bool
}

// fakeQueries has the method set of a queue's sqlc Queries (calling any
// method panics); NewQueue only inspects it.
type fakeQueries struct {
	Queries[claimedShape, heartbeatRow, recordRow, recordRow, statsShape, copyRow, copyAtRow, headroom, activityRow, failureGroupRow, completeRow]
	db any
}

// batchDB is a DBTX that skipjack.DBTX does not satisfy.
type batchDB interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// TestNewQueueBindsSqlcNew checks that NewQueue takes a sqlc New function
// over the package's own DBTX interface, hands it the db a function was
// given (nil stays nil), and refuses, at start, a New whose DBTX
// skipjack.DBTX does not satisfy or queries that lack a declared feature.
func TestNewQueueBindsSqlcNew(t *testing.T) {
	t.Parallel()
	type sqlcDBTX interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
	var got []any
	q := NewQueue[int](QueueSpec{Name: "ok"}, func(db sqlcDBTX) *fakeQueries {
		got = append(got, db)
		return &fakeQueries{db: db}
	})
	b := q.bind(nil).(binding[claimedShape, heartbeatRow, recordRow, recordRow, statsShape, copyRow, copyAtRow, headroom, activityRow, failureGroupRow, completeRow])
	if db := b.q.(*fakeQueries).db; db != nil {
		t.Errorf("bind(nil) gave New %v, want nil", db)
	}
	if len(got) != 2 {
		t.Errorf("New called %d times, want 2 (the feature check and bind)", len(got))
	}

	tests := []struct {
		name string
		new  func()
		want string
	}{
		{"DBTX not satisfied", func() {
			NewQueue[int](QueueSpec{Name: "batch"}, func(batchDB) *fakeQueries { return &fakeQueries{} })
		}, "skipjack.DBTX does not satisfy"},
		{"DBTX not an interface", func() {
			NewQueue[int](QueueSpec{Name: "conn"}, func(*pgx.Conn) *fakeQueries { return &fakeQueries{} })
		}, "skipjack.DBTX does not satisfy"},
		{"unique without its queries", func() {
			NewQueue[int](QueueSpec{Name: "uniq", Unique: true}, func(DBTX) *fakeQueries { return &fakeQueries{} })
		}, "lack Duplicate or EnqueueBatch"},
		{"schedules without their queries", func() {
			NewQueue[int](QueueSpec{Name: "tick", Schedules: []Schedule{{}}}, func(DBTX) *fakeQueries { return &fakeQueries{} })
		}, "lack EnqueueSlot or LastSlot"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("NewQueue panicked with %q, want a panic containing %q", msg, tc.want)
				}
			}()
			tc.new()
		})
	}
}

// TestZeroWorkerRun checks that Run of a Worker not made by a queue's
// NewWorker returns an error instead of panicking.
func TestZeroWorkerRun(t *testing.T) {
	t.Parallel()
	for _, w := range []*skipjack.Worker[int]{nil, new(skipjack.Worker[int])} {
		if err := w.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "NewWorker") {
			t.Errorf("Run of %v = %v, want an error naming NewWorker", w, err)
		}
	}
}

// generatedClaimRow is a named row type of claimedShape, as sqlc generates
// one per queue.
type generatedClaimRow claimedShape

// TestClaimedRowsKeepsEveryField checks that the claim rows the runtime
// reads in place of sqlc's are the same rows, field for field, for empty,
// one-row and many-row claims.
func TestClaimedRowsKeepsEveryField(t *testing.T) {
	t.Parallel()
	row := func(id int64) generatedClaimRow {
		at := time.Date(2026, 12, 4, 0, 0, 0, int(id), time.UTC)
		return generatedClaimRow{
			ID: id, Attempt: int32(id + 1), Claim: int32(id + 2), MaxAttempts: int32(id + 3), Priority: int16(id + 4),
			Payload: []byte(`{"n":1}`), RunAt: at, CreatedAt: at.Add(-time.Second), Rescues: int32(id + 5),
			Errors: []byte(`[]`), Trace: []byte(`{}`),
		}
	}
	for _, n := range []int{0, 1, 3000} {
		rows := make([]generatedClaimRow, n)
		for i := range rows {
			rows[i] = row(int64(i))
		}
		got := claimedRows(rows)
		if len(got) != n {
			t.Fatalf("%d rows: got %d", n, len(got))
		}
		for i := range got {
			if want := ClaimedRow(row(int64(i))); !reflect.DeepEqual(got[i], want) {
				t.Fatalf("%d rows: row %d = %+v, want %+v", n, i, got[i], want)
			}
		}
	}
}
