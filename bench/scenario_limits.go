package bench

import "fmt"

// concurrencyLimit: every job under one concurrency-limited key (limit
// far above the load) vs no limit: the cost of the lease bookkeeping.
var concurrencyLimit = &Scenario{
	Name:    "concurrency-limit",
	Summary: "Go round trip, every job on one key with a concurrency limit above the load, vs no limit",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		return []Case{{
			Name: "1 key, concurrency 100000", Metrics: []Metric{jobsPerSec}, Target: 0.7,
			Baseline: unlimitedSide(sh), Jetgate: limitedSide("jetgate concurrency-limited", "bench-rl-1key", sh, oneKey),
		}}
	},
}

// window: every job under one key with a window limit far above the load
// vs no limit: the cost of counting starts per window.
var window = &Scenario{
	Name:    "window",
	Summary: "Go round trip, every job on one key with a window limit (rate) above the load, vs no limit",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		policy := func(int) string { return `{"key":"bench-window","rate":{"limit":1000000,"period":"PT1S"}}` }
		return []Case{{
			Name: "1 key, 1000000 per second", Metrics: []Metric{jobsPerSec},
			Baseline: unlimitedSide(sh), Jetgate: limitedSide("jetgate window-limited", "bench-rl-window", sh, policy),
		}}
	},
}

// keys10k: jobs spread over 10,000 concurrency-limited keys vs all on one
// key: what many keys cost over one.
var keys10k = &Scenario{
	Name:    "keys-10k",
	Summary: "Go round trip with jobs spread over 10,000 concurrency-limited keys, vs all on 1 key",
	Cases: func(p Params) []Case {
		sh := p.shape(p.Workers)
		return []Case{{
			Name: fmt.Sprintf("%d keys vs 1 key", p.Keys), Metrics: []Metric{jobsPerSec}, Target: 0.8,
			Baseline: limitedSide("jetgate 1 key", "bench-rl-1key", sh, oneKey),
			Jetgate:  limitedSide(fmt.Sprintf("jetgate %d keys", p.Keys), "bench-rl-keys", sh, manyKeys(p.Keys)),
		}}
	},
}
