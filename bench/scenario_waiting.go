package bench

import (
	"context"
	"fmt"
)

// waiting10k: the CPU the whole process (jetgate, its embedded
// nats-server and the harness) burns while 10,000 jobs wait on a paused
// key, vs 10,000 messages sitting in a stream. Slow to set up, so two
// rounds at most and no warm-up.
var waiting10k = &Scenario{
	Name:    "waiting-10k",
	Summary: "process CPU while 10,000 jobs wait on a paused key (concurrency 0), vs 10,000 messages in a stream",
	Cases: func(p Params) []Case {
		sh := p.shape(1)
		return []Case{{
			Name: fmt.Sprintf("%d waiting", p.Waiting), Metrics: []Metric{{Name: "CPU ms/s", Lower: true}}, MaxRounds: 2, NoWarmup: true,
			Baseline: Side{Name: "raw stored messages", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.RawWaiting(ctx, sh, p.Waiting)
			}},
			Jetgate: Side{Name: "jetgate parked jobs", Run: func(ctx context.Context, e *Env) (Sample, error) {
				return e.GoWaiting(ctx, sh, p.Waiting)
			}},
		}}
	},
}
