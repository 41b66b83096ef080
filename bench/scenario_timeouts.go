package bench

import (
	"context"
	"fmt"
)

// timeouts10k: how late 10,000 execution timeouts take effect (DESIGN
// invariant 6: deadlines fire from JetStream's own timers), vs 10,000 raw
// JetStream message schedules fired to a subscriber. The target is
// absolute: p99 lateness within 1.5 s. Slow to set up: two rounds at most.
var timeouts10k = &Scenario{
	Name:    "timeouts-10k",
	Summary: "lateness of 10,000 execution timeouts spread over the run, vs 10,000 raw JetStream message schedules",
	Cases: func(p Params) []Case {
		sh := p.shape(1)
		return []Case{{
			Name: fmt.Sprintf("%d timeouts", p.Timers),
			Metrics: []Metric{{Name: "p99 late ms", Lower: true}, {Name: "p50 late ms", Lower: true},
				{Name: "max late ms", Lower: true}},
			MaxRounds: 2, NoWarmup: true,
			Baseline: Side{Name: "raw message schedules", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.RawTimers(ctx, sh, p.Timers)
			}},
			Jetgate: Side{Name: "jetgate execution timeouts", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoTimeouts(ctx, sh, p.Timers)
			}},
		}}
	},
}
