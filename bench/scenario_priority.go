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

// priority: the Go round trip with jobs spread over 10 and 256 priority
// levels vs all on one level: what levels cost. One level against raw
// JetStream is roundtrip's Go API case.
var priority = &Scenario{
	Name:    "priority",
	Summary: "Go round trip with jobs over 10 and 256 priority levels, vs 1 level (1 level vs raw is roundtrip's Go API case)",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		levels := func(n int) Side {
			return Side{Name: "jetgate " + plural(n, "level"), Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoRoundTrip(ctx, sh, fmt.Sprintf("bench-lv%d", n), levelsBody(n))
			}}
		}
		return []Case{
			{Name: "10 levels", Metrics: []Metric{jobsPerSec}, Baseline: levels(1), Jetgate: levels(10)},
			{Name: "256 levels", Metrics: []Metric{jobsPerSec}, Target: 0.7, Baseline: levels(1), Jetgate: levels(256)},
		}
	},
}
