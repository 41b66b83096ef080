package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/client"
)

// NATSWorkerDrain is the Go client's path over the NATS binding on queue:
// n jobs enqueued by one producer in batches of batch
// (ojs.v1.jobs.batch, one after the other), then drained by a
// client.Worker of handlers handlers (no-op handler) that fetches for its
// free slots (ojs.v1.workers.fetch, with a server-side wait only when
// idle) and acknowledges in batches (ojs.v1.workers.ackbatch, as many
// acks per request as are waiting). jobs/s runs from the worker's start
// to the n-th ack the server confirmed; insert jobs/s is the inserts'.
// The worker runs in a process of its own unless inProcess
// (workerproc.go); producer and worker each have their own NATS
// connection. queue is left empty.
func (e *Env) NATSWorkerDrain(ctx context.Context, queue string, n, batch, handlers, size int, inProcess bool) (Sample, error) {
	c, closeConn, err := goClient(e.nc.ConnectedUrl(), "jetgate bench Go producer")
	if err != nil {
		return Sample{}, err
	}
	defer closeConn()
	pad := strings.Repeat("x", max(size-48, 1))
	ins, err := enqueueRun(ctx, Shape{Jobs: n, Producers: 1}, batch, func(ctx context.Context, first, k int) error {
		reqs := make([]client.Request, k)
		for i := range k {
			reqs[i] = client.Request{Type: "bench.noop", Args: []any{first + i, pad}, Options: []client.Option{client.Queue(queue)}}
		}
		jobs, err := c.EnqueueBatch(ctx, reqs)
		if err != nil {
			return fmt.Errorf("enqueue batch at %d: %w", first, err)
		}
		if len(jobs) != k {
			return fmt.Errorf("enqueue batch at %d: %d jobs, want %d", first, len(jobs), k)
		}
		return nil
	})
	if err != nil {
		return Sample{}, err
	}
	s, err := drainWith(ctx, workerSpec{Kind: workerGoNATS, URL: e.nc.ConnectedUrl(), Queue: queue,
		WorkerID: fmt.Sprintf("bench-go-%d", nextRun()), Jobs: n, Handlers: handlers}, inProcess, nil)
	if err != nil {
		return Sample{}, err
	}
	s.Metrics[insertPerSec.Name] = ins.Metrics["jobs/s"]
	return s, nil
}

// goClient is a Go client on a NATS connection of its own to url, named
// name; closeConn closes the connection.
func goClient(url, name string) (c *client.Client, closeConn func(), err error) {
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, nil, fmt.Errorf("connect Go client: %w", err)
	}
	c, err = client.New(client.Config{Conn: nc, Timeout: 30 * time.Second})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc.Close, nil
}

// workerDrain drains n jobs of queue with a client.Worker of handlers
// handlers and checks each was acked exactly once.
func workerDrain(ctx context.Context, c *client.Client, queue, workerID string, n, handlers int) (Sample, error) {
	led := newLedger(false)
	done := make(chan struct{})
	var once sync.Once
	var failed atomic.Pointer[error]
	fail := func(err error) {
		failed.CompareAndSwap(nil, &err)
		once.Do(func() { close(done) })
	}
	var end atomic.Int64
	w, err := c.NewWorker(client.WorkerConfig{
		Queues: []string{queue}, Concurrency: handlers, WorkerID: workerID,
		FetchWait: time.Second, DrainTimeout: 10 * time.Second,
		OnReported: func(j *client.Job, acked bool, err error) {
			if err == nil && !acked {
				err = fmt.Errorf("job %s nacked", j.ID)
			}
			if err != nil {
				fail(fmt.Errorf("ack %s: %w", j.ID, err))
				return
			}
			i, err := argIndex(j.Args)
			if err == nil {
				err = led.complete(i, j.ID)
			}
			if err != nil {
				fail(err)
				return
			}
			if led.acked.Load() == int64(n) {
				end.Store(time.Now().UnixNano())
				once.Do(func() { close(done) })
			}
		},
	})
	if err != nil {
		return Sample{}, err
	}
	w.Handle("bench.noop", func(context.Context, *client.Job) (any, error) { return nil, nil })
	start := time.Now()
	tl := startTimeline(&led.acked)
	if err := w.Start(); err != nil {
		return Sample{}, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		fail(fmt.Errorf("drain: %w", ctx.Err()))
	}
	timeline := tl.stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := w.Stop(sctx)
	if p := failed.Load(); p != nil {
		return Sample{}, *p
	}
	if stopErr != nil {
		return Sample{}, stopErr
	}
	if err := led.verify(n, n, true); err != nil {
		return Sample{}, err
	}
	elapsed := time.Unix(0, end.Load()).Sub(start)
	return Sample{
		Ops:      int64(n),
		Elapsed:  elapsed,
		Timeline: timeline,
		Metrics:  map[string]float64{"jobs/s": float64(n) / elapsed.Seconds()},
	}, nil
}
