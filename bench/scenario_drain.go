package bench

import (
	"context"
	"fmt"
)

// drainFunc is jetgate's side of a drain scenario: n jobs enqueued on
// queue in batches of batch, then drained by a worker with handlers
// handler slots.
type drainFunc func(e *Env, ctx context.Context, queue string, n, batch, handlers, size int, inProcess bool) (Sample, error)

// drainScenario is the shape drain-http and drain-nats share: --drain-jobs
// jobs enqueued in batches of 100, then drained with 32 and with 100
// handlers, by jetgate's side (side, on queue "<queuePrefix>-<handlers>")
// against raw JetStream's atomic batches and FetchNoWait(free slots) + a
// confirmed ack per message. Both sides' workers run in processes of
// their own unless p.InProcessWorkers (workerproc.go).
func drainScenario(name, summary, queuePrefix, side string, drain drainFunc) *Scenario {
	return &Scenario{Name: name, Summary: summary,
		Cases: func(p Params) []Case {
			n, size := p.DrainJobs, max(p.PayloadBytes, 64)
			var cases []Case
			for _, handlers := range []int{32, 100} {
				queue := fmt.Sprintf("%s-%d", queuePrefix, handlers)
				cases = append(cases, Case{
					Name: fmt.Sprintf("%d handlers, %d jobs", handlers, n), Metrics: []Metric{jobsPerSec, insertPerSec},
					Baseline: Side{Name: "raw JetStream", Run: func(ctx context.Context, e *Env) (Sample, error) {
						return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, size, p.InProcessWorkers)
					}},
					Jetgate: Side{Name: side, Run: func(ctx context.Context, e *Env) (Sample, error) {
						return drain(e, ctx, queue, n, enqueueBatch, handlers, size, p.InProcessWorkers)
					}},
				})
			}
			return cases
		},
	}
}
