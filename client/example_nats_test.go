package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/client"
)

// A Go microservice on NATS, with no HTTP at all: it enqueues over the
// NATS binding and works the jobs with a worker that fetches with a
// server-side wait and acknowledges in batches.
func Example_natsMicroservice() {
	srv, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	nc, err := nats.Connect(srv.NatsURL()) // the service's own NATS connection
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	c, err := client.New(client.Config{Conn: nc}) // subjects ojs.v1.*
	if err != nil {
		panic(err)
	}

	results := make(chan string, 3)
	w, err := c.NewWorker(client.WorkerConfig{Queues: []string{"thumbnails"}, Concurrency: 8,
		FetchWait: 200 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	w.Handle("image.thumbnail", func(ctx context.Context, job *client.Job) (any, error) {
		results <- string(job.Args)
		return map[string]string{"thumb": "ok"}, nil
	})
	if err := w.Start(); err != nil {
		panic(err)
	}

	if _, err := c.EnqueueBatch(ctx, []client.Request{
		{Type: "image.thumbnail", Args: []any{"a.png"}, Options: []client.Option{client.Queue("thumbnails")}},
		{Type: "image.thumbnail", Args: []any{"b.png"}, Options: []client.Option{client.Queue("thumbnails"), client.Priority(0)}},
	}); err != nil {
		panic(err)
	}
	seen := map[string]bool{<-results: true, <-results: true}
	fmt.Println(len(seen), seen[`["a.png"]`], seen[`["b.png"]`])

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fmt.Println(w.Stop(sctx))
	// Output:
	// 2 true true
	// <nil>
}
