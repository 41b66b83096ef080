package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/client"
)

// A worker with one handler per job type: it reports progress, returns a
// result (the ack), fails with a typed error, or tells the server to hold
// a rate-limit key; Stop drains it (Run does the same on SIGTERM).
func ExampleWorker() {
	srv, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(client.Config{URL: srv.URL()})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	done := make(chan struct{}, 1)
	w, err := c.NewWorker(client.WorkerConfig{
		Queues:      []string{"math"},
		Concurrency: 4,
		// Over HTTP an idle worker polls; over NATS its fetch waits at the server.
		PollInterval: 50 * time.Millisecond,
		OnReported: func(job *client.Job, acked bool, err error) {
			done <- struct{}{}
		},
	})
	if err != nil {
		panic(err)
	}
	w.Handle("math.add", func(ctx context.Context, job *client.Job) (any, error) {
		var args []int
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return nil, client.Fail("bad_args", err.Error(), false) // no retry
		}
		if err := client.ReportProgress(ctx, 0.5, "adding"); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done(): // execution timeout, cancelled job, or drain
			return nil, context.Cause(ctx)
		default:
		}
		return map[string]int{"sum": args[0] + args[1]}, nil
	})
	w.Handle("partner.call", func(ctx context.Context, job *client.Job) (any, error) {
		// The partner said 429: no job of this key starts for a minute.
		return nil, client.RateLimitedUntil(time.Now().Add(time.Minute))
	})
	if err := w.Start(); err != nil {
		panic(err)
	}

	job, err := c.Enqueue(ctx, "math.add", []any{2, 3}, client.Queue("math"), client.Timeout(30*time.Second))
	if err != nil {
		panic(err)
	}
	<-done
	got, _ := c.Get(ctx, job.ID)
	fmt.Println(got.State, string(got.Result), *got.Progress, got.ProgressMessage)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fmt.Println(w.Stop(sctx), w.State())
	// Output:
	// completed {"sum":5} 1 adding
	// <nil> terminate
}
