package bench

import (
	"context"
	"fmt"
)

// drainHTTP: the figure users compare with other queues (issue 17):
// 20,000 jobs enqueued over HTTP in batches of 100, then drained over HTTP
// by a worker that behaves like the official OJS Go SDK worker (one fetch
// for its free handler slots, one ack request per job, no-op handler),
// with 32 and with 100 handlers; raw JetStream does the same with atomic
// batches and FetchNoWait(free slots) + a confirmed ack per message.
var drainHTTP = &Scenario{
	Name: "drain-http",
	Summary: "--drain-jobs jobs enqueued over HTTP in batches of 100, then drained by an SDK-style worker (fetch count = free " +
		"handler slots, one ack request per job) with 32 and 100 handlers, vs raw atomic batches + FetchNoWait(free slots) + confirmed acks",
	Cases: func(p Params) []Case {
		n, size := p.DrainJobs, max(p.PayloadBytes, 64)
		var cases []Case
		for _, handlers := range []int{32, 100} {
			queue := fmt.Sprintf("bench-sdk-%d", handlers)
			cases = append(cases, Case{
				Name: fmt.Sprintf("%d handlers, %d jobs", handlers, n), Metrics: []Metric{jobsPerSec, insertPerSec},
				Baseline: Side{Name: "raw JetStream", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, size)
				}},
				Jetgate: Side{Name: "jetgate HTTP", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.HTTPBatchDrain(ctx, queue, n, enqueueBatch, handlers, size)
				}},
			})
		}
		return cases
	},
}
