package bench

import (
	"context"
	"fmt"
	"slices"
)

// roundtrip: a job's whole life, enqueue → fetch → ack, over the Go API
// and over HTTP, against publish → fetch(1) → ack on raw JetStream with
// the same producers and workers.
var roundtrip = &Scenario{
	Name:    "roundtrip",
	Summary: "enqueue → fetch → ack, Go API and HTTP, 1 and --workers workers (as many producers), vs raw publish + fetch(1) + ack",
	Cases: func(p Params) []Case {
		var cases []Case
		for _, w := range slices.Compact([]int{1, p.Workers}) {
			sh := p.shape(w)
			raw := Side{Name: "raw JetStream", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.RawRoundTrip(ctx, sh, false, 1)
			}}
			cases = append(cases,
				Case{
					Name: fmt.Sprintf("Go API, %s", plural(w, "worker")), Metrics: []Metric{jobsPerSec}, Target: 0.35, Baseline: raw,
					Jetgate: Side{Name: "jetgate Go API", Run: func(ctx context.Context, e *Env) (Sample, error) {
						return e.GoRoundTrip(ctx, sh, fmt.Sprintf("bench-go-%d", w), nil)
					}},
				},
				Case{
					Name: fmt.Sprintf("HTTP, %s", plural(w, "worker")), Metrics: []Metric{jobsPerSec}, Target: 0.20, Baseline: raw,
					Jetgate: Side{Name: "jetgate HTTP", Run: func(ctx context.Context, e *Env) (Sample, error) {
						return e.HTTPRoundTrip(ctx, sh, fmt.Sprintf("bench-http-%d", w))
					}},
				})
		}
		return cases
	},
}

// plural is "1 worker", "8 workers".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
