package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// GoWaiting parks n jobs on a paused key (concurrency 0), waits until
// every one is parked, lets the parking's own work settle for sh.Duration,
// then reports the whole process's CPU per second of wall time over
// sh.Duration while they wait (DESIGN invariant 4: waiting costs nothing).
// The jobs stay parked afterwards.
func (e *Env) GoWaiting(ctx context.Context, sh Shape, n int) (Sample, error) {
	svc := e.srv.Service()
	queue := fmt.Sprintf("bench-wait-%d", nextRun())
	key := "bench-paused-" + queue
	body := limitedBody(func(int) string { return fmt.Sprintf(`{"key":%q,"concurrency":0}`, key) })
	if err := e.enqueueParsed(ctx, queue, n, body, sh.payloadBytes()); err != nil {
		return Sample{}, err
	}
	for {
		got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: 100, WorkerID: "bench-park"})
		if err != nil || len(got) > 0 {
			return Sample{}, fmt.Errorf("fetch under concurrency 0: %d jobs, %v", len(got), err)
		}
		st, err := svc.RateLimit(ctx, key)
		if err != nil {
			return Sample{}, fmt.Errorf("rate limit status: %w", err)
		}
		if st.WaitingCount >= n {
			break
		}
	}
	return idleCPU(ctx, sh.Duration, n)
}

// RawWaiting is the baseline: n messages stored on the raw stream with a
// durable pull consumer nobody fetches from.
func (e *Env) RawWaiting(ctx context.Context, sh Shape, n int) (Sample, error) {
	run := nextRun()
	subj := fmt.Sprintf(rawSubject, run)
	cons, err := e.raw.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: fmt.Sprintf("raw_wait_%d", run), FilterSubject: subj, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		return Sample{}, fmt.Errorf("create raw consumer: %w", err)
	}
	defer e.cleanupRaw(subj, cons.CachedInfo().Name)
	if _, err := enqueueRun(ctx, Shape{Jobs: n, Producers: 1}, 100, func(ctx context.Context, first, k int) error {
		for i := first; i < first+k; i++ {
			if _, err := e.async.PublishAsync(subj, payload(i, sh.payloadBytes())); err != nil {
				return err
			}
		}
		select {
		case <-e.async.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		return Sample{}, fmt.Errorf("publish: %w", err)
	}
	return idleCPU(ctx, sh.Duration, n)
}

// idleCPU settles for d, then measures CPU ms per second over d.
func idleCPU(ctx context.Context, d time.Duration, n int) (Sample, error) {
	if err := sleep(ctx, d); err != nil {
		return Sample{}, err
	}
	cpu, err := cpuPerSecond(ctx, d)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Ops: int64(n), Elapsed: d, Metrics: map[string]float64{"CPU ms/s": cpu}}, nil
}
