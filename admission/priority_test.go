package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// PRI-R001: an available job's priority changes, and fetch order follows
// it; a scheduled one's too; other states are refused naming the state.
func TestSetPriority_PRIR001(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	first := enqueue(t, b, `{"type":"p.t","args":[1],"queue":"patchq","priority":2}`)
	late := enqueue(t, b, `{"type":"p.t","args":[2],"queue":"patchq","priority":9}`)
	res, err := b.svc.SetPriority(ctx, late.ID, 0)
	if err != nil || res.Priority != 0 || res.PreviousPriority != 9 || res.ID != late.ID {
		t.Fatalf("SetPriority = %+v, %v", res, err)
	}
	if j := fetch1(t, b, "patchq"); j == nil || j.ID != late.ID || j.Priority != 0 {
		t.Fatalf("fetch after raising the priority = %v, want %s at 0", j, late.ID)
	}
	if _, err := b.svc.SetPriority(ctx, late.ID, 3); !errors.Is(err, ojs.ErrInvalidState) {
		t.Fatalf("active job: %v, want a state error", err)
	}
	if j := fetch1(t, b, "patchq"); j == nil || j.ID != first.ID {
		t.Fatalf("second fetch %v, want %s", j, first.ID)
	}
	if j := fetch1(t, b, "patchq"); j != nil {
		t.Fatalf("the old ready message of the patched job was handed out again: %s", j.ID)
	}
	sched := enqueue(t, b, fmt.Sprintf(`{"type":"p.t","args":[3],"queue":"patchq","scheduled_at":%q}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	if _, err := b.svc.SetPriority(ctx, sched.ID, 7); err != nil {
		t.Fatal(err)
	}
	if j, _ := b.svc.Get(ctx, sched.ID); j.Priority != 7 || j.State != ojs.StateScheduled {
		t.Fatalf("scheduled job after the change: %s priority %d", j.State, j.Priority)
	}
}

// PATCH racing 8 concurrent fetchers (the priority issue's race test):
// every job is handed out exactly once, at its old or its new priority,
// and none is lost.
func TestSetPriorityRacesFetch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 200
	ids := make([]string, n)
	for i := range n {
		ids[i] = enqueue(t, b, fmt.Sprintf(`{"type":"p.t","args":[%d],"queue":"raceq","priority":5}`, i)).ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := b.svc.SetPriority(ctx, ids[r.IntN(n)], r.IntN(10))
			if err != nil && !errors.Is(err, ojs.ErrInvalidState) && !errors.Is(err, ojs.ErrConflict) {
				t.Errorf("set priority: %v", err)
				return
			}
		}
	}()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				done := len(got) == n
				mu.Unlock()
				if done {
					return
				}
				jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"raceq"}, Count: 3, WorkerID: fmt.Sprintf("w%d", w)})
				if err != nil {
					t.Errorf("fetch: %v", err)
					return
				}
				for _, j := range jobs {
					mu.Lock()
					got[j.ID]++
					mu.Unlock()
					if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
						t.Errorf("ack: %v", err)
						return
					}
				}
				if len(jobs) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	deadline := time.After(50 * time.Second)
	for {
		mu.Lock()
		done := len(got) == n
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-deadline:
			t.Errorf("only %d of %d jobs handed out", len(got), n)
			close(stop)
			wg.Wait()
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("job %s handed out %d times", id, got[id])
		}
	}
}

// PRI-R002, ojs-priority.md 7: under sustained load on a heavy queue,
// weighted consumption still serves the light queue at its share (weights
// 3:1 -> 25 %, within ±20 % of it); strict consumption serves the first
// listed queue while it has jobs.
func TestWeightedConsumptionServesEveryQueue_PRIR002(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const fetches = 1000
	var batch []*ojs.Job
	for _, q := range []string{"heavy", "light"} {
		for i := range fetches {
			batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"w.t","args":[%d],"queue":%q}`, i, q)))
			if len(batch) == 100 {
				if _, err := b.svc.EnqueueBatch(ctx, batch); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	served := map[string]int{}
	weighted := ojs.FetchRequest{Queues: []string{"heavy", "light"}, Strategy: ojs.StrategyWeighted,
		Weights: map[string]int{"heavy": 3, "light": 1}, WorkerID: "w"}
	for range fetches {
		jobs, err := b.svc.Fetch(ctx, weighted)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("fetch: %d jobs, %v", len(jobs), err)
		}
		served[jobs[0].Queue]++
	}
	if share := float64(served["light"]) / fetches; share < 0.20 || share > 0.30 {
		t.Fatalf("light queue share %.3f (%v), want 0.25 ± 20%%", share, served)
	}
	for range 50 {
		jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"heavy", "light"}, WorkerID: "w"})
		if err != nil || len(jobs) != 1 || jobs[0].Queue != "heavy" {
			t.Fatalf("strict fetch: %v, %v; want a heavy job while heavy has jobs", jobs, err)
		}
	}
}

// PRI-R003: available jobs per priority, following enqueues, fetches and
// priority changes.
func TestPriorityStats_PRIR003(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	var ids []string
	for _, p := range []int{0, 2, 2, 4, 4, 4} {
		ids = append(ids, enqueue(t, b, fmt.Sprintf(`{"type":"p.t","args":[],"queue":"pstats","priority":%d}`, p)).ID)
	}
	if j := fetch1(t, b, "pstats"); j == nil || j.Priority != 0 {
		t.Fatalf("fetch %v", j)
	}
	if _, err := b.svc.SetPriority(ctx, ids[5], 7); err != nil {
		t.Fatal(err)
	}
	// Counters are flushed once a second without waiting for acks: ask
	// until the flushed numbers are in (generous bound).
	want := map[string]int64{"2": 2, "4": 2, "7": 1}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := b.svc.PriorityStats(ctx, "pstats")
		if err != nil {
			t.Fatal(err)
		}
		ok := st.Total == 5 && len(st.CountsByPriority) == len(want)
		for p, n := range want {
			ok = ok && st.CountsByPriority[p] == n
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want %v", st, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.svc.PriorityStats(ctx, "no-such-queue"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
}

// ojs-core.md lets an empty fetch block briefly: a fetch that finds
// nothing waits (Config.FetchWait) and is woken by a job this process
// makes ready, which it then returns.
func TestEmptyFetchWokenByEnqueue(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{FetchWait: 20 * time.Second})
	got := make(chan []*ojs.Job, 1)
	go func() {
		jobs, _ := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{"waitq"}, WorkerID: "w"})
		got <- jobs
	}()
	time.Sleep(50 * time.Millisecond) // the fetch is waiting
	j := enqueue(t, b, `{"type":"w.t","args":[],"queue":"waitq"}`)
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].ID != j.ID {
			t.Fatalf("woken fetch returned %v, want %s", jobs, j.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting fetch was not woken by the enqueue")
	}
}

// PRI-003, PRI-006: over 256 priority levels (0..255), jobs enqueued in
// the reverse order come out lowest value first.
func TestFetchOrderOver256Levels_PRI003(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	var batch []*ojs.Job
	for p := 255; p >= 0; p-- {
		batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"l.t","args":[%d],"queue":"levels","priority":%d}`, p, p)))
	}
	for i := 0; i < len(batch); i += 64 {
		if _, err := b.svc.EnqueueBatch(ctx, batch[i:i+64]); err != nil {
			t.Fatal(err)
		}
	}
	for want := range 256 {
		jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"levels"}, WorkerID: "w"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("fetch %d: %d jobs, %v", want, len(jobs), err)
		}
		if jobs[0].Priority != want {
			t.Fatalf("fetch %d returned priority %d, want %d", want, jobs[0].Priority, want)
		}
		// Acked as a worker would: an unacknowledged job keeps its ready
		// message held (lease.go), and every later fetch would walk past
		// all the levels above it.
		if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: jobs[0].ID}); err != nil {
			t.Fatal(err)
		}
	}
}

// Level consumers keep their state in memory (fetch.go): a NATS server
// restart loses it. Nothing is lost or handed out twice for that: the
// ready stream (WorkQueue) still holds every unacknowledged message, the
// consumers are created again, and a redelivered message of a job already
// active is recognised by its held token (lease.go).
func TestServerRestartWithMemoryLevelConsumers(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{})
	ctx := testCtx(t)
	active := enqueue(t, b, `{"type":"t.a","args":[],"queue":"restart","priority":1}`)
	waiting := enqueue(t, b, `{"type":"t.a","args":[],"queue":"restart","priority":3}`)
	if got := fetch1(t, b, "restart"); got == nil || got.ID != active.ID || got.Internal.HeldAck == "" {
		t.Fatalf("fetch before the restart: %+v", got)
	}
	natstest.RestartServer(t, s)
	natstest.WaitStatus(t, nc, nats.CONNECTED)
	var got *ojs.Job
	deadline := time.Now().Add(20 * time.Second)
	for got == nil && time.Now().Before(deadline) {
		jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"restart"}, WorkerID: "w2"})
		if err == nil && len(jobs) > 0 {
			got = jobs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got == nil || got.ID != waiting.ID {
		t.Fatalf("after the restart the waiting job comes next, and only it: %+v", got)
	}
	if jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"restart"}, WorkerID: "w3"}); err != nil || len(jobs) != 0 {
		t.Fatalf("the active job was handed out again: %v %+v", err, jobs)
	}
	for _, id := range []string{active.ID, waiting.ID} {
		if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: id}); err != nil {
			t.Fatalf("ack %s after the restart: %v", id, err)
		}
	}
}
