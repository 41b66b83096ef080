package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

type bundle struct {
	svc *admission.Service
	js  jetstream.JetStream
}

func setup(t *testing.T) bundle {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	return setupOn(t, nc, js)
}

func setupOn(t *testing.T, nc interface{ Close() }, js jetstream.JetStream) bundle {
	t.Helper()
	return setupCfg(t, js, admission.Config{})
}

func setupCfg(t testing.TB, js jetstream.JetStream, cfg admission.Config) bundle {
	t.Helper()
	return setupWith(t, js, cfg, nil)
}

// setupWith is setupCfg with before, if set, called between New and Start.
func setupWith(t testing.TB, js jetstream.JetStream, cfg admission.Config, before func(*admission.Service)) bundle {
	t.Helper()
	ctx := testCtx(t)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	conn := js.Conn()
	svc, err := admission.New(conn, js, assets, cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if before != nil {
		before(svc)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Stop)
	return bundle{svc: svc, js: js}
}

// twoProcesses is two jetgate processes (each its own connection and
// Service, both with cfg) on one server.
func twoProcesses(t *testing.T, cfg admission.Config) (bundle, bundle) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js1 := natstest.Connect(t, s)
	_, js2 := natstest.Connect(t, s)
	return setupCfg(t, js1, cfg), setupCfg(t, js2, cfg)
}

// testCtx is a test's context. It sets no deadline of its own: a whole
// test's budget is what a loaded 2-core machine running other packages'
// tests beside it outlives (256 fetches over 256 levels took over 2
// minutes there). Each operation is bounded by the default timeout of
// the call it makes (nats.go's, jobstore's), and a hung test by go
// test's -timeout.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func mustParse(t *testing.T, body string) *ojs.Job {
	t.Helper()
	j, err := ojs.ParseJob([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return j
}

func enqueue(t *testing.T, b bundle, body string) *ojs.Job {
	t.Helper()
	j, err := b.svc.Enqueue(testCtx(t), mustParse(t, body))
	if err != nil {
		t.Fatalf("enqueue %s: %v", body, err)
	}
	return j
}

func fetch1(t *testing.T, b bundle, queues ...string) *ojs.Job {
	t.Helper()
	jobs, err := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: queues, WorkerID: "w1"})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(jobs) == 0 {
		return nil
	}
	if len(jobs) != 1 {
		t.Fatalf("fetch returned %d jobs, want 1 (count defaults to 1)", len(jobs))
	}
	return jobs[0]
}

// PRI-001..PRI-004: lower priority value first, FIFO among equals, default 2.
func TestFetchOrdersByPriorityThenFIFO_PRI003_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	low := enqueue(t, b, `{"type":"t.a","args":[1],"options":{"queue":"q1","priority":5}}`)
	def1 := enqueue(t, b, `{"type":"t.a","args":[2],"options":{"queue":"q1"}}`)
	hi := enqueue(t, b, `{"type":"t.a","args":[3],"options":{"queue":"q1","priority":0}}`)
	def2 := enqueue(t, b, `{"type":"t.a","args":[4],"queue":"q1"}`)
	top := enqueue(t, b, `{"type":"t.a","args":[5],"queue":"q1","priority":255}`)
	if def1.Priority != 2 {
		t.Fatalf("PRI-002: default priority = %d, want 2", def1.Priority)
	}
	want = []string{hi.ID, def1.ID, def2.ID, low.ID, top.ID}
	for i, id := range want {
		j := fetch1(t, b, "q1")
		if j == nil || j.ID != id {
			t.Fatalf("fetch %d: got %v, want %s", i, j, id)
		}
		if j.State != ojs.StateActive || j.Attempt != 1 {
			t.Fatalf("fetched job state %s attempt %d, want active 1", j.State, j.Attempt)
		}
	}
	if j := fetch1(t, b, "q1"); j != nil {
		t.Fatalf("queue should be empty, got %s", j.ID)
	}
}

func TestAckCompletesAndSecondAckConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	got := fetch1(t, b, "default")
	if got == nil || got.ID != j.ID {
		t.Fatalf("fetch got %v", got)
	}
	res, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID, Result: json.RawMessage(`{"ok":true}`)})
	if err != nil || res.State != ojs.StateCompleted {
		t.Fatalf("ack: %v %+v", err, res)
	}
	_, err = b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID})
	var se *ojs.StateError
	if !errors.As(err, &se) || se.Current != ojs.StateCompleted {
		t.Fatalf("second ack: want StateError(completed), got %v", err)
	}
	rec, err := b.svc.Get(ctx, j.ID)
	if err != nil || rec.State != ojs.StateCompleted || string(rec.Result) != `{"ok":true}` {
		t.Fatalf("get after ack: %v %+v", err, rec)
	}
}

func TestNackRetriesThenDiscards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":2,"initial_interval_ms":100,"jitter":false}}}`)
	got := fetch1(t, b, "default")
	if got == nil {
		t.Fatal("no job")
	}
	res, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Code: "handler_error", Message: "boom"}})
	if err != nil || res.State != ojs.StateRetryable || res.NextAttemptAt == nil {
		t.Fatalf("nack 1: %v %+v", err, res)
	}
	// The retry timer fires server-side and the job comes back.
	got = waitFetch(t, b, "default", 10*time.Second)
	if got.ID != j.ID || got.Attempt != 2 {
		t.Fatalf("retry fetch: %+v", got)
	}
	res, err = b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Code: "handler_error", Message: "boom again"}})
	if err != nil || res.State != ojs.StateDiscarded {
		t.Fatalf("nack 2: %v %+v", err, res)
	}
	page, err := b.svc.ListDeadLetter(ctx, ojs.DeadLetterQuery{})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != j.ID || len(page.Jobs[0].Errors) != 2 {
		t.Fatalf("dead letter: %v %+v", err, page)
	}
	rj, err := b.svc.RetryDeadLetter(ctx, j.ID)
	if err != nil || rj.State != ojs.StateAvailable || rj.Attempt != 0 {
		t.Fatalf("retry dead: %v %+v", err, rj)
	}
	got = fetch1(t, b, "default")
	if got == nil || got.ID != j.ID || got.Attempt != 1 {
		t.Fatalf("fetch after dead retry: %+v", got)
	}
}

func TestNonRetryableErrorDiscardsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":5,"non_retryable_errors":["validation.*"]}}}`)
	fetch1(t, b, "default")
	res, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Type: "validation.email", Message: "bad"}})
	if err != nil || res.State != ojs.StateDiscarded {
		t.Fatalf("nack: %v %+v", err, res)
	}
}

func TestScheduledJobBecomesAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	j := enqueue(t, b, `{"type":"t.a","args":[],"scheduled_at":"`+at+`"}`)
	if j.State != ojs.StateScheduled {
		t.Fatalf("state %s, want scheduled", j.State)
	}
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatalf("scheduled job fetched early")
	}
	got := waitFetch(t, b, "default", 10*time.Second)
	if got.ID != j.ID {
		t.Fatalf("got %s", got.ID)
	}
	if got.StartedAt.Before(j.ScheduledAt.Time) {
		t.Fatalf("started %s before scheduled_at %s", got.StartedAt, j.ScheduledAt)
	}
}

func TestVisibilityTimeoutStallsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":3,"initial_interval_ms":100,"jitter":false}}}`)
	jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"default"}, VisibilityTimeout: time.Second})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("fetch: %v %d", err, len(jobs))
	}
	got := waitFetch(t, b, "default", 15*time.Second)
	if got.ID != j.ID || got.Attempt != 2 || got.Error == nil || got.Error.Type != "stalled" {
		t.Fatalf("stalled job came back as %+v", got)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatalf("ack of the new attempt: %v", err)
	}
}

func TestHeartbeatExtendsVisibility(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	// Generous bounds for a loaded machine: a 2 s visibility timeout,
	// heartbeats every 250 ms, for 3 s in all.
	if _, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"default"}, WorkerID: "w1", VisibilityTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		res, err := b.svc.Heartbeat(ctx, ojs.HeartbeatRequest{WorkerID: "w1", JobIDs: []string{j.ID}, VisibilityTimeout: 2 * time.Second})
		if err != nil || len(res.Extended) != 1 || res.State != ojs.WorkerRunning {
			t.Fatalf("heartbeat: %v %+v", err, res)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatalf("ack after 3s of heartbeats with a 2s visibility timeout: %v", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	cj, prev, err := b.svc.Cancel(ctx, j.ID)
	if err != nil || prev != ojs.StateAvailable || cj.State != ojs.StateCancelled {
		t.Fatalf("cancel: %v %s %+v", err, prev, cj)
	}
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatalf("cancelled job was fetched")
	}
	if _, _, err := b.svc.Cancel(ctx, j.ID); !errors.Is(err, ojs.ErrInvalidState) {
		t.Fatalf("cancel twice: %v", err)
	}
}

func TestPendingActivate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"options":{"pending":true}}`)
	if j.State != ojs.StatePending {
		t.Fatalf("state %s", j.State)
	}
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatal("pending job fetched")
	}
	if _, err := b.svc.Activate(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if got := fetch1(t, b, "default"); got == nil || got.ID != j.ID {
		t.Fatalf("activated job not fetched: %v", got)
	}
}

func TestDuplicateIDConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	_, err := b.svc.Enqueue(testCtx(t), mustParse(t, `{"id":"`+j.ID+`","type":"t.a","args":[]}`))
	if !errors.Is(err, ojs.ErrDuplicate) {
		t.Fatalf("want duplicate, got %v", err)
	}
	// The orphan ready message of the refused enqueue must not hand out
	// the job twice.
	if got := fetch1(t, b, "default"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch: %v", got)
	}
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatalf("job handed out twice")
	}
}

func TestBatchIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	existing := enqueue(t, b, `{"type":"t.a","args":[]}`)
	jobs := []*ojs.Job{
		mustParse(t, `{"type":"t.b","args":[1]}`),
		mustParse(t, `{"id":"`+existing.ID+`","type":"t.b","args":[2]}`),
		mustParse(t, `{"type":"t.b","args":[3]}`),
	}
	if _, err := b.svc.EnqueueBatch(ctx, jobs); !errors.Is(err, ojs.ErrDuplicate) {
		t.Fatalf("batch with a duplicate: %v", err)
	}
	if _, err := b.svc.Get(ctx, jobs[0].ID); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("first job of failed batch exists: %v", err)
	}
	ok := []*ojs.Job{mustParse(t, `{"type":"t.b","args":[1]}`), mustParse(t, `{"type":"t.b","args":[2]}`)}
	out, err := b.svc.EnqueueBatch(ctx, ok)
	if err != nil || len(out) != 2 {
		t.Fatalf("batch: %v", err)
	}
	seen := map[string]bool{}
	for range 3 {
		if j := fetch1(t, b, "default"); j != nil {
			seen[j.ID] = true
		}
	}
	if !seen[out[0].ID] || !seen[out[1].ID] || !seen[existing.ID] {
		t.Fatalf("fetched %v", seen)
	}
}

// spec/README.md decision 7: pause stops delivery only; a paused queue
// accepts enqueues and its jobs wait as available.
func TestPausedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	enqueue(t, b, `{"type":"t.a","args":[],"queue":"p"}`)
	if _, err := b.svc.PauseQueue(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if got := fetch1(t, b, "p"); got != nil {
		t.Fatal("fetched from paused queue")
	}
	j, err := b.svc.Enqueue(ctx, mustParse(t, `{"type":"t.a","args":[],"queue":"p"}`))
	if err != nil || j.State != ojs.StateAvailable {
		t.Fatalf("enqueue to paused: %v, %v", j, err)
	}
	if got := fetch1(t, b, "p"); got != nil {
		t.Fatal("fetched from paused queue after an enqueue")
	}
	if _, err := b.svc.ResumeQueue(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if got := fetch1(t, b, "p"); got == nil {
		t.Fatal("nothing after resume")
	}
}

func waitFetch(t *testing.T, b bundle, queue string, within time.Duration) *ojs.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if j := fetch1(t, b, queue); j != nil {
			return j
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no job on %s within %s", queue, within)
	return nil
}

func TestQueueStatsCountsStates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	for range 3 {
		enqueue(t, b, `{"type":"t.a","args":[],"queue":"s"}`)
	}
	enqueue(t, b, `{"type":"t.a","args":[],"queue":"s","options":{"pending":true}}`)
	j := fetch1(t, b, "s")
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	fetch1(t, b, "s")
	// Read at once, as a client that just made these changes would: the
	// ready stream counts available (the job still active holds its ready
	// message, which is not counted), the count keeper answers active and
	// pending once it has read every record written before the question,
	// and completed includes this process's unflushed changes.
	st, err := b.svc.QueueStats(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	c := st.Stats
	if c.Available != 1 || c.Active != 1 || c.Completed != 1 || c.Pending != 1 || c.CompletedLastHour != 1 {
		t.Fatalf("stats: %+v", c)
	}
	// After a flush the numbers come from JetStream and stay the same.
	// Counter increments and samples are published without waiting for
	// acks, so poll until JetStream has applied them.
	b.svc.FlushStats()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = b.svc.QueueStats(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		c := st.Stats
		if c.Available == 1 && c.Active == 1 && c.Completed == 1 && c.Pending == 1 && c.CompletedLastHour == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats from JetStream after flush: %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.svc.QueueStats(ctx, "nope"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
}

// DESIGN invariants 1 and 2: three Services (as three jetgate processes) on
// one server, many concurrent workers: every job is handed out and
// completed exactly once, in priority order per fetch.
func TestThreeProcessesHandOutEachJobOnce(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	var svcs []bundle
	for range 3 {
		nc, js := natstest.Connect(t, s)
		_ = nc
		svcs = append(svcs, setupOn(t, nc, js))
	}
	ctx := testCtx(t)
	const n = 600
	ids := make(map[string]bool, n)
	for i := range n {
		b := svcs[i%3]
		j, err := b.svc.Enqueue(ctx, mustParse(t, fmt.Sprintf(`{"type":"t.a","args":[%d],"queue":"m","priority":%d}`, i, i%4)))
		if err != nil {
			t.Fatal(err)
		}
		ids[j.ID] = true
	}
	var mu sync.Mutex
	done := map[string]int{}
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := svcs[w%3]
			empty := 0
			for empty < 20 {
				jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"m"}, Count: 1 + w%3, WorkerID: fmt.Sprint("w", w)})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					empty++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				empty = 0
				for _, j := range jobs {
					// Ack through another process than the one that fetched.
					if _, err := svcs[(w+1)%3].svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
						t.Errorf("ack %s: %v", j.ID, err)
					}
					mu.Lock()
					done[j.ID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(done) != n {
		t.Fatalf("%d distinct jobs completed, want %d", len(done), n)
	}
	for id, c := range done {
		if c != 1 || !ids[id] {
			t.Fatalf("job %s completed %d times (known: %v)", id, c, ids[id])
		}
	}
}

// Finished records are kept for the retention period, then JetStream
// removes them (per-message TTL): OJS_JOBS does not grow without bound.
func TestFinishedRecordsExpireAfterRetention(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{Retention: time.Second, DeadRetention: time.Hour})
	ctx := testCtx(t)
	done := enqueue(t, b, `{"type":"t.a","args":[]}`)
	dead := enqueue(t, b, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":1}}}`)
	for range 2 {
		j := fetch1(t, b, "default")
		if j.ID == done.ID {
			if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Code: "x", Message: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if j, err := b.svc.Get(ctx, done.ID); err != nil || j.State != ojs.StateCompleted {
		t.Fatalf("completed record right after ack: %v %v", j, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := b.svc.Get(ctx, done.ID)
		if errors.Is(err, ojs.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed record still there after its 1s retention: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if j, err := b.svc.Get(ctx, dead.ID); err != nil || j.State != ojs.StateDiscarded {
		t.Fatalf("discarded record must outlive the completed retention: %v %v", j, err)
	}
}

// leaseTimer returns the token of the lease schedule of a job, "" if none.
func leaseTimer(t *testing.T, js jetstream.JetStream, id string) string {
	t.Helper()
	st, err := js.Stream(testCtx(t), topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(testCtx(t), topology.TimerSchedule(topology.TimerLease, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get("Ojs-Token")
}

// A job that finishes well within its visibility timeout costs no lease
// timer: the held ready message is its backstop meanwhile.
func TestFastJobWritesNoLeaseTimer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	got := fetch1(t, b, "default")
	if got == nil || got.Internal.HeldAck == "" {
		t.Fatalf("claim with the default 30s visibility should hold its ready message: %+v", got)
	}
	if tok := leaseTimer(t, b.js, j.ID); tok != "" {
		t.Fatalf("lease timer written at claim: %s", tok)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	// The held message was acked: nothing of the job is left in OJS_READY.
	st, err := b.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ready message of an acked job still held: %d msgs", info.State.Msgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A job still active after the lease deferral gets its lease timer, and a
// silent worker's job stalls at its visibility timeout (decision 6).
func TestDeferredLeaseIsWrittenAndStalls(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	// Deferral is 2 s and the job stalls at 6 s: a 4 s window to see the
	// lease timer written.
	b := setupCfg(t, js, admission.Config{DefaultHeartbeatTimeout: 6 * time.Second, ClaimAckWait: 6 * time.Second})
	j := enqueue(t, b, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":3,"initial_interval_ms":100,"jitter":false}}}`)
	got := fetch1(t, b, "default")
	if got == nil || got.Internal.HeldAck == "" {
		t.Fatalf("claim should defer its lease: %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for leaseTimer(t, js, j.ID) != got.Internal.Token {
		if time.Now().After(deadline) {
			t.Fatal("deferred lease timer never written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	back := waitFetch(t, b, "default", 20*time.Second)
	if back.ID != j.ID || back.Attempt != 2 || back.Errors[0].Type != "stalled" {
		t.Fatalf("stalled job: %+v", back)
	}
}

// The claiming process dies before writing the lease: the held ready
// message comes back to another process, which writes the lease with the
// original deadline, and the job stalls instead of staying active forever.
func TestLeaseSurvivesClaimingProcess(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t, admission.Config{DefaultHeartbeatTimeout: 3 * time.Second, ClaimAckWait: 3 * time.Second})
	j := enqueue(t, a, `{"type":"t.a","args":[],"options":{"retry":{"max_attempts":3,"initial_interval_ms":100,"jitter":false}}}`)
	if got := fetch1(t, a, "default"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch: %v", got)
	}
	a.svc.Kill() // dies before its deferred lease write (1 s)
	back := waitFetch(t, b, "default", 20*time.Second)
	if back.ID != j.ID || back.Attempt != 2 || back.Errors[0].Type != "stalled" {
		t.Fatalf("job of the dead process: %+v", back)
	}
}

// ojs-core 5.2 expires_at: a job whose deadline passed before it could
// start is discarded when a fetch meets it, never handed out.
func TestExpiredJobIsDiscardedNotFetched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	at := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	j := enqueue(t, b, `{"type":"t.a","args":[],"expires_at":"`+at+`"}`)
	live := enqueue(t, b, `{"type":"t.a","args":[]}`)
	// Wait out the deadline; the assertion does not depend on how late.
	time.Sleep(time.Until(j.ExpiresAt.Time) + 10*time.Millisecond)
	got := fetch1(t, b, "default")
	if got == nil || got.ID != live.ID {
		t.Fatalf("fetch after expiry: got %v, want the live job %s", got, live.ID)
	}
	rec, err := b.svc.Get(ctx, j.ID)
	if err != nil || rec.State != ojs.StateDiscarded || rec.Error == nil || rec.Error.Code != "expired" {
		t.Fatalf("expired job: %v %+v", err, rec)
	}
	page, err := b.svc.ListDeadLetter(ctx, ojs.DeadLetterQuery{})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != j.ID {
		t.Fatalf("dead letter after expiry: %v %+v", err, page)
	}
}
