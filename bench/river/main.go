// Command river drains a backlog through River, the Postgres-backed Go job
// queue that issue 17 compares jetgate's HTTP drain with (jetgate bench
// drain-http): n no-op jobs inserted in batches of 100, then drained by a
// River client with --handlers workers, counted as done when their
// completion is committed. It is a module of its own so that River and
// pgx never enter jetgate's dependencies.
//
//	pg_ctlcluster 15 main start
//	psql -c "create user river with password 'river' superuser" -c 'create database riverbench owner river'
//	go run . --handlers 100 --rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.worked.Add(1)
	return nil
}

func main() {
	dsn := flag.String("dsn", "postgres://river:river@127.0.0.1:5432/riverbench?pool_max_conns=40", "Postgres URL")
	n := flag.Int("n", 20000, "jobs per round")
	handlers := flag.Int("handlers", 100, "River MaxWorkers of the queue")
	rounds := flag.Int("rounds", 3, "rounds")
	// River's defaults (100 ms, 1 s) cap a drain at handlers per 100 ms;
	// 1 ms is the fastest River allows, the strongest comparison.
	cooldown := flag.Duration("cooldown", time.Millisecond, "River FetchCooldown")
	poll := flag.Duration("poll", 50*time.Millisecond, "River FetchPollInterval")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	drv := riverpgxv5.New(pool)
	m, err := rivermigrate.New(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}
	var drains, inserts []float64
	for r := 0; r < *rounds; r++ {
		ins, drain, err := round(ctx, pool, drv, *n, *handlers, *cooldown, *poll)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("round %d: %d handlers, insert %.0f jobs/s, drain %.0f jobs/s\n", r+1, *handlers, ins, drain)
		inserts, drains = append(inserts, ins), append(drains, drain)
	}
	fmt.Printf("median: %d handlers, insert %.0f jobs/s, drain %.0f jobs/s\n", *handlers, median(inserts), median(drains))
}

// round inserts n jobs in batches of 100 into an empty table, then drains
// them: from the client's start to the commit of the n-th completion.
func round(ctx context.Context, pool *pgxpool.Pool, drv *riverpgxv5.Driver, n, handlers int, cooldown, poll time.Duration) (ins, drain float64, err error) {
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return 0, 0, err
	}
	var worked atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{worked: &worked})
	client, err := river.NewClient(drv, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: handlers}},
		Workers:           workers,
		FetchCooldown:     cooldown,
		FetchPollInterval: poll,
	})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for i := 0; i < n; i += 100 {
		params := make([]river.InsertManyParams, 0, 100)
		for k := i; k < min(i+100, n); k++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{N: k}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return 0, 0, err
		}
	}
	ins = float64(n) / time.Since(start).Seconds()
	start = time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	for worked.Load() < int64(n) { // not the database: counting there would load it
		time.Sleep(time.Millisecond)
	}
	for { // the completions River commits in batches
		var done int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
			return 0, 0, err
		}
		if done >= n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return ins, float64(n) / time.Since(start).Seconds(), nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
