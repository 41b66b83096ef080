package bench

import (
	"context"
	"fmt"
)

// throttleRate is the throttle of the throttle scenario, in starts per
// second (a start every 20 ms).
const throttleRate = 50

// throttle: how evenly jetgate spaces starts under a throttle, vs workers
// pacing themselves with a Go ticker on raw JetStream.
var throttle = &Scenario{
	Name:    "throttle",
	Summary: fmt.Sprintf("start spacing under a throttle of %d/s with --workers workers, vs a shared time.Ticker over raw fetches", throttleRate),
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		return []Case{{
			Name: fmt.Sprintf("%d starts/s", throttleRate),
			Metrics: []Metric{
				{Name: "p99 dev ms", Lower: true}, {Name: "p50 dev ms", Lower: true},
				{Name: "early gaps", Lower: true}, {Name: "starts/s"},
			},
			Baseline: Side{Name: "raw + time.Ticker", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.RawThrottle(ctx, sh, throttleRate)
			}},
			Jetgate: Side{Name: "jetgate throttle", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoThrottle(ctx, sh, throttleRate)
			}},
		}}
	},
}
