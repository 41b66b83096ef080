package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jetgate/jetgate/client"
)

// TestDrainNATS runs drain-nats's jetgate side on a few jobs, with a last
// batch shorter than the others: every job is inserted over NATS, run by
// client.Worker and acked once through ackbatch (the drain verifies it),
// with the worker in a process of its own and then in the test's, and the
// queue is empty afterwards.
func TestDrainNATS(t *testing.T) {
	const n, handlers = 250, 8
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, inProcess := range []bool{false, true} {
		s, err := e.NATSWorkerDrain(ctx, "bench-drain-nats-test", n, enqueueBatch, handlers, 128, inProcess)
		if err != nil {
			t.Fatalf("worker in process %v: %v", inProcess, err)
		}
		if s.Ops != n || s.Metrics["jobs/s"] <= 0 || s.Metrics[insertPerSec.Name] <= 0 {
			t.Errorf("worker in process %v: %d jobs, metrics %v", inProcess, s.Ops, s.Metrics)
		}
	}
	c, err := client.New(client.Config{Conn: e.nc})
	if err != nil {
		t.Fatal(err)
	}
	left, err := c.Fetch(ctx, client.FetchRequest{Queues: []string{"bench-drain-nats-test"}, Count: 10})
	if err != nil || len(left) != 0 {
		t.Errorf("%d jobs left in the drained queue (%v)", len(left), err)
	}
}
