package admission_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 6: a process that stops answers its blocked producers.
// EndBlocking ends every wait for room in a full block queue at once (not
// at the producers' 20 s block timeout) with ErrShuttingDown, and nothing
// was admitted for them: the queue's depth units and stored jobs are what
// they were before they came, and no ticket of theirs is left in the line.
// A producer arriving afterwards is answered at once without taking a
// ticket, and one that finds room is still served.
func TestBackpressureEndBlockingAnswersBlockedProducers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "ending", ojs.Backpressure{MaxDepth: 1, Strategy: ojs.StrategyBlock})
	bound(t, b, "roomy", ojs.Backpressure{MaxDepth: 5, Strategy: ojs.StrategyBlock})
	enqueue(t, b, `{"type":"t","args":[0],"options":{"queue":"ending"}}`)
	before := storedState(t, b, "ending")

	const producers = 3
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Enqueue(ojs.WithBlockTimeout(ctx, 20*time.Second),
				mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"ending"}}`, i+1)))
			errs <- err
		}()
	}
	eventually(t, 10*time.Second, "producers blocked", func() bool { return b.svc.BlockedProducers("ending") == producers })
	if n := tickets(t, b, "ending"); n != producers {
		t.Fatalf("%d tickets in the line, want %d", n, producers)
	}

	ended := time.Now()
	b.svc.EndBlocking()
	b.svc.EndBlocking() // safe twice
	wg.Wait()
	close(errs)
	// Bounded well below the block timeout (20 s), generously for a loaded
	// machine: the answer does not wait for the timeout.
	if took := time.Since(ended); took > 10*time.Second {
		t.Fatalf("blocked producers answered %s after EndBlocking", took)
	}
	for err := range errs {
		if !errors.Is(err, ojs.ErrShuttingDown) {
			t.Fatalf("blocked producer: %v, want ErrShuttingDown", err)
		}
	}
	if after := storedState(t, b, "ending"); after != before {
		t.Fatalf("after EndBlocking: %+v, before the producers came: %+v", after, before)
	}
	if n := tickets(t, b, "ending"); n != 0 || b.svc.BlockedProducers("ending") != 0 {
		t.Fatalf("%d tickets and %d waiters left in the line", n, b.svc.BlockedProducers("ending"))
	}

	// Later producers do not wait: a full queue answers at once, with no
	// ticket taken; a queue with room still takes the job.
	start := time.Now()
	_, err := b.svc.Enqueue(ojs.WithBlockTimeout(ctx, 20*time.Second),
		mustParse(t, `{"type":"t","args":[9],"options":{"queue":"ending"}}`))
	if !errors.Is(err, ojs.ErrShuttingDown) || time.Since(start) > 10*time.Second {
		t.Fatalf("producer after EndBlocking: %v after %s, want ErrShuttingDown at once", err, time.Since(start))
	}
	if n := tickets(t, b, "ending"); n != 0 {
		t.Fatalf("producer after EndBlocking took a ticket (%d in the line)", n)
	}
	if _, err := b.svc.Enqueue(ojs.WithBlockTimeout(ctx, 20*time.Second),
		mustParse(t, `{"type":"t","args":[10],"options":{"queue":"roomy"}}`)); err != nil {
		t.Fatalf("producer with room after EndBlocking: %v", err)
	}
}

// queueState is what a queue holds in JetStream: depth units, ready
// messages (an available job's record) and job records.
type queueState struct {
	units, ready, records uint64
}

func storedState(t *testing.T, b bundle, queue string) queueState {
	t.Helper()
	ctx := testCtx(t)
	var s queueState
	s.units, _ = units(t, b.js, queue)
	ready, err := b.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ready.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf(topology.ReadyQueueFilterPattern, topology.Token(queue))))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range info.State.Subjects {
		s.ready += n
	}
	kv, err := b.js.KeyValue(ctx, topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.records = st.Values()
	return s
}

// tickets is the number of tickets in queue's line of blocked producers.
func tickets(t *testing.T, b bundle, queue string) uint64 {
	t.Helper()
	ctx := testCtx(t)
	st, err := b.js.Stream(ctx, topology.BlockedStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(topology.BlockedSubject(queue)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[topology.BlockedSubject(queue)]
}
