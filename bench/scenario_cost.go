package bench

import (
	"context"
	"fmt"
)

// cost: what one job costs the NATS server, read from its own counters
// (/varz, /jsz) before and after a run of --cost-jobs jobs: stored
// messages (by stream) and removals, messages and bytes in and out, CPU.
// Issue 17 budgets 3 stored messages per job on the default path; raw
// JetStream stores 1.
var cost = &Scenario{
	Name: "cost",
	Summary: "per-job cost from the NATS server's own counters (stored messages by stream, removals, msgs and bytes in/out, CPU) " +
		"of enqueue → fetch → ack over the Go API and HTTP and of the SDK-style batch insert + drain, vs raw JetStream",
	Cases: func(p Params) []Case {
		n := p.CostJobs
		sh := Shape{Jobs: n, Producers: p.Workers, Workers: p.Workers, PayloadBytes: p.PayloadBytes}
		ms := costMetrics(p.serverCPU, p.jetgateCPU)
		measured := func(name string, run func(context.Context, *Env) (Sample, error)) Side {
			return Side{Name: name, Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.measureCost(ctx, func(ctx context.Context) (Sample, error) { return run(ctx, e) })
			}}
		}
		raw := measured("raw JetStream", func(ctx context.Context, e *Env) (Sample, error) {
			return e.RawRoundTrip(ctx, sh, false, 1)
		})
		const handlers = 32
		// The drain's worker runs in the bench process here, as it did
		// when these costs were first measured: the case counts the
		// server's work, and the process's CPU with it.
		const inProcess = true
		return []Case{
			{
				Name: fmt.Sprintf("Go API round trip, %d jobs, %s", n, plural(p.Workers, "worker")), Metrics: ms, Baseline: raw,
				Jetgate: measured("jetgate Go API", func(ctx context.Context, e *Env) (Sample, error) {
					return e.GoRoundTrip(ctx, sh, "bench-cost-go", nil)
				}),
			},
			{
				Name: fmt.Sprintf("HTTP round trip, %d jobs, %s", n, plural(p.Workers, "worker")), Metrics: ms, Baseline: raw,
				Jetgate: measured("jetgate HTTP", func(ctx context.Context, e *Env) (Sample, error) {
					return e.HTTPRoundTrip(ctx, sh, "bench-cost-http")
				}),
			},
			{
				Name: fmt.Sprintf("HTTP batch insert + SDK-style drain, %d jobs, %d handlers", n, handlers), Metrics: ms,
				Baseline: measured("raw atomic batches + drain", func(ctx context.Context, e *Env) (Sample, error) {
					return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, sh.payloadBytes(), inProcess)
				}),
				Jetgate: measured("jetgate HTTP batches + SDK-style worker", func(ctx context.Context, e *Env) (Sample, error) {
					return e.HTTPBatchDrain(ctx, "bench-cost-drain", n, enqueueBatch, handlers, sh.payloadBytes(), inProcess)
				}),
			},
		}
	},
}
