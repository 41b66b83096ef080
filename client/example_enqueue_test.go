package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/client"
)

// Enqueue a job with extension options over HTTP, read it back, and see
// a typed error.
func ExampleClient_Enqueue() {
	srv, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.New(client.Config{URL: srv.URL()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	concurrency := 5
	job, err := c.Enqueue(ctx, "invoice.render", []any{"inv-42"},
		client.Queue("billing"),
		client.Priority(1), // lower runs first
		client.Timeout(2*time.Minute), client.GracePeriod(10*time.Second),
		client.Retry(client.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second}),
		client.RateLimit(client.RateLimitPolicy{Key: "pdf-service", Concurrency: &concurrency}),
		client.Tags("billing"), client.Meta("tenant", "acme"))
	if err != nil {
		panic(err)
	}
	got, err := c.Get(ctx, job.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Type, got.Queue, got.State, got.Priority, got.ExecutionTimeout(0), got.RateLimit.Key)

	_, err = c.Enqueue(ctx, "invoice.render", nil, client.Priority(-1))
	if e, ok := errors.AsType[*client.Error](err); ok {
		fmt.Println(e.Status, e.Details["field"])
	}
	// Output:
	// invoice.render billing available 1 2m0s pdf-service
	// 400 options.priority
}

// Producers under backpressure: a full queue answers 429; the client
// retries after Retry-After, and a run of refusals opens the breaker.
func ExampleConfig_backpressure() {
	srv, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.New(client.Config{
		URL:     srv.URL(),
		Retry:   client.RetryConfig{MaxRetries: -1}, // surface the first 429 (default: 5 retries)
		Breaker: client.BreakerConfig{Threshold: 2, Cooldown: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// Bound the queue at one job (an operator does this once).
	if err := putQueueBound(srv.URL(), "reports", 1); err != nil {
		panic(err)
	}
	_, _ = c.Enqueue(ctx, "report.build", nil, client.Queue("reports"))
	for range 3 {
		_, err := c.Enqueue(ctx, "report.build", nil, client.Queue("reports"))
		switch e, ok := errors.AsType[*client.Error](err); {
		case ok:
			fmt.Println(e.Status, e.Code, e.Retryable, e.RetryAfter)
		case errors.Is(err, client.ErrCircuitOpen):
			fmt.Println("circuit open: not sent")
		}
	}
	// Output:
	// 429 QUEUE_FULL true 1s
	// 429 QUEUE_FULL true 1s
	// circuit open: not sent
}
