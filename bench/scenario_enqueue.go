package bench

import "context"

// enqueueBatch is the size of a batch in the enqueue scenario.
const enqueueBatch = 100

// enqueue: producers only, no worker: one job per call, and batches.
var enqueue = &Scenario{
	Name:    "enqueue",
	Summary: "enqueue only, --workers producers: Enqueue vs a stored publish, and EnqueueBatch(100) vs an atomic batch of 100 and vs 100 pipelined publishes",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		side := func(name string, run func(context.Context, *Env) (Sample, error)) Side {
			return Side{Name: name, Run: run}
		}
		return []Case{
			{
				Name: "single", Metrics: []Metric{jobsPerSec},
				Baseline: side("raw publish", func(ctx context.Context, e *Env) (Sample, error) { return e.RawEnqueue(ctx, sh, 1) }),
				Jetgate:  side("jetgate Enqueue", func(ctx context.Context, e *Env) (Sample, error) { return e.GoEnqueue(ctx, sh, "", 1) }),
			},
			{
				// EnqueueBatch is all or nothing (ojs-http-binding): the
				// like-for-like raw baseline is an atomic batch publish.
				Name: "batch of 100", Metrics: []Metric{jobsPerSec}, Target: 0.5,
				Baseline: side("raw atomic batch ×100", func(ctx context.Context, e *Env) (Sample, error) {
					return e.RawAtomicBatch(ctx, sh, enqueueBatch)
				}),
				Jetgate: side("jetgate EnqueueBatch", func(ctx context.Context, e *Env) (Sample, error) {
					return e.GoEnqueue(ctx, sh, "", enqueueBatch)
				}),
			},
			{
				// The same batches against 100 pipelined publishes that
				// promise nothing about the batch: what atomicity and a
				// job's record cost together.
				Name: "batch of 100, non-atomic baseline", Metrics: []Metric{jobsPerSec},
				Baseline: side("raw async publish ×100", func(ctx context.Context, e *Env) (Sample, error) {
					return e.RawEnqueue(ctx, sh, enqueueBatch)
				}),
				Jetgate: side("jetgate EnqueueBatch", func(ctx context.Context, e *Env) (Sample, error) {
					return e.GoEnqueue(ctx, sh, "", enqueueBatch)
				}),
			},
		}
	},
}
