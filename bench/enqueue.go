package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
)

// enqueueRun runs sh.Producers producers calling put(first, n) for
// consecutive blocks of batch job indexes, with no worker, until sh.Jobs
// jobs were enqueued or sh.Duration passed, and returns jobs enqueued per
// second.
func enqueueRun(ctx context.Context, sh Shape, batch int, put func(ctx context.Context, first, n int) error) (Sample, error) {
	batch = max(batch, 1)
	var next, done atomic.Int64
	start := time.Now()
	deadline := start.Add(sh.Duration)
	more := func() (int, bool) {
		if sh.Jobs <= 0 && !time.Now().Before(deadline) {
			return 0, false
		}
		first := next.Add(int64(batch)) - int64(batch)
		if sh.Jobs > 0 && first >= int64(sh.Jobs) {
			return 0, false
		}
		return int(first), true
	}
	c, wctx := newCrew(ctx)
	tl := startTimeline(&done)
	for range max(sh.Producers, 1) {
		c.spawn(func() error {
			for first, ok := more(); ok; first, ok = more() {
				n := batch
				if sh.Jobs > 0 {
					n = min(n, sh.Jobs-first)
				}
				if err := put(wctx, first, n); err != nil {
					return err
				}
				done.Add(int64(n))
			}
			return nil
		})
	}
	err := c.wait()
	elapsed := time.Since(start)
	timeline := tl.stop()
	if err != nil {
		return Sample{}, err
	}
	n := done.Load()
	return Sample{Ops: n, Elapsed: elapsed, Timeline: timeline, Metrics: map[string]float64{"jobs/s": float64(n) / elapsed.Seconds()}}, nil
}

// RawEnqueue publishes to the raw stream with no consumer: one stored
// publish at a time, or batch pipelined publishes awaited together.
func (e *Env) RawEnqueue(ctx context.Context, sh Shape, batch int) (Sample, error) {
	subj := fmt.Sprintf(rawSubject, nextRun())
	defer e.cleanupRaw(subj, "")
	size := sh.payloadBytes()
	return enqueueRun(ctx, sh, batch, func(ctx context.Context, first, n int) error {
		if batch <= 1 {
			_, err := e.js.Publish(ctx, subj, payload(first, size))
			return err
		}
		acks := make([]jetstream.PubAckFuture, 0, n)
		for i := first; i < first+n; i++ {
			f, err := e.async.PublishAsync(subj, payload(i, size), jetstream.WithStallWait(10*time.Second))
			if err != nil {
				return fmt.Errorf("publish async: %w", err)
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("publish async: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// RawAtomicBatch is the raw JetStream way to store batch messages all or
// none: one atomic batch publish (ADR-50) of batch messages per call, the
// guarantee EnqueueBatch gives. The first and the committing message are
// requests, the others plain publishes, as the ADR describes.
func (e *Env) RawAtomicBatch(ctx context.Context, sh Shape, batch int) (Sample, error) {
	subj := fmt.Sprintf(rawSubject, nextRun())
	defer e.cleanupRaw(subj, "")
	size := sh.payloadBytes()
	return enqueueRun(ctx, sh, batch, func(ctx context.Context, first, n int) error {
		return e.atomicBatch(ctx, subj, first, n, size)
	})
}

// atomicBatch stores the messages of jobs first..first+n-1 on subj as one
// atomic batch publish (ADR-50).
func (e *Env) atomicBatch(ctx context.Context, subj string, first, n, size int) error {
	id := nuid.Next()
	for i := range n {
		m := nats.NewMsg(subj)
		m.Data = payload(first+i, size)
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i > 0 && i < n-1 {
			if err := e.nc.PublishMsg(m); err != nil {
				return fmt.Errorf("atomic batch publish: %w", err)
			}
			continue
		}
		if i == n-1 {
			m.Header.Set("Nats-Batch-Commit", "1")
		}
		resp, err := e.nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return fmt.Errorf("atomic batch publish: %w", err)
		}
		var r struct {
			Error *jetstream.APIError `json:"error,omitempty"`
		}
		if len(resp.Data) > 0 {
			if err := json.Unmarshal(resp.Data, &r); err != nil {
				return fmt.Errorf("atomic batch publish: %w", err)
			}
			if r.Error != nil {
				return fmt.Errorf("atomic batch publish: %w", r.Error)
			}
		}
	}
	return nil
}

// GoEnqueue enqueues through the admission service into queue (a new one
// when queue is ""), one job per Enqueue or batch jobs per EnqueueBatch.
// One job enqueued before the clock starts pays for creating the queue.
func (e *Env) GoEnqueue(ctx context.Context, sh Shape, queue string, batch int) (Sample, error) {
	svc := e.srv.Service()
	if queue == "" {
		queue = fmt.Sprintf("bench-enq-%d", nextRun())
	}
	size := sh.payloadBytes()
	if err := e.enqueueParsed(ctx, queue, 1, jobBody, size); err != nil {
		return Sample{}, fmt.Errorf("first job: %w", err)
	}
	return enqueueRun(ctx, sh, batch, func(ctx context.Context, first, n int) error {
		jobs := make([]*ojs.Job, 0, n)
		for i := first; i < first+n; i++ {
			j, err := ojs.ParseJob(jobBody(queue, i, size))
			if err != nil {
				return fmt.Errorf("parse job %d: %w", i, err)
			}
			jobs = append(jobs, j)
		}
		var err error
		if batch <= 1 {
			_, err = svc.Enqueue(ctx, jobs[0])
		} else {
			_, err = svc.EnqueueBatch(ctx, jobs)
		}
		if err != nil {
			return fmt.Errorf("enqueue %d: %w", first, err)
		}
		return nil
	})
}
