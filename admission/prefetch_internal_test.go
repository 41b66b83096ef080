package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Pulling ahead (prefetch.go, issue 17): a queue with a backlog has the
// messages of its next fetches pulled with the fetches of now; a fetch
// they cover takes them without a pull, in order. These tests pin what
// keeps that exact: priority first (PRI-003), nothing held from other
// processes for long, nothing left held when a process stops.

// minuteCtx bounds one of these tests.
func minuteCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// heldLong keeps messages pulled ahead for a minute: long enough that
// what a test checks of them right after a fetch never races the sweep,
// however slow the machine.
var heldLong = Config{aheadFor: time.Minute}

// startedService is a started Service with cfg on srv, stopped at
// cleanup, and its connection.
func startedService(t *testing.T, ctx context.Context, srv *server.Server, cfg Config) (*Service, *nats.Conn) {
	t.Helper()
	nc, js := natstest.Connect(t, srv)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(nc, js, assets, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, nc
}

func enqueueN(t *testing.T, ctx context.Context, s *Service, queue string, prio, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":"t","args":[%d],"options":{"queue":%q,"priority":%d}}`, i, queue, prio))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
}

func fetchN(t *testing.T, ctx context.Context, s *Service, queue string, n int) []*ojs.Job {
	t.Helper()
	jobs, err := s.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: n, WorkerID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func aheadOf(s *Service, queue string) int {
	p := s.puller(queue)
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ahead)
}

// delivered is how many messages the ready consumer of a queue level has
// handed out (its delivered consumer sequence).
func delivered(t *testing.T, ctx context.Context, s *Service, queue string, prio int) uint64 {
	t.Helper()
	c, err := s.assets.Ready.Consumer(ctx, topology.ReadyConsumer(queue, prio))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.Delivered.Consumer
}

// argOf is the number a job of enqueueN carries as its one argument.
// fetchedOnce records the jobs of enqueueN fetched so far, by their
// argument, failing the test on a job fetched twice.
type fetchedOnce map[int]string

func (f fetchedOnce) note(t *testing.T, jobs []*ojs.Job) {
	t.Helper()
	for _, j := range jobs {
		a := argOf(t, j)
		if _, ok := f[a]; ok {
			t.Fatalf("job %d fetched twice", a)
		}
		f[a] = j.ID
	}
}

func argOf(t *testing.T, j *ojs.Job) int {
	t.Helper()
	var args []int
	if err := json.Unmarshal(j.Args, &args); err != nil || len(args) != 1 {
		t.Fatalf("args %s: %v", j.Args, err)
	}
	return args[0]
}

// PRI-004 (oldest first within a priority): a fetch covered by messages
// pulled ahead takes them without a pull; the fetch that leaves fewer than
// half the target ahead starts a refill in the background, which pulls the
// target back; and the jobs come in enqueue order all the same.
func TestPullAheadServesTheNextFetchWithoutAPull_PRI004(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	s, _ := startedService(t, ctx, natstest.RunServer(t), heldLong)
	enqueueN(t, ctx, s, "q", 5, 0, 100)
	var got []int
	take := func(n int) {
		for _, j := range fetchN(t, ctx, s, "q", n) {
			got = append(got, argOf(t, j))
		}
		s.puller("q").refills.Wait()
	}
	take(5) // the first pull takes what it needs: no backlog seen yet
	if n := aheadOf(s, "q"); n != 0 {
		t.Fatalf("after the first fetch %d messages are held ahead, want 0", n)
	}
	take(5) // the queue had all the first pull asked: this one takes two fetches more
	const target = aheadFetches * 5
	if n := aheadOf(s, "q"); n != target {
		t.Fatalf("after the second fetch %d messages are held ahead, want %d", n, target)
	}
	before := delivered(t, ctx, s, "q", 5)
	take(5) // half the target is left: no refill
	if after := delivered(t, ctx, s, "q", 5); after != before {
		t.Fatalf("a fetch covered by the messages pulled ahead, leaving half of them, pulled %d more", after-before)
	}
	take(5) // none left: a refill pulls the target
	if after := delivered(t, ctx, s, "q", 5); after != before+target {
		t.Fatalf("the refill after the fetch that took the last message ahead pulled %d, want %d", after-before, target)
	}
	if n := aheadOf(s, "q"); n != target {
		t.Fatalf("after the refill %d messages are held ahead, want %d", n, target)
	}
	take(5)
	take(5)
	for i, a := range got {
		if a != i {
			t.Fatalf("jobs came in the order %v, want enqueue order", got)
		}
	}
	if len(got) != 30 {
		t.Fatalf("fetched %d jobs, want 30", len(got))
	}
}

// The target of messages kept ahead follows the fetches: it doubles (to
// at least two fetches' worth) when a fetch of a queue with a backlog finds
// too few messages ahead, and halves when messages pulled ahead waited
// aheadFor untaken and the sweep put them back.
func TestPullAheadTargetFollowsTheFetches(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	srv := natstest.RunServer(t)
	state := func(s *Service) (target, ahead int) {
		p := s.puller("q")
		p.refills.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.target, len(p.ahead)
	}

	grow, _ := startedService(t, ctx, srv, heldLong)
	enqueueN(t, ctx, grow, "q", 5, 0, 100)
	fetchN(t, ctx, grow, "q", 5)
	fetchN(t, ctx, grow, "q", 5)
	if target, ahead := state(grow); target != 10 || ahead != 10 {
		t.Fatalf("after two fetches of 5: target %d, %d ahead; want 10 and 10", target, ahead)
	}
	fetchN(t, ctx, grow, "q", 15) // finds 10 of 15 ahead
	if target, ahead := state(grow); target != 30 || ahead != 30 {
		t.Fatalf("after a fetch of 15 found 10 ahead: target %d, %d ahead; want 30 and 30", target, ahead)
	}

	shrink, _ := startedService(t, ctx, natstest.RunServer(t), Config{aheadFor: 100 * time.Millisecond})
	enqueueN(t, ctx, shrink, "q", 5, 0, 100)
	fetchN(t, ctx, shrink, "q", 5)
	fetchN(t, ctx, shrink, "q", 5)
	deadline := time.Now().Add(20 * time.Second)
	for _, ahead := state(shrink); ahead > 0; _, ahead = state(shrink) {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still ahead 20 s after the fetches (aheadFor 100 ms)", ahead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if target, _ := state(shrink); target != 5 {
		t.Fatalf("after the sweep put back the 10 messages ahead: target %d, want 5", target)
	}
}

// PRI-003: a job of a more urgent level goes first, though messages of
// the queue's one level were pulled ahead; those are put back, and every
// job is still fetched exactly once.
func TestPullAheadYieldsToAMoreUrgentLevel_PRI003(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	s, _ := startedService(t, ctx, natstest.RunServer(t), heldLong)
	enqueueN(t, ctx, s, "q", 5, 0, 40)
	seen := fetchedOnce{}
	seen.note(t, fetchN(t, ctx, s, "q", 4))
	seen.note(t, fetchN(t, ctx, s, "q", 4))
	if aheadOf(s, "q") == 0 {
		t.Fatal("no messages pulled ahead with a backlog of 32")
	}
	enqueueN(t, ctx, s, "q", 0, 1000, 1)
	first := fetchN(t, ctx, s, "q", 1)
	if len(first) != 1 || first[0].Priority != 0 {
		t.Fatalf("fetch after a priority-0 enqueue got %v, want the priority-0 job", first)
	}
	seen.note(t, first)
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < 41 && time.Now().Before(deadline) {
		seen.note(t, fetchN(t, ctx, s, "q", 10))
	}
	if len(seen) != 41 {
		t.Fatalf("fetched %d of 41 jobs", len(seen))
	}
}

// Messages pulled ahead in one process that no fetch of it takes are put
// back after aheadFor, long before the ready consumer's AckWait (30 s),
// so another process's workers get them; and when a process stops, what
// it held ahead goes back at once.
func TestPullAheadHoldsNothingFromOtherProcessesForLong(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	srv := natstest.RunServer(t)
	// Held 2 s (not the default 250 ms), so that the check that a holds
	// some right after its fetches does not race the sweep on a slow
	// machine; 2 s is still far from the 30 s AckWait that returns them
	// without the sweep.
	held := Config{aheadFor: 2 * time.Second}
	a, _ := startedService(t, ctx, srv, held)
	b, _ := startedService(t, ctx, srv, held)
	for _, tc := range []struct {
		name string
		stop bool
	}{{"unused", false}, {"stopped", true}} {
		queue := "q-" + tc.name
		enqueueN(t, ctx, a, queue, 2, 0, 30)
		n := len(fetchN(t, ctx, a, queue, 5)) + len(fetchN(t, ctx, a, queue, 5))
		held := aheadOf(a, queue)
		if held == 0 {
			t.Fatalf("%s: no messages pulled ahead", tc.name)
		}
		start := time.Now()
		if tc.stop {
			a.Stop()
			if h := aheadOf(a, queue); h != 0 {
				t.Fatalf("stopped: %d messages still held ahead", h)
			}
		}
		for n < 30 && time.Since(start) < 20*time.Second {
			n += len(fetchN(t, ctx, b, queue, 30))
		}
		if n != 30 {
			t.Fatalf("%s: %d of 30 jobs fetched in 20 s (%d were held ahead by the other process)", tc.name, n, held)
		}
		if waited := time.Since(start); waited > 10*time.Second {
			t.Fatalf("%s: the jobs held ahead came back after %v, as if only the AckWait returned them", tc.name, waited)
		}
	}
}

// Crash test (issue 17: each state that has no record): a process that
// dies holding messages pulled ahead (its connection cut: no Nak, no
// Stop) loses no job. The messages come back after the ready consumer's
// AckWait, and another process fetches and finishes every accepted job
// exactly once.
func TestPullAheadCrashLosesNoJob(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	srv := natstest.RunServer(t)
	cfg := Config{ClaimAckWait: 2 * time.Second, aheadFor: time.Minute}
	a, anc := startedService(t, ctx, srv, cfg)
	b, _ := startedService(t, ctx, srv, cfg)
	const n = 30
	enqueueN(t, ctx, a, "q", 2, 0, n)
	seen := fetchedOnce{}
	finish := func(s *Service, jobs []*ojs.Job) {
		seen.note(t, jobs)
		for _, j := range jobs {
			if _, err := s.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
				t.Fatalf("ack %s: %v", j.ID, err)
			}
		}
	}
	finish(a, fetchN(t, ctx, a, "q", 5))
	finish(a, fetchN(t, ctx, a, "q", 5))
	held := aheadOf(a, "q")
	if held == 0 {
		t.Fatal("no messages pulled ahead")
	}
	anc.Close() // the crash: what a holds ahead is never put back
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		finish(b, fetchN(t, ctx, b, "q", n))
	}
	if len(seen) != n {
		t.Fatalf("%d of %d jobs finished after a crash holding %d ahead", len(seen), n, held)
	}
	// "No job runs without a record in the end": every one is completed.
	for a, id := range seen {
		j, _, err := b.store.Get(ctx, id)
		if err != nil || j.State != ojs.StateCompleted {
			t.Fatalf("job %d (%s): %v, %v; want completed", a, id, j, err)
		}
	}
}
