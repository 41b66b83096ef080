package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// throttleJobs is how many starts a throttle run of d at perSecond makes.
func throttleJobs(d time.Duration, perSecond int) int {
	return max(int(d.Seconds()*float64(perSecond))+1, 3)
}

// GoThrottle enqueues enough jobs under a throttle of perSecond starts
// per second to last sh.Duration, lets sh.Workers workers (more than the
// throttle allows) run them, and measures the spacing of their starts
// (the records' started_at) against period/limit.
func (e *Env) GoThrottle(ctx context.Context, sh Shape, perSecond int) (Sample, error) {
	svc := e.srv.Service()
	n := throttleJobs(sh.Duration, perSecond)
	queue := fmt.Sprintf("bench-thr-%d", nextRun())
	policy := fmt.Sprintf(`{"key":"bench-thr-%s","throttle":{"limit":%d,"period":"PT1S"}}`, queue, perSecond)
	if err := e.enqueueParsed(ctx, queue, n, limitedBody(func(int) string { return policy }), sh.payloadBytes()); err != nil {
		return Sample{}, err
	}
	var mu sync.Mutex
	var starts []time.Time
	led := newLedger(false)
	err := fetchAll(ctx, svc, queue, max(sh.Workers, 1), n, led, func(j *ojs.Job) error {
		if j.StartedAt == nil {
			return fmt.Errorf("job %s fetched without started_at", j.ID)
		}
		mu.Lock()
		starts = append(starts, j.StartedAt.Time)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Sample{}, err
	}
	return spacingSample(starts, time.Second/time.Duration(perSecond)), nil
}

// RawThrottle is the baseline of a throttle: sh.Workers workers sharing a
// time.Ticker of period/limit, each tick letting one of them fetch and ack
// one message of a raw stream, timed as it arrives.
func (e *Env) RawThrottle(ctx context.Context, sh Shape, perSecond int) (Sample, error) {
	n := throttleJobs(sh.Duration, perSecond)
	run := nextRun()
	subj := fmt.Sprintf(rawSubject, run)
	cons, err := e.raw.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: fmt.Sprintf("raw_thr_%d", run), FilterSubject: subj, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		return Sample{}, fmt.Errorf("create raw consumer: %w", err)
	}
	defer e.cleanupRaw(subj, cons.CachedInfo().Name)
	for i := range n {
		if _, err := e.js.Publish(ctx, subj, payload(i, sh.payloadBytes())); err != nil {
			return Sample{}, fmt.Errorf("publish: %w", err)
		}
	}
	interval := time.Second / time.Duration(perSecond)
	var mu sync.Mutex
	var starts []time.Time
	led := newLedger(false)
	c, wctx := newCrew(ctx)
	tokens := make(chan struct{})
	c.spawn(func() error {
		defer close(tokens)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for range n {
			select {
			case <-tk.C:
			case <-wctx.Done():
				return wctx.Err()
			}
			select {
			case tokens <- struct{}{}:
			case <-wctx.Done():
				return wctx.Err()
			}
		}
		return nil
	})
	for range max(sh.Workers, 1) {
		c.spawn(func() error {
			for range tokens {
				got, err := rawFetchTimed(cons, led, func(t time.Time) { mu.Lock(); starts = append(starts, t); mu.Unlock() })
				if err != nil {
					return err
				}
				led.fetched(got)
			}
			return nil
		})
	}
	if err := c.wait(); err != nil {
		return Sample{}, err
	}
	if err := led.verify(n, n, false); err != nil {
		return Sample{}, err
	}
	return spacingSample(starts, interval), nil
}

// rawFetchTimed fetches and acks one raw message, calling at with the
// time it arrived.
func rawFetchTimed(cons jetstream.Consumer, led *ledger, at func(time.Time)) (int, error) {
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	n := 0
	for msg := range batch.Messages() {
		at(time.Now())
		n++
		if err := msg.Ack(); err != nil {
			return n, fmt.Errorf("ack: %w", err)
		}
		var i int
		if _, err := fmt.Sscanf(string(msg.Data()[:8]), "%d", &i); err != nil {
			return n, fmt.Errorf("raw message without index: %w", err)
		}
		if err := led.complete(i, ""); err != nil {
			return n, err
		}
	}
	return n, batch.Error()
}

// spacingSample measures the gaps between starts against interval: the
// p50 and p99 of |gap - interval| in ms, the gaps shorter than the
// interval (a throttle must have none) and the starts per second.
func spacingSample(starts []time.Time, interval time.Duration) Sample {
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	s := Sample{Ops: int64(len(starts)), Metrics: map[string]float64{}}
	var devs []float64
	early := 0
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		if gap < interval {
			early++
		}
		s.Spacing = append(s.Spacing, float64(gap)/float64(time.Millisecond))
		devs = append(devs, math.Abs(float64(gap-interval))/float64(time.Millisecond))
	}
	slices.Sort(devs)
	if len(starts) > 1 {
		s.Elapsed = starts[len(starts)-1].Sub(starts[0])
		s.Metrics["starts/s"] = float64(len(starts)-1) / s.Elapsed.Seconds()
	}
	s.Metrics["p50 dev ms"] = quantile(devs, 0.50)
	s.Metrics["p99 dev ms"] = quantile(devs, 0.99)
	s.Metrics["early gaps"] = float64(early)
	return s
}

// enqueueParsed enqueues n jobs body(queue, i) into queue in batches.
func (e *Env) enqueueParsed(ctx context.Context, queue string, n int, body BodyFunc, size int) error {
	svc := e.srv.Service()
	batch := make([]*ojs.Job, 0, 100)
	for i := range n {
		j, err := ojs.ParseJob(body(queue, i, size))
		if err != nil {
			return fmt.Errorf("parse job %d: %w", i, err)
		}
		if batch = append(batch, j); len(batch) == cap(batch) || i == n-1 {
			if _, err := svc.EnqueueBatch(ctx, batch); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			batch = batch[:0]
		}
	}
	return nil
}
