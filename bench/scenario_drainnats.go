package bench

import (
	"context"
	"fmt"
)

// drainNATS: drain-http's workload for a Go service on NATS (issue 19):
// --drain-jobs jobs enqueued with the Go client over the NATS binding in
// batches of 100, then drained by client.Worker over NATS (fetch for its
// free slots, batch acks through ojs.v1.workers.ackbatch) with 32 and 100
// handlers; raw JetStream does the same with atomic batches and
// FetchNoWait(free slots) + a confirmed ack per message.
var drainNATS = &Scenario{
	Name: "drain-nats",
	Summary: "--drain-jobs jobs enqueued with the Go client over NATS in batches of 100, then drained by the Go client.Worker " +
		"over NATS (fetch for free slots, batched acks) with 32 and 100 handlers, vs raw atomic batches + FetchNoWait(free slots) + confirmed acks",
	Cases: func(p Params) []Case {
		n, size := p.DrainJobs, max(p.PayloadBytes, 64)
		var cases []Case
		for _, handlers := range []int{32, 100} {
			queue := fmt.Sprintf("bench-go-nats-%d", handlers)
			cases = append(cases, Case{
				Name: fmt.Sprintf("%d handlers, %d jobs", handlers, n), Metrics: []Metric{jobsPerSec, insertPerSec},
				Baseline: Side{Name: "raw JetStream", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, size)
				}},
				Jetgate: Side{Name: "jetgate NATS Go worker", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.NATSWorkerDrain(ctx, queue, n, enqueueBatch, handlers, size)
				}},
			})
		}
		return cases
	},
}
