package admission

import (
	"fmt"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 20, "memory flat" (DESIGN invariant 1: caches are only caches):
// the ready messages a process was handed are forgotten once settled,
// also for a queue with a single priority level, whose fetches never
// size a pull by what is held. Before, every job a one-level queue ran
// stayed in heldReady for the life of the process.
func TestHeldReadyForgetsSettledMessagesOfOneLevel(t *testing.T) {
	t.Parallel()
	ctx, s := newInternalService(t, time.Minute)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	const n = 200
	for i := range n {
		j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":"t","args":[%d],"options":{"queue":"one"}}`, i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for done := 0; done < n; {
		jobs, err := s.Fetch(ctx, ojs.FetchRequest{Queues: []string{"one"}, Count: 10, WorkerID: "w"})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if _, err := s.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	name := topology.ReadyConsumer("one", ojs.DefaultPriority)
	held := func() int {
		s.held.mu.Lock()
		defer s.held.mu.Unlock()
		return len(s.held.levels[name])
	}
	// Every job is settled; the next pulls (empty) forget them once
	// settleLag has passed.
	deadline := time.Now().Add(10 * time.Second)
	for held() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d settled ready messages still held after the queue's later pulls", held(), n)
		}
		if _, err := s.Fetch(ctx, ojs.FetchRequest{Queues: []string{"one"}, Count: 1, WorkerID: "w"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(settleLag)
	}
}
