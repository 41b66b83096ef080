package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// BoundedEnqueue is GoEnqueue into a new queue bounded by maxDepth.
func (e *Env) BoundedEnqueue(ctx context.Context, sh Shape, maxDepth int64) (Sample, error) {
	queue := fmt.Sprintf("bench-bp-%d", nextRun())
	if _, err := e.srv.Service().SetQueueBackpressure(ctx, queue, &ojs.Backpressure{MaxDepth: maxDepth}); err != nil {
		return Sample{}, fmt.Errorf("bound queue: %w", err)
	}
	return e.GoEnqueue(ctx, sh, queue, 1)
}

// fullDepth is the bound of the full queues refusals are timed on.
const fullDepth = 100

// GoRejects fills a queue bounded at fullDepth (reject strategy), then
// times refused enqueues, one at a time, for sh.Duration.
func (e *Env) GoRejects(ctx context.Context, sh Shape) (Sample, error) {
	svc := e.srv.Service()
	queue := fmt.Sprintf("bench-full-%d", nextRun())
	if _, err := svc.SetQueueBackpressure(ctx, queue, &ojs.Backpressure{MaxDepth: fullDepth}); err != nil {
		return Sample{}, fmt.Errorf("bound queue: %w", err)
	}
	if err := e.enqueueParsed(ctx, queue, fullDepth, jobBody, sh.payloadBytes()); err != nil {
		return Sample{}, err
	}
	return timeRejects(sh, func(i int) error {
		j, err := ojs.ParseJob(jobBody(queue, i, sh.payloadBytes()))
		if err != nil {
			return err
		}
		if _, err := svc.Enqueue(ctx, j); !errors.Is(err, ojs.ErrQueueFull) {
			return fmt.Errorf("enqueue into a full queue: %v", err)
		}
		return nil
	})
}

// RawRejects is the baseline of a refusal: a stream limited to fullDepth
// messages with DiscardNew, full, refusing publishes.
func (e *Env) RawRejects(ctx context.Context, sh Shape) (Sample, error) {
	run := nextRun()
	name := fmt.Sprintf("BENCH_FULL_%d", run)
	subj := fmt.Sprintf("bench.full.%d", run)
	st, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage, MaxMsgs: fullDepth, Discard: jetstream.DiscardNew,
	})
	if err != nil {
		return Sample{}, fmt.Errorf("create %s: %w", name, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.js.DeleteStream(ctx, st.CachedInfo().Config.Name)
	}()
	for i := range fullDepth {
		if _, err := e.js.Publish(ctx, subj, payload(i, sh.payloadBytes())); err != nil {
			return Sample{}, fmt.Errorf("fill %s: %w", name, err)
		}
	}
	return timeRejects(sh, func(i int) error {
		if _, err := e.js.Publish(ctx, subj, payload(i, sh.payloadBytes())); err == nil {
			return fmt.Errorf("publish into a full stream succeeded")
		}
		return nil
	})
}

// timeRejects calls reject (which must see a refusal) one at a time for
// sh.Duration and returns the refusals' p50 and p99 in µs.
func timeRejects(sh Shape, reject func(i int) error) (Sample, error) {
	var lat []time.Duration
	start := time.Now()
	for i := 0; i == 0 || time.Since(start) < sh.Duration; i++ {
		t := time.Now()
		if err := reject(i); err != nil {
			return Sample{}, err
		}
		lat = append(lat, time.Since(t))
	}
	s := Sample{Ops: int64(len(lat)), Elapsed: time.Since(start)}
	s.setLatencies(lat)
	s.Metrics["p50 µs"] = s.Metrics["p50 ms"] * 1000
	s.Metrics["p99 µs"] = s.Metrics["p99 ms"] * 1000
	return s, nil
}
