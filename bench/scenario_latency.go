package bench

import (
	"context"
	"fmt"
	"time"
)

// latency: enqueue-to-start latency of each side at half of its own
// maximum round-trip throughput, measured in the same run just before
// (for half the duration), so load that drifts over the rounds moves the
// pace with it.
var latency = &Scenario{
	Name:    "latency",
	Summary: "enqueue-to-start p50/p99 at 50% of each side's max round-trip throughput, measured just before (Go API, --workers workers)",
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

// halfLoad is a side running rt at full speed for half the duration, then
// paced at half the throughput that reached, timing every job.
func halfLoad(name string, sh Shape, rt func(context.Context, *Env, Shape) (Sample, error)) Side {
	return Side{Name: name, Run: func(ctx context.Context, e *Env) (Sample, error) {
		full := sh
		full.Duration = max(sh.Duration/2, time.Millisecond)
		s, err := rt(ctx, e, full)
		if err != nil {
			return s, fmt.Errorf("max throughput: %w", err)
		}
		paced := sh
		paced.Rate, paced.Timing = s.Metrics[jobsPerSec.Name]/2, true
		return rt(ctx, e, paced)
	}}
}
