package admission_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// fakeClock is a settable clock for window and throttle tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	// Mid-window for any period the tests use, so windows do not roll by
	// accident.
	return &fakeClock{t: time.Date(2026, 11, 22, 12, 0, 0, 500_000_000, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// setupClock starts a Service on its own server with a fake clock.
func setupClock(t *testing.T) (bundle, *fakeClock) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	clk := newFakeClock()
	return setupCfg(t, js, admission.Config{Clock: clk}), clk
}

// heldUntil asserts that nothing of queue starts now, and that a job
// starts once the clock moved by d (label names the requirement).
func heldUntil(t *testing.T, b bundle, clk *fakeClock, queue string, d time.Duration, label string) {
	t.Helper()
	if j := fetch1(t, b, queue); j != nil {
		t.Fatalf("%s: %s started while held", label, j.ID)
	}
	clk.Add(d)
	if j := fetchWithin(t, b, 10*time.Second, queue); j == nil {
		t.Fatalf("%s: nothing started %s later", label, d)
	}
}

func limitedJob(queue, policy string, arg int) string {
	return fmt.Sprintf(`{"type":"rl.test","args":[%d],"queue":%q,"rate_limit":%s}`, arg, queue, policy)
}

// fetchWithin fetches from queue until a job comes or d passes (waiters
// are released asynchronously).
func fetchWithin(t *testing.T, b bundle, d time.Duration, queue string) *ojs.Job {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if j := fetch1(t, b, queue); j != nil || time.Now().After(deadline) {
			return j
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ack(t *testing.T, b bundle, id string) {
	t.Helper()
	if _, err := b.svc.Ack(testCtx(t), ojs.AckRequest{JobID: id}); err != nil {
		t.Fatalf("ack %s: %v", id, err)
	}
}

// RL-001, RL-003: a concurrency limit of 2 admits two jobs; the others
// stay available (GET shows so) and start, oldest first, as slots free.
func TestConcurrencyLimitHoldsAndReleasesFIFO_RL001_RL003(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pol := `{"key":"payments","concurrency":2}`
	var ids []string
	for i := range 5 {
		ids = append(ids, enqueue(t, b, limitedJob("rlq", pol, i)).ID)
	}
	a, c := fetch1(t, b, "rlq"), fetch1(t, b, "rlq")
	if a == nil || c == nil || a.ID != ids[0] || c.ID != ids[1] {
		t.Fatalf("first two fetches = %v, %v; want %s, %s", a, c, ids[0], ids[1])
	}
	if j := fetch1(t, b, "rlq"); j != nil {
		t.Fatalf("RL-001: third job %s started with 2 active under concurrency 2", j.ID)
	}
	for _, id := range ids[2:] {
		j, err := b.svc.Get(testCtx(t), id)
		if err != nil || j.State != ojs.StateAvailable {
			t.Fatalf("RL-003: waiting job %s state = %v, %v; want available", id, j.State, err)
		}
	}
	st, err := b.svc.RateLimit(testCtx(t), "payments")
	if err != nil {
		t.Fatal(err)
	}
	if st.Concurrency == nil || st.Concurrency.Limit != 2 || st.Concurrency.Active != 2 || st.WaitingCount != 3 {
		t.Fatalf("RL-005: status = %+v (concurrency %+v), want limit 2 active 2 waiting 3", st, st.Concurrency)
	}
	// Released oldest first, one per freed slot.
	for _, want := range ids[2:] {
		ack(t, b, a.ID)
		j := fetchWithin(t, b, 10*time.Second, "rlq")
		if j == nil || j.ID != want {
			t.Fatalf("after a release got %v, want the oldest waiter %s", j, want)
		}
		if extra := fetch1(t, b, "rlq"); extra != nil {
			t.Fatalf("RL-001: %s started beyond the limit", extra.ID)
		}
		a = j
	}
}

// RL-004 and ojs-priority.md 9.1: a limited job of higher priority does
// not hold back an eligible job of lower priority.
func TestFetchSkipsLimitedJob_RL004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pol := `{"key":"slow-api","concurrency":1}`
	first := enqueue(t, b, `{"type":"rl.test","args":[0],"queue":"skipq","priority":0,"rate_limit":`+pol+`}`)
	enqueue(t, b, `{"type":"rl.test","args":[1],"queue":"skipq","priority":0,"rate_limit":`+pol+`}`)
	free := enqueue(t, b, `{"type":"rl.test","args":[2],"queue":"skipq","priority":7}`)
	if j := fetch1(t, b, "skipq"); j == nil || j.ID != first.ID {
		t.Fatalf("first fetch = %v, want %s", j, first.ID)
	}
	if j := fetch1(t, b, "skipq"); j == nil || j.ID != free.ID {
		t.Fatalf("RL-004: fetch = %v, want the unlimited job %s", j, free.ID)
	}
}

// RL-002: keys partition the counters.
func TestKeysPartition_RL002(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enqueue(t, b, limitedJob("partq", `{"key":"tenant:acme","concurrency":1}`, 0))
	enqueue(t, b, limitedJob("partq", `{"key":"tenant:acme","concurrency":1}`, 1))
	enqueue(t, b, limitedJob("partq", `{"key":"a.b","concurrency":1}`, 2))
	got := map[string]bool{}
	for range 3 {
		if j := fetch1(t, b, "partq"); j != nil {
			got[j.RateLimit.Key] = true
		}
	}
	if !got["tenant:acme"] || !got["a.b"] || len(got) != 2 {
		t.Fatalf("started keys %v, want one job of each key", got)
	}
	for _, k := range []string{"tenant:acme", "a.b"} {
		st, err := b.svc.RateLimit(testCtx(t), k)
		if err != nil || st.Key != k || st.Concurrency.Active != 1 {
			t.Fatalf("key %q round trip: %+v, %v", k, st, err)
		}
	}
}

// RL-R001: a fixed window admits limit starts per window, and the next
// window admits again.
func TestWindowLimit_RLR001(t *testing.T) {
	t.Parallel()
	b, clk := setupClock(t)
	pol := `{"key":"mail","rate":{"limit":3,"period":"PT1M"}}`
	for i := range 5 {
		enqueue(t, b, limitedJob("winq", pol, i))
	}
	for i := range 3 {
		j := fetch1(t, b, "winq")
		if j == nil {
			t.Fatalf("start %d of 3 refused", i)
		}
		ack(t, b, j.ID)
	}
	heldUntil(t, b, clk, "winq", time.Minute, "RL-R001 (4th start in a window of 3)")
}

// RL-R002: throttle starts are spaced period/limit apart.
func TestThrottleSpacing_RLR002(t *testing.T) {
	t.Parallel()
	b, clk := setupClock(t)
	pol := `{"key":"smooth","throttle":{"limit":2,"period":"PT10S"}}`
	for i := range 3 {
		enqueue(t, b, limitedJob("thrq", pol, i))
	}
	if j := fetch1(t, b, "thrq"); j == nil {
		t.Fatal("first start refused")
	}
	clk.Add(4 * time.Second)
	heldUntil(t, b, clk, "thrq", time.Second, "RL-R002 (start 4s after the last, spacing 5s)")
}

// on_limit drop discards the job with a reason; reschedule makes it
// scheduled for when the limit allows.
func TestOnLimitDropAndReschedule(t *testing.T) {
	t.Parallel()
	b, clk := setupClock(t)
	enqueue(t, b, limitedJob("olq", `{"key":"once","rate":{"limit":1,"period":"PT1H"}}`, 0))
	dropped := enqueue(t, b, limitedJob("olq", `{"key":"once","rate":{"limit":1,"period":"PT1H"},"on_limit":"drop"}`, 1))
	later := enqueue(t, b, limitedJob("olq", `{"key":"once","rate":{"limit":1,"period":"PT1H"},"on_limit":"reschedule"}`, 2))
	if j := fetch1(t, b, "olq"); j == nil {
		t.Fatal("first start refused")
	}
	if j := fetch1(t, b, "olq"); j != nil {
		t.Fatalf("started %s beyond the window", j.ID)
	}
	j, err := b.svc.Get(testCtx(t), dropped.ID)
	if err != nil || j.State != ojs.StateDiscarded || j.Error == nil || j.Error.Type != ojs.ErrorTypeRateLimited {
		t.Fatalf("on_limit drop: %+v (error %+v), %v; want discarded with type rate_limited", j, j.Error, err)
	}
	j, err = b.svc.Get(testCtx(t), later.ID)
	wantAt := clk.Now().Truncate(time.Hour).Add(time.Hour)
	if err != nil || j.State != ojs.StateScheduled || j.ScheduledAt == nil || !j.ScheduledAt.Equal(wantAt) {
		t.Fatalf("on_limit reschedule: state %s scheduled_at %v, %v; want scheduled at %s", j.State, j.ScheduledAt, err, wantAt)
	}
}

// Conflicting policies for one key: the strictest declared wins, so a job
// declaring 1 is never running beside another.
func TestConflictingPoliciesStrictestWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	strict := enqueue(t, b, limitedJob("confq", `{"key":"shared","concurrency":1}`, 0))
	enqueue(t, b, limitedJob("confq", `{"key":"shared","concurrency":5}`, 1))
	enqueue(t, b, limitedJob("confq", `{"key":"shared","concurrency":5}`, 2))
	if j := fetch1(t, b, "confq"); j == nil || j.ID != strict.ID {
		t.Fatalf("first fetch %v, want %s", j, strict.ID)
	}
	if j := fetch1(t, b, "confq"); j != nil {
		t.Fatalf("a job declaring 5 started beside one declaring 1: %s", j.ID)
	}
	st, err := b.svc.RateLimit(testCtx(t), "shared")
	if err != nil || st.Policy.Concurrency == nil || *st.Policy.Concurrency != 1 {
		t.Fatalf("stored policy %+v, %v; want concurrency 1", st, err)
	}
}

// RL-R004: an override replaces the key's limits until it expires.
func TestOverrideExpires_RLR004(t *testing.T) {
	t.Parallel()
	b, clk := setupClock(t)
	zero := 0
	until := ojs.NewTime(clk.Now().Add(time.Minute))
	if _, err := b.svc.SetRateLimitOverride(testCtx(t), "stripe", ojs.RateLimitOverride{
		Limits: ojs.Limits{Concurrency: &zero}, ExpiresAt: until,
	}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, b, limitedJob("ovq", `{"key":"stripe","concurrency":5}`, 0))
	heldUntil(t, b, clk, "ovq", time.Minute, "RL-R004 (override of concurrency 0 until it expires)")
}

// RL-R003: a nack with rate_limit_until holds the key until then.
func TestDynamicHoldFromNack_RLR003(t *testing.T) {
	t.Parallel()
	b, clk := setupClock(t)
	pol := `{"key":"partner","concurrency":10}`
	first := enqueue(t, b, limitedJob("dynq", pol, 0))
	enqueue(t, b, limitedJob("dynq", pol, 1))
	if j := fetch1(t, b, "dynq"); j == nil || j.ID != first.ID {
		t.Fatalf("fetch %v", j)
	}
	until := ojs.NewTime(clk.Now().Add(30 * time.Second))
	if _, err := b.svc.Nack(testCtx(t), ojs.NackRequest{JobID: first.ID, Error: ojs.JobError{
		Type: "RateLimitExceeded", Message: "partner answered 429", RateLimitUntil: until,
	}}); err != nil {
		t.Fatal(err)
	}
	st, err := b.svc.RateLimit(testCtx(t), "partner")
	if err != nil || st.RateLimitUntil == nil || !st.RateLimitUntil.Equal(until.Time) {
		t.Fatalf("status %+v, %v; want rate_limit_until %s", st, err, until)
	}
	heldUntil(t, b, clk, "dynq", 30*time.Second, "RL-R003 (key held by rate_limit_until)")
}

// RL-R005: a queue-level limit holds for every job of the queue, limited
// by a key or not.
func TestQueueLevelLimit_RLR005(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := 1
	if _, err := b.svc.SetQueueRateLimit(testCtx(t), "qlq", &ojs.Limits{Concurrency: &one}); err != nil {
		t.Fatal(err)
	}
	a := enqueue(t, b, `{"type":"rl.test","args":[0],"queue":"qlq"}`)
	enqueue(t, b, limitedJob("qlq", `{"key":"other","concurrency":9}`, 1))
	if j := fetch1(t, b, "qlq"); j == nil || j.ID != a.ID {
		t.Fatalf("fetch %v, want %s", j, a.ID)
	}
	if j := fetch1(t, b, "qlq"); j != nil {
		t.Fatalf("RL-R005: %s started beyond the queue's concurrency 1", j.ID)
	}
	ack(t, b, a.ID)
	if j := fetchWithin(t, b, 10*time.Second, "qlq"); j == nil {
		t.Fatal("RL-R005: the waiter did not start after the release")
	}
}

// Waiting costs nothing (DESIGN invariant 4): jobs parked on a paused key
// leave the ready stream, so fetches of the queue's other jobs never see
// them again.
func TestWaitersLeaveReadyStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 50 {
		enqueue(t, b, limitedJob("parkq", `{"key":"paused-key","concurrency":0}`, i))
	}
	if j := fetch1(t, b, "parkq"); j != nil {
		t.Fatalf("%s started under concurrency 0", j.ID)
	}
	// Every refused job is parked, none left on the ready stream.
	ctx := testCtx(t)
	info, err := b.js.Stream(ctx, "OJS_READY")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for range 10 {
			fetch1(t, b, "parkq")
		}
		si, err := info.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if si.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ready messages left; waiters must be parked", si.State.Msgs)
		}
	}
	free := enqueue(t, b, `{"type":"rl.test","args":[99],"queue":"parkq"}`)
	if j := fetch1(t, b, "parkq"); j == nil || j.ID != free.ID {
		t.Fatalf("unlimited job behind 50 waiters: fetch = %v, want %s", j, free.ID)
	}
	st, err := b.svc.RateLimit(context.Background(), "paused-key")
	if err != nil || st.WaitingCount != 50 {
		t.Fatalf("waiting_count = %+v, %v; want 50", st, err)
	}
}

// Waiters are released by priority, then oldest first (DESIGN invariant
// 4, ojs-priority.md 9.1): a key with concurrency 1 releases its waiters
// B, D (priority 1) before A, C (priority 5), each pair in enqueue order.
func TestWaitersReleasedByPriorityThenFIFO(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pol := `{"key":"ordered","concurrency":1}`
	job := func(prio, arg int) *ojs.Job {
		return enqueue(t, b, fmt.Sprintf(`{"type":"rl.test","args":[%d],"queue":"ordq","priority":%d,"rate_limit":%s}`, arg, prio, pol))
	}
	holder := job(0, 0)
	if j := fetch1(t, b, "ordq"); j == nil || j.ID != holder.ID {
		t.Fatalf("holder fetch %v", j)
	}
	a, bb, c, d := job(5, 1), job(1, 2), job(5, 3), job(1, 4)
	for range 4 {
		if j := fetch1(t, b, "ordq"); j != nil {
			t.Fatalf("%s started with the slot taken", j.ID)
		}
	}
	prev := holder.ID
	for i, want := range []*ojs.Job{bb, d, a, c} {
		ack(t, b, prev)
		j := fetchWithin(t, b, 10*time.Second, "ordq")
		if j == nil || j.ID != want.ID {
			t.Fatalf("release %d: got %v, want %s (priority %d)", i, j, want.ID, want.Priority)
		}
		prev = j.ID
	}
}
