package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// inserter is one bulk-insert API under test: insert puts ps in the
// database with one call.
type inserter struct {
	name   string
	insert func(ctx context.Context, ps []payload) error
}

// skipjackInserters returns skipjack's bulk inserts on pool (the noop
// queue's EnqueueMany and EnqueueAll). It is set by skipjack.go.
var skipjackInserters func(pool *pgxpool.Pool) []inserter

// insertCalls is how many calls of each size one round measures: enough
// that a round of the smallest sizes is not one sample of noise.
func insertCalls(size int) int {
	switch {
	case size <= 10:
		return 200
	case size <= 1000:
		return 20
	default:
		return 2
	}
}

// insertSizes compares the bulk inserts of skipjack (EnqueueMany with COPY,
// EnqueueAll with one INSERT returning a result per job) and River
// (InsertMany returning a result per job, InsertManyFast with COPY) on one
// database, for each size of o.insert. Every round goes through every size
// and, within it, every API in turn (the order rotating from round to
// round), then empties the tables, so machine noise and table growth spread
// over all of them. It prints the median time per call and its ratio to
// EnqueueAll's.
func (b *bench) insertSizes(ctx context.Context) error {
	if skipjackInserters == nil {
		return fmt.Errorf("built without skipjack")
	}
	name, dsn, err := b.a.freshDB(ctx, "insert", "insert")
	if err != nil {
		return err
	}
	if !b.o.keepDBs {
		defer func() { _ = b.a.dropDB(context.WithoutCancel(ctx), name) }()
	}
	pool, err := openPool(ctx, dsn, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := skipjackMigrate(ctx, pool); err != nil {
		return fmt.Errorf("skipjack migrate: %w", err)
	}
	if err := migrateRiver(ctx, pool); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: b.o.logger()})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	apis := append(skipjackInserters(pool),
		inserter{"River InsertMany", func(ctx context.Context, ps []payload) error {
			_, err := client.InsertMany(ctx, riverParams(ps))
			return err
		}},
		inserter{"River InsertManyFast (COPY)", func(ctx context.Context, ps []payload) error {
			_, err := client.InsertManyFast(ctx, riverParams(ps))
			return err
		}},
	)
	fmt.Fprintf(b.out, "\nBulk insert, one call of N jobs (median ms per call over %d round(s), APIs and sizes interleaved; ratio = time / EnqueueAll's)\n\n", b.o.runs)
	samples := make(map[string][]float64) // api/size -> ms per call
	for r := range b.o.runs {
		for _, size := range b.o.insert {
			ps := make([]payload, size)
			for i := range ps {
				ps[i] = payload{N: int64(i), Label: "insert"}
			}
			for k := range apis {
				api := apis[(k+r)%len(apis)]
				for range insertCalls(size) {
					start := time.Now()
					if err := api.insert(ctx, ps); err != nil {
						return fmt.Errorf("%s of %d: %w", api.name, size, err)
					}
					key := fmt.Sprintf("%s/%d", api.name, size)
					samples[key] = append(samples[key], float64(time.Since(start).Microseconds())/1000)
				}
			}
			if _, err := pool.Exec(ctx, `TRUNCATE skipjack.noop, river_job`); err != nil {
				return fmt.Errorf("empty the tables: %w", err)
			}
			b.logf("insert round %d size %d done", r+1, size)
		}
	}
	fmt.Fprintf(b.out, "%-30s", "API")
	for _, size := range b.o.insert {
		fmt.Fprintf(b.out, " %20s", fmt.Sprintf("N=%d", size))
	}
	fmt.Fprintln(b.out)
	for _, api := range apis {
		fmt.Fprintf(b.out, "%-30s", api.name)
		for _, size := range b.o.insert {
			m := median(samples[fmt.Sprintf("%s/%d", api.name, size)])
			base := median(samples[fmt.Sprintf("%s/%d", "skipjack EnqueueAll", size)])
			fmt.Fprintf(b.out, " %20s", fmt.Sprintf("%.3f ms (%.2fx)", m, m/base))
		}
		fmt.Fprintln(b.out)
	}
	fmt.Fprintln(b.out, strings.Repeat("-", 30))
	for _, size := range b.o.insert {
		base := median(samples[fmt.Sprintf("%s/%d", "skipjack EnqueueAll", size)])
		fmt.Fprintf(b.out, "N=%d: EnqueueAll %.0f jobs/s\n", size, float64(size)/(base/1000))
	}
	return nil
}

// riverParams returns ps as River's InsertMany takes them.
func riverParams(ps []payload) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(ps))
	for i, p := range ps {
		params[i] = river.InsertManyParams{Args: riverArgs(p)}
	}
	return params
}
