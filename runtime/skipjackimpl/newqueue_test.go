package skipjackimpl

import (
	"context"
	"errors"
	"reflect"
	"slices"
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
	enqueueAllQueries[enqueueAllRow]
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
// one-row and many-row claims, and that reading them back as sqlc's type
// (as ClaimInto's dst) gives the rows it started from.
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
		got := sameRows[ClaimedRow](rows)
		if len(got) != n || cap(got) != cap(rows) {
			t.Fatalf("%d rows: got %d of capacity %d, want capacity %d", n, len(got), cap(got), cap(rows))
		}
		for i := range got {
			if want := ClaimedRow(row(int64(i))); !reflect.DeepEqual(got[i], want) {
				t.Fatalf("%d rows: row %d = %+v, want %+v", n, i, got[i], want)
			}
		}
		if back := sameRows[generatedClaimRow](got); !reflect.DeepEqual(back, rows) {
			t.Fatalf("%d rows: read back as sqlc's type, they differ from the rows scanned", n)
		}
	}
}

// intoQueries are fakeQueries with the Into variants skipjack generates;
// they record what they were given and fail if sqlc's plain Claim or
// Complete runs instead.
type intoQueries struct {
	fakeQueries
	claimDst    []claimedShape
	completeDst []completeRow
}

func (q *intoQueries) Claim(context.Context, time.Duration, string, int32) ([]claimedShape, error) {
	return nil, errors.New("sqlc's Claim ran, not ClaimInto")
}

func (q *intoQueries) ClaimInto(_ context.Context, dst []claimedShape, _ time.Duration, _ string, max int32) ([]claimedShape, error) {
	q.claimDst = dst
	for i := range max {
		dst = append(dst, claimedShape{ID: int64(i + 1)})
	}
	return dst, nil
}

func (q *intoQueries) Complete(context.Context, []int64, []int32, []int64) ([]completeRow, error) {
	return nil, errors.New("sqlc's Complete ran, not CompleteInto")
}

func (q *intoQueries) CompleteInto(_ context.Context, dst []completeRow, ids []int64, _ []int32, _ []int64) ([]completeRow, error) {
	q.completeDst = dst
	for _, id := range ids[1:] { // the first id is no longer this attempt's
		dst = append(dst, completeRow{ID: id, At: time.Unix(id, 0)})
	}
	return dst, nil
}

// TestBindingRunsIntoQueries checks that the runtime claims and completes
// through the Into variants when the generated queries have them: claims
// append to the slice the worker keeps, and acknowledgements scan into one
// slice sized for every id.
func TestBindingRunsIntoQueries(t *testing.T) {
	t.Parallel()
	q := &intoQueries{}
	b := newBinding[claimedShape, heartbeatRow, recordRow, recordRow, statsShape, copyRow, copyAtRow, headroom, activityRow, failureGroupRow, completeRow](q)
	kept := make([]ClaimedRow, 0, 8)
	rows, err := b.Claim(context.Background(), kept, 3, time.Minute, "w")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].ID != 3 || cap(q.claimDst) != 8 || &rows[0] != &kept[:1][0] {
		t.Errorf("Claim returned %d rows (capacity %d given to ClaimInto), want 3 in the kept slice of capacity 8", len(rows), cap(q.claimDst))
	}
	matched, at, err := b.Complete(context.Background(), []int64{7, 8, 9}, []int32{1, 1, 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(matched, []int64{8, 9}) || !at.Equal(time.Unix(9, 0)) {
		t.Errorf("Complete = %v at %v, want [8 9] at the last row's time", matched, at)
	}
	if len(q.completeDst) != 0 || cap(q.completeDst) != 3 {
		t.Errorf("CompleteInto was given %d rows of capacity %d, want none of capacity 3 (one per id)", len(q.completeDst), cap(q.completeDst))
	}
}
