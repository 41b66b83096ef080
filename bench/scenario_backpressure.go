package bench

import "context"

// backpressure: what a queue bound costs while a queue is below it, and
// how fast a full queue refuses.
var backpressure = &Scenario{
	Name:    "backpressure",
	Summary: "enqueue into a bounded queue (below its bound) vs an unbounded one; refusals by a full queue vs a full DiscardNew stream",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		one := p.shape(1)
		return []Case{
			{
				Name: "bounded vs unbounded enqueue", Metrics: []Metric{jobsPerSec}, Target: 0.8,
				Baseline: Side{Name: "jetgate unbounded", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.GoEnqueue(ctx, sh, "", 1)
				}},
				Jetgate: Side{Name: "jetgate max_depth 10M", Run: func(ctx context.Context, e *Env) (Sample, error) {
					return e.BoundedEnqueue(ctx, sh, 10_000_000)
				}},
			},
			{
				Name: "refused enqueue", Metrics: []Metric{{Name: "p50 µs", Lower: true}, {Name: "p99 µs", Lower: true}},
				Baseline: Side{Name: "raw full stream", Run: func(ctx context.Context, e *Env) (Sample, error) { return e.RawRejects(ctx, one) }},
				Jetgate:  Side{Name: "jetgate full queue", Run: func(ctx context.Context, e *Env) (Sample, error) { return e.GoRejects(ctx, one) }},
			},
		}
	},
}
