package bench

import (
	"context"
	"fmt"
)

// levelsBody spreads jobs over n priority levels (0..n-1).
func levelsBody(n int) BodyFunc {
	return func(queue string, i, size int) []byte {
		return withField(jobBody(queue, i, size), "priority", fmt.Sprint(i%n))
	}
}

// priority: fetch throughput from a backlog spread over 10 and 256
// priority levels vs all on one level (the target: >= 0.7 for 256
// levels), and the Go round trip over the same levels, where every job
// lands in a nearly empty queue and the levels holding jobs change with
// every fetch. One level against raw JetStream is roundtrip's Go API case.
var priority = &Scenario{
	Name:    "priority",
	Summary: "fetch from a backlog, and the Go round trip, with jobs over 10 and 256 priority levels, vs 1 level (1 level vs raw is roundtrip's Go API case)",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		sh.Jobs = p.backlogJobs
		drain := func(n int) Side {
			return Side{Name: "jetgate drain, " + plural(n, "level"), Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoDrain(ctx, sh, fmt.Sprintf("bench-dr%d", n), levelsBody(n))
			}}
		}
		levels := func(n int) Side {
			return Side{Name: "jetgate " + plural(n, "level"), Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoRoundTrip(ctx, sh, fmt.Sprintf("bench-lv%d", n), levelsBody(n))
			}}
		}
		return []Case{
			{Name: "fetch, 10 levels", Metrics: []Metric{jobsPerSec}, Baseline: drain(1), Jetgate: drain(10)},
			{Name: "fetch, 256 levels", Metrics: []Metric{jobsPerSec}, Target: 0.7, Baseline: drain(1), Jetgate: drain(256)},
			{Name: "round trip, 10 levels", Metrics: []Metric{jobsPerSec}, Baseline: levels(1), Jetgate: levels(10)},
			{Name: "round trip, 256 levels", Metrics: []Metric{jobsPerSec}, Baseline: levels(1), Jetgate: levels(256)},
		}
	},
}
