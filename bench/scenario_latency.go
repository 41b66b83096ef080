package bench

import (
	"context"
	"fmt"
)

// latency: enqueue-to-start latency of each side at half of its own
// maximum round-trip throughput, the maximum measured once (at its first
// run, usually the warm-up) with the round-trip workload.
var latency = &Scenario{
	Name:    "latency",
	Summary: "enqueue-to-start p50/p99 at 50% of each side's max round-trip throughput (Go API, --workers workers)",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		return []Case{{
			Name:     "Go API at 50%, " + plural(p.Workers, "worker"),
			Metrics:  []Metric{p50, p99, jobsPerSec},
			Baseline: halfLoad("raw JetStream", sh, func(ctx context.Context, e *Env, sh Shape) (Sample, error) { return e.RawRoundTrip(ctx, sh, false, 1) }),
			Jetgate: halfLoad("jetgate Go API", sh, func(ctx context.Context, e *Env, sh Shape) (Sample, error) {
				return e.GoRoundTrip(ctx, sh, "bench-lat", nil)
			}),
		}}
	},
}

// halfLoad is a side running rt paced at half the throughput rt reached
// at full speed, timing every job.
func halfLoad(name string, sh Shape, rt func(context.Context, *Env, Shape) (Sample, error)) Side {
	var maxRate float64
	return Side{Name: name, Run: func(ctx context.Context, e *Env) (Sample, error) {
		if maxRate == 0 {
			s, err := rt(ctx, e, sh)
			if err != nil {
				return s, fmt.Errorf("max throughput: %w", err)
			}
			maxRate = s.Metrics[jobsPerSec.Name]
		}
		paced := sh
		paced.Rate, paced.Timing = maxRate/2, true
		return rt(ctx, e, paced)
	}}
}
