package ojs_test

import (
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// ojs-worker-protocol.md 2.3: a worker only moves forward (running, quiet,
// terminate); the graceful shutdown extension's drain sits before
// terminate, and a heartbeat answer says terminate for it (spec/README.md
// decision 4: the SDK reads running / quiet / terminate).
func TestWorkerStatesMoveForward_WP23(t *testing.T) {
	for _, c := range []struct{ a, b, want, answer string }{
		{"", "", "running", "running"},
		{"running", "quiet", "quiet", "quiet"},
		{"quiet", "running", "quiet", "quiet"},
		{"quiet", "drain", "drain", "terminate"},
		{"terminate", "quiet", "terminate", "terminate"},
		{"drain", "terminate", "terminate", "terminate"},
	} {
		got := ojs.FurthestWorkerState(c.a, c.b)
		if got != c.want || ojs.HeartbeatState(got) != c.answer {
			t.Errorf("FurthestWorkerState(%q, %q) = %q (answered %q), want %q (%q)", c.a, c.b, got, ojs.HeartbeatState(got), c.want, c.answer)
		}
	}
	for _, s := range []string{"running", "quiet", "drain", "terminate"} {
		if !ojs.ValidWorkerState(s) {
			t.Errorf("%q refused", s)
		}
	}
	if ojs.ValidWorkerState("stopping") || ojs.ValidWorkerState("") {
		t.Error("an unknown state accepted")
	}
}

// ojs-fair-scheduling.md 7.1: a round-robin group serves its queues with
// equal weights, whatever weights it stores; a fetch's own strategy wins.
func TestRoundRobinGroupIsEqualWeights_FS71(t *testing.T) {
	g := &ojs.WorkerGroup{Name: "p", Strategy: ojs.StrategyRoundRobin, Queues: []string{"a", "b"}, Weights: map[string]int{"a": 9}}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	req := ojs.FetchRequest{Group: "p"}.ApplyGroup(g)
	if req.Strategy != ojs.StrategyWeighted || len(req.Weights) != 0 || len(req.Queues) != 2 {
		t.Fatalf("round-robin applied as %+v", req)
	}
	if req = (ojs.FetchRequest{Strategy: ojs.StrategyStrict, Queues: []string{"b", "a"}}).ApplyGroup(g); req.Strategy != ojs.StrategyStrict {
		t.Fatalf("the fetch's strategy lost: %+v", req)
	}
	g.Concurrency = -1
	if err := g.Validate(); err == nil {
		t.Fatal("a negative concurrency accepted")
	}
}
