package bench

// registry is every scenario `jetgate bench` knows, in the order they run.
// A scenario is one file (scenario_<name>.go) declaring a *Scenario, and
// one line here.
var registry = []*Scenario{
	roundtrip,
	enqueue,
	latency,
	priority,
	concurrencyLimit,
	window,
	throttle,
	keys10k,
	backpressure,
	waiting10k,
	timeouts10k,
	cost,
	drainHTTP,
	drainNATS,
}
