package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// bound sets a queue's backpressure and fails the test on error.
func bound(t *testing.T, b bundle, queue string, bp ojs.Backpressure) {
	t.Helper()
	if _, err := b.svc.SetQueueBackpressure(testCtx(t), queue, &bp); err != nil {
		t.Fatalf("set backpressure of %s: %v", queue, err)
	}
}

func tryEnqueue(t *testing.T, b bundle, body string) (*ojs.Job, error) {
	t.Helper()
	return b.svc.Enqueue(testCtx(t), mustParse(t, body))
}

func wantFull(t *testing.T, err error, boundKind string) *ojs.QueueFullError {
	t.Helper()
	fe, ok := errors.AsType[*ojs.QueueFullError](err)
	if !ok {
		t.Fatalf("want QueueFullError(%s), got %v", boundKind, err)
	}
	if fe.Bound != boundKind || fe.RetryAfter <= 0 {
		t.Fatalf("QueueFullError bound %q retry-after %s, want %q and > 0", fe.Bound, fe.RetryAfter, boundKind)
	}
	return fe
}

// units is the number of depth units of a queue, read from JetStream.
func units(t *testing.T, js jetstream.JetStream, queue string) (msgs, bytes uint64) {
	t.Helper()
	st, err := js.Stream(testCtx(t), topology.DepthStream(queue))
	if err != nil {
		t.Fatalf("depth stream: %v", err)
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatalf("depth stream info: %v", err)
	}
	return info.State.Msgs, info.State.Bytes
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BP-001, BP-002, BP-005: a depth bound refuses the job past max_depth
// with a retryable 429 error carrying depth and bound; the job is not
// stored; room comes back when a job finishes.
func TestBackpressureRejectAtMaxDepth_BP001_BP002(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "bp", ojs.Backpressure{MaxDepth: 3})
	var ids []string
	for i := range 3 {
		j := enqueue(t, b, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"bp"}}`, i))
		ids = append(ids, j.ID)
	}
	id4 := "019a0000-0000-7000-8000-000000000004"
	_, err := tryEnqueue(t, b, `{"id":"`+id4+`","type":"t","args":[4],"options":{"queue":"bp"}}`)
	fe := wantFull(t, err, "max_depth")
	if fe.Depth != 3 || fe.MaxDepth != 3 || fe.Ratio != 1 || fe.Strategy != ojs.StrategyReject {
		t.Fatalf("full error: %+v", fe.Pressure)
	}
	if _, err := b.svc.Get(ctx, id4); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("5.1: the refused job must not be stored, Get: %v", err)
	}
	if n, _ := units(t, b.js, "bp"); n != 3 {
		t.Fatalf("units = %d, want 3", n)
	}
	// Claiming one job frees its unit: depth is available + scheduled +
	// retryable, not active (ojs-backpressure.md 3).
	j := fetch1(t, b, "bp")
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "unit release", func() bool { n, _ := units(t, b.js, "bp"); return n == 2 })
	enqueue(t, b, `{"type":"t","args":[5],"options":{"queue":"bp"}}`)
	// Cancel releases too.
	if _, _, err := b.svc.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "unit release on cancel", func() bool { n, _ := units(t, b.js, "bp"); return n == 2 })
	// Other queues are not bounded.
	enqueue(t, b, `{"type":"t","args":[6],"options":{"queue":"other"}}`)
}

// BP-001 with the spec's depth (ojs-backpressure.md 3: available +
// scheduled + retryable): a running job does not count, so claiming one
// makes room for a new job at once; count_active keeps the place of a
// running job until it finishes.
func TestBackpressureDepthExcludesActive_BP001(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		queue       string
		countActive bool
	}{{"spec", false}, {"strict", true}} {
		bound(t, b, c.queue, ojs.Backpressure{MaxDepth: 2, CountActive: c.countActive})
		body := fmt.Sprintf(`{"type":"t","args":[],"options":{"queue":%q}}`, c.queue)
		enqueue(t, b, body)
		enqueue(t, b, body)
		j := fetch1(t, b, c.queue)
		if !c.countActive {
			// The claim gives the unit back right after it lands.
			eventually(t, 5*time.Second, "unit of the claimed job released", func() bool { n, _ := units(t, b.js, c.queue); return n == 1 })
		}
		_, err := tryEnqueue(t, b, body)
		if c.countActive {
			wantFull(t, err, "max_depth")
			if n, _ := units(t, b.js, c.queue); n != 2 {
				t.Fatalf("%s: units = %d, want 2 (the running job keeps its place)", c.queue, n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: enqueue after a claim: %v (active jobs are not depth)", c.queue, err)
		}
		if n, _ := units(t, b.js, c.queue); n != 2 {
			t.Fatalf("%s: units = %d, want 2", c.queue, n)
		}
		wantFull(t, func() error { _, err := tryEnqueue(t, b, body); return err }(), "max_depth")
		st, err := b.svc.QueueStats(ctx, c.queue)
		if err != nil || st.Backpressure == nil || st.Backpressure.Depth != 2 || st.Backpressure.Ratio != 1 {
			t.Fatalf("%s: stats %v %+v", c.queue, err, st)
		}
		if got, _ := b.svc.Get(ctx, j.ID); got.State != ojs.StateActive {
			t.Fatalf("%s: claimed job is %s", c.queue, got.State)
		}
	}
}

// A failed attempt that will be retried counts again (retryable is
// depth): it takes a unit when there is room, and when its queue is full
// it is still retried, never refused or lost, counting over the bound in
// the overdraft until it is claimed again.
func TestBackpressureRetryTakesUnitOrOverdraws(t *testing.T) {
	t.Parallel()
	sink := newEventSink()
	b := setupCfg(t, natsJS(t), admission.Config{Events: sink})
	ctx := testCtx(t)
	bound(t, b, "re", ojs.Backpressure{MaxDepth: 1})
	body := func(i int) string {
		return fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"re","retry":{"max_attempts":3,"initial_interval_ms":200,"jitter":false}}}`, i)
	}
	nack := func(id string) *ojs.Job {
		t.Helper()
		if _, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: id, Error: ojs.JobError{Code: "handler_error", Message: "boom"}}); err != nil {
			t.Fatalf("nack: %v", err)
		}
		j, err := b.svc.Get(ctx, id)
		if err != nil || j.State != ojs.StateRetryable {
			t.Fatalf("after nack: %v %+v", err, j)
		}
		return j
	}
	// Room: the retry takes a unit.
	a := enqueue(t, b, body(0))
	fetch1(t, b, "re")
	eventually(t, 5*time.Second, "unit of the running job released", func() bool { n, _ := units(t, b.js, "re"); return n == 0 })
	nack(a.ID)
	if n, _ := units(t, b.js, "re"); n != 1 {
		t.Fatalf("units of a retryable job = %d, want 1", n)
	}
	_, err := tryEnqueue(t, b, body(1))
	wantFull(t, err, "max_depth")

	// Full: the retry overdraws.
	eventually(t, 10*time.Second, "retry due", func() bool {
		j, _ := b.svc.Get(ctx, a.ID)
		return j.State == ojs.StateAvailable
	})
	if got := fetch1(t, b, "re"); got == nil || got.ID != a.ID {
		t.Fatalf("fetch retry: %+v", got)
	}
	eventually(t, 5*time.Second, "unit of the running retry released", func() bool { n, _ := units(t, b.js, "re"); return n == 0 })
	c := enqueue(t, b, body(2)) // takes the place a's claim gave back
	nack(a.ID)
	if n, _ := units(t, b.js, "re"); n != 1 {
		t.Fatalf("units = %d, want 1 (the bound itself never moves)", n)
	}
	st, err := b.svc.QueueStats(ctx, "re")
	if err != nil || st.Backpressure == nil || st.Backpressure.Depth != 2 || st.Backpressure.Ratio != 1 {
		aj, _ := b.svc.Get(ctx, a.ID)
		t.Fatalf("depth with an overdrawn retry: %v %+v (retry's record: %+v)", err, st.Backpressure, aj.Internal)
	}
	found := false
	for _, d := range sink.waitFor(t, admission.EventQueueOverflow) {
		if m, ok := d.(map[string]any); ok && m["bound_type"] == "overdraft" && m["job_id"] == a.ID {
			found = true
		}
	}
	if !found {
		t.Fatalf("no queue.overflow event for the overdrawn retry")
	}
	_, err = tryEnqueue(t, b, body(3))
	wantFull(t, err, "max_depth")

	// Both run to completion; the overdraft is given back on the claim.
	done := map[string]bool{}
	eventually(t, 15*time.Second, "both jobs completed", func() bool {
		if j := fetch1(t, b, "re"); j != nil {
			if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
				t.Fatalf("ack: %v", err)
			}
			done[j.ID] = true
		}
		return done[a.ID] && done[c.ID]
	})
	eventually(t, 5*time.Second, "units and overdraft released", func() bool {
		st, err := b.svc.QueueStats(ctx, "re")
		n, _ := units(t, b.js, "re")
		return err == nil && st.Backpressure.Depth == 0 && n == 0
	})
	over, err := b.js.Stream(ctx, topology.OverdraftStream)
	if err != nil {
		t.Fatalf("overdraft stream: %v", err)
	}
	if info, err := over.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("overdraft units left: %v %+v", err, info.State)
	}
}

// BP-R001: the size bound counts each job's encoded envelope exactly.
func TestBackpressureSizeIsExact_BPR001(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var total int64
	body := func(i int) string {
		return fmt.Sprintf(`{"type":"t","args":["%0200d"],"options":{"queue":"sz"}}`, i)
	}
	bound(t, b, "sz", ojs.Backpressure{MaxSizeBytes: 2000})
	for i := 0; ; i++ {
		j, err := tryEnqueue(t, b, body(i))
		if err != nil {
			fe := wantFull(t, err, "max_size_bytes")
			if fe.SizeBytes != total || fe.MaxSizeBytes != 2000 {
				t.Fatalf("full error size %d/%d, want %d/2000", fe.SizeBytes, fe.MaxSizeBytes, total)
			}
			break
		}
		enc, _ := json.Marshal(j.Public())
		total += int64(len(enc))
		if _, bytes := units(t, b.js, "sz"); int64(bytes) != total {
			t.Fatalf("after %d jobs JetStream accounts %d bytes, want the envelopes' %d", i+1, bytes, total)
		}
	}
	if total > 2000 || total < 2000-600 {
		t.Fatalf("accepted %d bytes under a 2000 byte bound", total)
	}
}

// BP-R002: block waits for room, in arrival order, and 429s at its timeout.
func TestBackpressureBlock_BPR002(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "blk", ojs.Backpressure{MaxDepth: 1, Strategy: ojs.StrategyBlock})
	first := enqueue(t, b, `{"type":"t","args":[0],"options":{"queue":"blk"}}`)

	// Without OJS-Block-Timeout the default is 0: reject at once (5.2).
	_, err := tryEnqueue(t, b, `{"type":"t","args":[1],"options":{"queue":"blk"}}`)
	wantFull(t, err, "max_depth")

	// A short timeout gives up with 429 after waiting.
	start := time.Now()
	_, err = b.svc.Enqueue(ojs.WithBlockTimeout(ctx, 100*time.Millisecond), mustParse(t, `{"type":"t","args":[2],"options":{"queue":"blk"}}`))
	if fe := wantFull(t, err, "max_depth"); fe.Waited < 100*time.Millisecond || time.Since(start) > 5*time.Second {
		t.Fatalf("waited %s", fe.Waited)
	}

	// Two blocked producers are served in arrival order as room frees.
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, name := range []string{"second", "third"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := b.svc.Enqueue(ojs.WithBlockTimeout(ctx, 20*time.Second),
				mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"blk"}}`, 10+i)))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			order = append(order, name+":"+j.ID)
			mu.Unlock()
		}()
		// Arrival order: the second producer waits before the third starts.
		eventually(t, 5*time.Second, "producer waiting", func() bool { return b.svc.BlockedProducers("blk") == i+1 })
	}
	finish := func(id string) {
		got := fetch1(t, b, "blk")
		if got == nil || got.ID != id {
			t.Fatalf("fetch: got %v want %s", got, id)
		}
		if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: id}); err != nil {
			t.Fatal(err)
		}
	}
	finish(first.ID)
	eventually(t, 5*time.Second, "second accepted", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 1 })
	mu.Lock()
	if order[0][:6] != "second" {
		t.Fatalf("order %v: the first waiter must be served first", order)
	}
	secondID := order[0][7:]
	mu.Unlock()
	finish(secondID)
	wg.Wait()
	if len(order) != 2 || order[1][:5] != "third" {
		t.Fatalf("order %v", order)
	}
}

// BP-R002 across processes: blocked producers are served in arrival
// order whichever process they wait in. Room is freed through the second
// process, which wakes its own waiter first: without one line for all
// processes, the later producer there would win.
func TestBackpressureBlockArrivalOrderAcrossProcesses_BPR002(t *testing.T) {
	t.Parallel()
	p0, p1 := twoProcessesBlocking(t, "line", 1)
	ctx := testCtx(t)
	enqueue(t, p0, `{"type":"t","args":[0],"options":{"queue":"line"}}`)
	var mu sync.Mutex
	var served []string
	var wg sync.WaitGroup
	for i, p := range []bundle{p0, p1, p0} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.svc.Enqueue(ojs.WithBlockTimeout(ctx, 30*time.Second),
				mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"line"}}`, i+1)))
			if err != nil {
				t.Errorf("producer %d: %v", i, err)
				return
			}
			mu.Lock()
			served = append(served, fmt.Sprint(i))
			mu.Unlock()
		}()
		eventually(t, 5*time.Second, "producer waiting", func() bool {
			return p0.svc.BlockedProducers("line")+p1.svc.BlockedProducers("line") == i+1
		})
	}
	for n := 1; n <= 3; n++ {
		// The job of the producer served last round was stored by p0: p1's
		// ready consumer learns of it a moment later (nats-server signals
		// consumers from a goroutine of its own), and a fetch before that
		// finds nothing, as a polling worker would.
		eventually(t, 10*time.Second, fmt.Sprintf("round %d: a job to fetch", n), func() bool { return fetch1(t, p1, "line") != nil })
		eventually(t, 10*time.Second, "a producer served", func() bool { mu.Lock(); defer mu.Unlock(); return len(served) == n })
	}
	wg.Wait()
	if got := fmt.Sprint(served); got != "[0 1 2]" {
		t.Fatalf("served %s, want arrival order [0 1 2]", got)
	}
}

// A producer that died while blocked holds its place only until its
// deadline: the producer behind it is served once the deadline (plus a
// grace) has passed, woken by a timer, not a poll.
func TestBackpressureBlockDeadTicketExpires_BPR002(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "dead", ojs.Backpressure{MaxDepth: 1, Strategy: ojs.StrategyBlock})
	enqueue(t, b, `{"type":"t","args":[0],"options":{"queue":"dead"}}`)
	// A ticket as a producer in a process that then died leaves it.
	if _, err := tryBlock(ctx, b, 100*time.Millisecond); !errors.Is(err, ojs.ErrQueueFull) {
		t.Fatalf("first blocked enqueue: %v", err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	deadTicket(t, b, "dead", deadline)
	fetch1(t, b, "dead") // room for one
	start := time.Now()
	if _, err := tryBlock(ctx, b, 20*time.Second); err != nil {
		t.Fatalf("producer behind a dead ticket: %v", err)
	}
	// Measured from the ticket's deadline, not from the fetch: on a loaded
	// machine the fetch itself may outlast the deadline and its grace.
	if early := deadline.Add(admission.TicketGrace).Sub(time.Now()); early > 0 {
		t.Fatalf("served %s before the dead ticket's deadline and grace", early)
	}
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("served after %s: want soon after the dead ticket's deadline and grace, woken by a timer", waited)
	}
}

// BP-R002 across processes, on the fast path: a process whose last look
// found a block queue's line empty, and which sees the queue far from its
// bound, enqueues without a ticket; once a producer waits in another
// process (here a dead one's ticket, with a deadline far away), its next
// enqueue goes behind it like any other, though there is room.
func TestBackpressureBlockFastPathKeepsTheLine_BPR002(t *testing.T) {
	t.Parallel()
	p0, p1 := twoProcessesBlocking(t, "fast", 4)
	ctx := testCtx(t)
	enqueue(t, p1, `{"type":"t","args":[0],"options":{"queue":"fast"}}`)
	if !p1.svc.LineClear("fast") {
		t.Fatal("the line read empty at the first enqueue is not remembered")
	}
	deadTicket(t, p0, "fast", time.Now().Add(time.Minute))
	eventually(t, 10*time.Second, "the ticket seen", func() bool { return !p1.svc.LineClear("fast") })
	_, err := p1.svc.Enqueue(ojs.WithBlockTimeout(ctx, 300*time.Millisecond),
		mustParse(t, `{"type":"t","args":[1],"options":{"queue":"fast"}}`))
	if !errors.Is(err, ojs.ErrQueueFull) {
		t.Fatalf("enqueue with room while a producer waits elsewhere: %v, want to wait behind it and give up (queue full)", err)
	}
}

// twoProcessesBlocking is two services on one server, with queue bounded
// at maxDepth with the block strategy (set through the first, seen by the
// second).
func twoProcessesBlocking(t *testing.T, queue string, maxDepth int64) (p0, p1 bundle) {
	t.Helper()
	srv := natsTestServer(t)
	p0, p1 = setupOn(t, nil, natsConnect(t, srv)), setupOn(t, nil, natsConnect(t, srv))
	bound(t, p0, queue, ojs.Backpressure{MaxDepth: maxDepth, Strategy: ojs.StrategyBlock})
	ctx := testCtx(t)
	eventually(t, 5*time.Second, "bound seen", func() bool {
		c, _ := p1.svc.QueueConfig(ctx, queue)
		return c.Source == "queue" && c.Backpressure.Strategy == ojs.StrategyBlock
	})
	return p0, p1
}

// deadTicket takes a place in the line of queue as a blocked producer in a
// process that then died would leave it: a ticket with its deadline, and
// nobody waiting on it.
func deadTicket(t *testing.T, b bundle, queue string, deadline time.Time) {
	t.Helper()
	m := nats.NewMsg(topology.BlockedSubject(queue))
	m.Header.Set(admission.HeaderTicketDeadline, fmt.Sprint(deadline.UnixNano()))
	if _, err := b.js.PublishMsg(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
}

func tryBlock(ctx context.Context, b bundle, timeout time.Duration) (*ojs.Job, error) {
	return b.svc.Enqueue(ojs.WithBlockTimeout(ctx, timeout), &ojs.Job{Type: "t", Args: json.RawMessage(`[]`), Queue: "dead"})
}

// BP-R003: drop_oldest discards the oldest available job of the lowest
// priority (highest number), with error type overflow, to accept the new.
func TestBackpressureDropOldest_BPR003(t *testing.T) {
	t.Parallel()
	sink := newEventSink()
	b := setupCfg(t, natsJS(t), admission.Config{Events: sink})
	ctx := testCtx(t)
	bound(t, b, "drop", ojs.Backpressure{MaxDepth: 3, Strategy: ojs.StrategyDropOldest})
	hi := enqueue(t, b, `{"type":"t","args":[0],"options":{"queue":"drop","priority":1}}`)
	lowOld := enqueue(t, b, `{"type":"t","args":[1],"options":{"queue":"drop","priority":9}}`)
	lowNew := enqueue(t, b, `{"type":"t","args":[2],"options":{"queue":"drop","priority":9}}`)
	nj := enqueue(t, b, `{"type":"t","args":[3],"options":{"queue":"drop","priority":5}}`)
	dropped, err := b.svc.Get(ctx, lowOld.ID)
	if err != nil || dropped.State != ojs.StateDiscarded || dropped.Error == nil || dropped.Error.Type != "overflow" {
		t.Fatalf("oldest lowest-priority job: %v %+v", err, dropped)
	}
	for _, j := range []*ojs.Job{hi, lowNew, nj} {
		if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateAvailable {
			t.Fatalf("job %s: %v %+v", j.ID, err, got)
		}
	}
	if n, _ := units(t, b.js, "drop"); n != 3 {
		t.Fatalf("units = %d, want 3", n)
	}
	sink.waitFor(t, admission.EventBackpressureDropped)
	sink.waitFor(t, admission.EventJobDiscarded)
	// The dropped job is not handed out; the others come in priority order.
	for _, want := range []string{hi.ID, nj.ID, lowNew.ID} {
		if got := fetch1(t, b, "drop"); got == nil || got.ID != want {
			t.Fatalf("fetch: got %v want %s", got, want)
		}
	}
	// Active jobs are not depth (3: available + scheduled + retryable):
	// with all three running the queue has room for three more, taken
	// here by scheduled jobs. A claim gives its unit back after its
	// compare-and-swap, asynchronously (admission/doc.go): wait for it.
	eventually(t, 10*time.Second, "units of the claimed jobs released", func() bool { n, _ := units(t, b.js, "drop"); return n == 0 })
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"drop"},"scheduled_at":%q}`, 10+i, at))
	}
	// Nothing available to drop (three active, three scheduled): reject
	// (5.3 drops only available jobs).
	_, err = tryEnqueue(t, b, `{"type":"t","args":[4],"options":{"queue":"drop"}}`)
	wantFull(t, err, "max_depth")
}

// 9.3: a batch is all or nothing against the bound.
func TestBackpressureBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "bat", ojs.Backpressure{MaxDepth: 5})
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"bat"}}`, i))
	}
	batch := func(n int) []*ojs.Job {
		var out []*ojs.Job
		for i := range n {
			out = append(out, mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"bat"}}`, 100+i)))
		}
		return out
	}
	_, err := b.svc.EnqueueBatch(ctx, batch(3))
	wantFull(t, err, "max_depth")
	eventually(t, 5*time.Second, "units of the refused batch released", func() bool { n, _ := units(t, b.js, "bat"); return n == 3 })
	got, err := b.svc.EnqueueBatch(ctx, batch(2))
	if err != nil || len(got) != 2 {
		t.Fatalf("batch of 2: %v", err)
	}
	if n, _ := units(t, b.js, "bat"); n != 5 {
		t.Fatalf("units = %d, want 5", n)
	}
	// A batch larger than the bound can never fit.
	_, err = b.svc.EnqueueBatch(ctx, batch(6))
	wantFull(t, err, "max_depth")
}

// Per-tenant depth (ojs-backpressure.md 9.2, .txt multi-tenancy): one
// tenant cannot fill a shared queue.
func TestBackpressurePerTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bound(t, b, "shared", ojs.Backpressure{MaxDepth: 10, TenantKey: "tenant_id", TenantMaxDepth: 2})
	job := func(tenant string, i int) string {
		return fmt.Sprintf(`{"type":"t","args":[%d],"meta":{"tenant_id":%q},"options":{"queue":"shared"}}`, i, tenant)
	}
	enqueue(t, b, job("acme", 1))
	enqueue(t, b, job("acme", 2))
	_, err := tryEnqueue(t, b, job("acme", 3))
	if fe := wantFull(t, err, "tenant_max_depth"); fe.Tenant != "acme" {
		t.Fatalf("tenant %q", fe.Tenant)
	}
	enqueue(t, b, job("globex", 1))
	enqueue(t, b, job("a.b*>", 1)) // escaped into one subject token
	enqueue(t, b, job("a.b*>", 2))
	// Lowering the per-tenant bound while jobs are held is refused.
	_, err = b.svc.SetQueueBackpressure(testCtx(t), "shared", &ojs.Backpressure{MaxDepth: 10, TenantKey: "tenant_id", TenantMaxDepth: 1})
	if !errors.Is(err, ojs.ErrConflict) {
		t.Fatalf("lowering tenant bound: %v", err)
	}
}

// Events and the pressure report: warning at the threshold, critical at
// 95 %, overflow (and the core spec's aliases) on refusal.
func TestBackpressureEventsAndPressure(t *testing.T) {
	t.Parallel()
	sink := newEventSink()
	b := setupCfg(t, natsJS(t), admission.Config{Events: sink})
	bound(t, b, "ev", ojs.Backpressure{MaxDepth: 20, WarningThreshold: 0.5})
	var last ojs.Pressure
	for i := range 20 {
		ctx, rep := ojs.WithPressureReport(testCtx(t))
		if _, err := b.svc.Enqueue(ctx, mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"ev"}}`, i))); err != nil {
			t.Fatal(err)
		}
		p, ok := rep.Highest()
		if !ok || p.MaxDepth != 20 || p.Ratio < last.Ratio {
			t.Fatalf("pressure report %d: %+v (previous %+v)", i, p, last)
		}
		last = p
	}
	if last.Ratio != 1 || last.Depth != 20 {
		t.Fatalf("final pressure %+v", last)
	}
	_, err := tryEnqueue(t, b, `{"type":"t","args":[],"options":{"queue":"ev"}}`)
	wantFull(t, err, "max_depth")
	for _, e := range []string{admission.EventQueuePressureWarning, admission.EventBackpressureWarning,
		admission.EventQueuePressureCritical, admission.EventQueueOverflow, admission.EventBackpressureRejected} {
		sink.waitFor(t, e)
	}
	st, err := b.svc.QueueStats(testCtx(t), "ev")
	if err != nil || st.Backpressure == nil || st.Backpressure.Depth != 20 || st.Backpressure.Ratio != 1 {
		t.Fatalf("stats: %v %+v", err, st)
	}
	cfg, err := b.svc.QueueConfig(testCtx(t), "ev")
	if err != nil || cfg.Source != "queue" || cfg.Backpressure.MaxDepth != 20 || cfg.Backpressure.Strategy != ojs.StrategyReject {
		t.Fatalf("config: %v %+v", err, cfg)
	}
}

// A server-wide default bounds queues without their own config.
func TestBackpressureServerDefault(t *testing.T) {
	t.Parallel()
	b := setupCfg(t, natsJS(t), admission.Config{DefaultBackpressure: ojs.Backpressure{MaxDepth: 2}})
	enqueue(t, b, `{"type":"t","args":[1],"options":{"queue":"d1"}}`)
	enqueue(t, b, `{"type":"t","args":[2],"options":{"queue":"d1"}}`)
	_, err := tryEnqueue(t, b, `{"type":"t","args":[3],"options":{"queue":"d1"}}`)
	wantFull(t, err, "max_depth")
	cfg, _ := b.svc.QueueConfig(testCtx(t), "d1")
	if cfg.Source != "default" {
		t.Fatalf("source %q", cfg.Source)
	}
	// An explicit zero bound overrides the default: unbounded.
	bound(t, b, "d1", ojs.Backpressure{})
	enqueue(t, b, `{"type":"t","args":[4],"options":{"queue":"d1"}}`)
}

// Units that no longer belong to a job are released by the reconciler: a
// unit whose job was never stored (crash between unit and record), one
// whose job finished (crash between the last transition and the release),
// and a second unit of a live job.
func TestBackpressureReconcileReleasesLeakedUnits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "leak", ojs.Backpressure{MaxDepth: 4})
	done := enqueue(t, b, `{"type":"t","args":[0],"options":{"queue":"leak"}}`)
	if j := fetch1(t, b, "leak"); j == nil || j.ID != done.ID {
		t.Fatalf("fetch: %v", j)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: done.ID}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "release on ack", func() bool { n, _ := units(t, b.js, "leak"); return n == 0 })
	live := enqueue(t, b, `{"type":"t","args":[1],"options":{"queue":"leak"}}`)
	for _, id := range []string{"019a0000-0000-7000-8000-00000000dead", done.ID, live.ID} {
		if _, err := b.js.PublishMsg(ctx, leakedUnit("leak", id)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := tryEnqueue(t, b, `{"type":"t","args":[2],"options":{"queue":"leak"}}`)
	wantFull(t, err, "max_depth")
	if n, err := b.svc.ReconcileDepth(ctx, "leak", time.Hour); err != nil || n != 0 {
		t.Fatalf("reconcile within the grace period released %d: %v", n, err)
	}
	n, err := b.svc.ReconcileDepth(ctx, "leak", 0)
	if err != nil || n != 3 {
		t.Fatalf("reconcile released %d: %v", n, err)
	}
	enqueue(t, b, `{"type":"t","args":[3],"options":{"queue":"leak"}}`)
	if got, _ := b.svc.Get(ctx, live.ID); got.State != ojs.StateAvailable {
		t.Fatalf("live job touched: %+v", got)
	}
}

// Invariant 3 for depth, issue 5: three jetgate instances and 32
// concurrent producers against max_depth 100. Phase 1 (reject, no
// workers): exactly 100 are accepted. Phase 2 (block, workers draining):
// every producer gets its jobs in. The depth observed from JetStream (the
// job records, watched in stream order) never exceeds 100, and every
// accepted job is found completed.
func TestBackpressureRaceThreeInstances(t *testing.T) {
	t.Parallel()
	srv := natsTestServer(t)
	var svcs []bundle
	for range 3 {
		svcs = append(svcs, setupOn(t, nil, natsConnect(t, srv)))
	}
	ctx := testCtx(t)
	bound(t, svcs[0], "race", ojs.Backpressure{MaxDepth: 100})
	// A bound applies in every process once its queue watch delivers it.
	for _, b := range svcs {
		eventually(t, 5*time.Second, "bound seen", func() bool {
			c, _ := b.svc.QueueConfig(ctx, "race")
			return c.Source == "queue"
		})
	}
	watch := watchDepth(t, svcs[0].js, "race")

	const producers = 32
	var mu sync.Mutex
	var accepted []string
	produce := func(p, n int, block bool) int {
		ok := 0
		b := svcs[p%3]
		for i := range n {
			c := ctx
			if block {
				c = ojs.WithBlockTimeout(ctx, 20*time.Second)
			}
			j, err := b.svc.Enqueue(c, mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d,%d],"options":{"queue":"race"}}`, p, i)))
			if err != nil {
				if !errors.Is(err, ojs.ErrQueueFull) {
					t.Errorf("producer %d: %v", p, err)
				}
				continue
			}
			ok++
			mu.Lock()
			accepted = append(accepted, j.ID)
			mu.Unlock()
		}
		return ok
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() { defer wg.Done(); produce(p, 5, false) }()
	}
	wg.Wait()
	if len(accepted) != 100 {
		t.Fatalf("phase 1: %d jobs accepted against max_depth 100 (160 offered)", len(accepted))
	}

	// Phase 2: switch to block, drain with one worker per instance.
	bound(t, svcs[1], "race", ojs.Backpressure{MaxDepth: 100, Strategy: ojs.StrategyBlock})
	for _, b := range svcs {
		eventually(t, 5*time.Second, "config seen", func() bool {
			c, _ := b.svc.QueueConfig(ctx, "race")
			return c.Backpressure.Strategy == ojs.StrategyBlock
		})
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for _, b := range svcs {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for wctx.Err() == nil {
				jobs, err := b.svc.Fetch(wctx, ojs.FetchRequest{Queues: []string{"race"}, Count: 10, WorkerID: "w"})
				if err != nil {
					continue
				}
				for _, j := range jobs {
					if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
						t.Errorf("ack: %v", err)
					}
				}
				if len(jobs) == 0 {
					time.Sleep(2 * time.Millisecond) // an idle worker's poll, as the SDKs do
				}
			}
		}()
	}
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n := produce(p, 10, true); n != 10 {
				t.Errorf("producer %d: %d of 10 accepted while blocking", p, n)
			}
		}()
	}
	wg.Wait()
	eventually(t, 20*time.Second, "all jobs completed", func() bool {
		for _, id := range accepted {
			j, err := svcs[0].svc.Get(ctx, id)
			if err != nil || j.State != ojs.StateCompleted {
				return false
			}
		}
		return true
	})
	stopWorkers()
	workers.Wait()
	if len(accepted) != 100+producers*10 {
		t.Fatalf("accepted %d", len(accepted))
	}
	eventually(t, 10*time.Second, "watch caught up", func() bool { open, _ := watch.get(); return open == 0 })
	if _, peak := watch.get(); peak != 100 {
		t.Fatalf("peak depth observed from JetStream = %d, want exactly 100 (never more)", peak)
	}
}

// depthWatch follows the job records of a queue in stream order, counting
// the jobs in depth states after every write, and keeps the peak.
type depthWatch struct {
	mu         sync.Mutex
	open, peak int
}

func (d *depthWatch) get() (open, peak int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open, d.peak
}

func watchDepth(t *testing.T, js jetstream.JetStream, queue string) *depthWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := js.KeyValue(ctx, topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := &depthWatch{}
	state := map[string]ojs.State{}
	// Depth as the spec counts it (ojs-backpressure.md 3), plus pending.
	unfinished := func(s ojs.State) bool {
		return slices.Contains([]ojs.State{ojs.StateAvailable, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending}, s)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var j ojs.Job
			if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &j) != nil || j.Queue != queue {
				continue
			}
			was, seen := state[j.ID]
			state[j.ID] = j.State
			d.mu.Lock()
			switch {
			case (!seen || !unfinished(was)) && unfinished(j.State):
				d.open++
			case seen && unfinished(was) && !unfinished(j.State):
				d.open--
			}
			d.peak = max(d.peak, d.open)
			d.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = w.Stop(); cancel(); <-done })
	return d
}

func natsTestServer(t *testing.T) *server.Server { return natstest.RunServer(t) }

func natsConnect(t *testing.T, s *server.Server) jetstream.JetStream {
	_, js := natstest.Connect(t, s)
	return js
}

func natsJS(t *testing.T) jetstream.JetStream { return natsConnect(t, natstest.RunServer(t)) }

// leakedUnit is the depth unit a crashed enqueue of job id would leave.
func leakedUnit(queue, id string) *nats.Msg {
	m := nats.NewMsg(topology.DepthSubject(queue, ""))
	m.Header.Set("Ojs-Job-Id", id)
	return m
}

// eventSink records events, with data, for tests.
type eventSink struct {
	mu     sync.Mutex
	events map[string][]any
}

func newEventSink() *eventSink { return &eventSink{events: map[string][]any{}} }

func (s *eventSink) Publish(eventType, subject string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[eventType] = append(s.events[eventType], data)
}

func (s *eventSink) PublishJob(eventType string, job *ojs.Job, extra map[string]any) {
	s.Publish(eventType, job.ID, extra)
}

func (s *eventSink) PublishQueue(eventType, queue, actor string) { s.Publish(eventType, queue, nil) }

func (s *eventSink) Recent(context.Context, ojs.EventQuery) ([]ojs.Event, error) { return nil, nil }

func (s *eventSink) waitFor(t *testing.T, eventType string) []any {
	t.Helper()
	var got []any
	eventually(t, 5*time.Second, "event "+eventType, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		got = s.events[eventType]
		return len(got) > 0
	})
	return got
}

// Every way a job finishes releases its unit, including a drop by a rate
// limit's on_limit (a transition of another feature): the depth returns
// to what is still queued.
func TestBackpressureReleasedByRateLimitDrop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bound(t, b, "rlq", ojs.Backpressure{MaxDepth: 5})
	pol := `{"key":"bp-once","rate":{"limit":1,"period":"PT1H"},"on_limit":"drop"}`
	for i := range 3 {
		enqueue(t, b, limitedJob("rlq", pol, i))
	}
	if n, _ := units(t, b.js, "rlq"); n != 3 {
		t.Fatalf("units = %d, want 3", n)
	}
	if j := fetch1(t, b, "rlq"); j == nil {
		t.Fatal("first start refused")
	}
	// The next fetch meets the other two and drops them (on_limit drop);
	// the running job gave its unit back when it was claimed.
	fetch1(t, b, "rlq")
	eventually(t, 5*time.Second, "units of dropped jobs released", func() bool { n, _ := units(t, b.js, "rlq"); return n == 0 })
}

// The bound is exact on a 3-node cluster with R3 streams too: the depth
// stream's limits are applied by the stream leader in log order.
func TestBackpressureExactOnClusterR3(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	ctx := testCtx(t)
	var svcs []*admission.Service
	for range 3 {
		_, js := cl.Connect(t)
		assets, err := topology.Ensure(ctx, js, topology.Config{Replicas: 3})
		if err != nil {
			t.Fatalf("ensure: %v", err)
		}
		svc, err := admission.New(js.Conn(), js, assets, admission.Config{DefaultBackpressure: ojs.Backpressure{MaxDepth: 20}})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Stop)
		svcs = append(svcs, svc)
	}
	var mu sync.Mutex
	accepted := 0
	var wg sync.WaitGroup
	for p := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				_, err := svcs[p%3].Enqueue(ctx, mustParse(t, fmt.Sprintf(`{"type":"t","args":[%d,%d],"options":{"queue":"r3"}}`, p, i)))
				switch {
				case err == nil:
					mu.Lock()
					accepted++
					mu.Unlock()
				case !errors.Is(err, ojs.ErrQueueFull):
					t.Errorf("enqueue: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if accepted != 20 {
		t.Fatalf("%d of 64 accepted against a default max_depth of 20 on R3", accepted)
	}
}
