package bench

import (
	"context"
	"testing"
	"time"
)

// TestLoadOverloadIsRefusedNotFailed runs the load test's short form
// (issue 20, "Load"): with arrivals well above what a queue bounded at 20
// jobs can hold while a one-handler worker (10 ms per job) drains it, every enqueue is
// answered 201 or 429 QUEUE_FULL (ojs-backpressure.md, reject), nothing
// else fails, and every accepted job is completed by the end. Latency and
// memory bounds are for the long run on a quiet machine (jetgate load),
// not asserted here.
func TestLoadOverloadIsRefusedNotFailed(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := e.Load(ctx, LoadConfig{Rate: 500, Duration: 2 * time.Second, Handlers: 1, Work: 10 * time.Millisecond, Senders: 16, MaxDepth: 20,
		P99Bound: time.Hour, MaxGrowth: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Text())
	switch {
	case rep.Errors != 0:
		t.Fatalf("%d requests failed: %v", rep.Errors, rep.ErrorLines)
	case rep.Accepted+rep.Refused != rep.Offered:
		t.Fatalf("offered %d, answered 201 %d + 429 %d", rep.Offered, rep.Accepted, rep.Refused)
	case rep.Refused == 0:
		t.Fatalf("no 429 at %g/s into a queue of 20 drained by one handler: the overload was not refused", rep.Rate)
	case rep.Completed != rep.Accepted:
		t.Fatalf("%d jobs accepted, %d completed", rep.Accepted, rep.Completed)
	case !rep.Pass:
		t.Fatalf("failed: %v", rep.Reasons)
	}
}
