package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
)

// drainJobs is how many jobs a time-boxed drain run queues: about what
// sh.Workers workers fetch in sh.Duration on a small machine.
func drainJobs(sh Shape) int {
	if sh.Jobs > 0 {
		return sh.Jobs
	}
	return max(int(sh.Duration.Seconds()*4000), 1000)
}

// GoDrain measures fetch throughput from a backlog: it queues the jobs
// first (EnqueueBatch, not timed), then sh.Workers workers fetch one job
// at a time and ack it until the queue is empty; jobs/s is over the drain
// alone. queue is drained empty every run, so runs can share it. This is the priority issue's "fetch throughput with jobs spread
// over 1, 10 and 256 priority levels": with body spreading the jobs over
// levels, every fetch must find the lowest level that holds a job.
func (e *Env) GoDrain(ctx context.Context, sh Shape, queue string, body BodyFunc) (Sample, error) {
	svc := e.srv.Service()
	n := drainJobs(sh)
	if err := e.enqueueParsed(ctx, queue, n, body, sh.payloadBytes()); err != nil {
		return Sample{}, err
	}
	led := newLedger(false)
	start := time.Now()
	tl := startTimeline(&led.acked)
	err := fetchAll(ctx, svc, queue, max(sh.Workers, 1), n, led, nil)
	elapsed := time.Since(start)
	timeline := tl.stop()
	if err != nil {
		return Sample{}, err
	}
	if err := led.verify(n, n, true); err != nil {
		return Sample{}, err
	}
	return Sample{
		Ops:      int64(n),
		Elapsed:  elapsed,
		Timeline: timeline,
		Metrics:  map[string]float64{"jobs/s": float64(n) / elapsed.Seconds()},
	}, nil
}

// fetchAll runs workers workers that fetch one job of queue at a time and
// ack it (recording it in led) until n jobs were acked. onJob, if set,
// sees every job before its ack.
func fetchAll(ctx context.Context, svc *admission.Service, queue string, workers, n int, led *ledger, onJob func(*ojs.Job) error) error {
	c, wctx := newCrew(ctx)
	for w := range workers {
		req := ojs.FetchRequest{Queues: []string{queue}, Count: 1, WorkerID: fmt.Sprintf("bench-%s-%d", queue, w)}
		c.spawn(func() error {
			for led.acked.Load() < int64(n) {
				got, err := svc.Fetch(wctx, req)
				if err != nil {
					return fmt.Errorf("fetch: %w", err)
				}
				for _, j := range got {
					if onJob != nil {
						if err := onJob(j); err != nil {
							return err
						}
					}
					if err := goAck(wctx, svc, j, led); err != nil {
						return err
					}
				}
				led.fetched(len(got))
				if len(got) == 0 {
					if err := pause(wctx); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	return c.wait()
}
