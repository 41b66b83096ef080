package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// Timeout tests use millisecond timeouts and generous waits: deadlines fire
// from the server's timers, and a loaded machine may run them late, never
// early.

// waitState polls job id until it reaches state.
func waitState(t *testing.T, b bundle, id string, state ojs.State, within time.Duration) *ojs.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := b.svc.Get(testCtx(t), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %s, want %s (error %+v)", id, j.State, within, state, j.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkTimeoutError asserts the error object of ojs-timeouts.md 8.
func checkTimeoutError(t *testing.T, e *ojs.JobError, typ, kind string, limitMs int64) {
	t.Helper()
	if e == nil {
		t.Fatal("no error on the job")
	}
	if e.Type != typ || e.Code != typ || e.TimeoutKind != kind || e.LimitMs != limitMs ||
		e.LimitSeconds != (limitMs+999)/1000 || e.ElapsedMs < limitMs || e.ElapsedSeconds < e.LimitSeconds ||
		e.Message == "" || e.At == nil {
		t.Fatalf("error = %+v, want type %s, timeout_kind %s, limit %d ms, elapsed >= limit, a message and a time",
			*e, typ, kind, limitMs)
	}
}

const oneRetry = `"retry":{"max_attempts":2,"initial_interval_ms":60000,"jitter":false}`
const noRetry = `"retry":{"max_attempts":1}`

// retryRows are the two rows of section 8 per timeout kind: with attempts
// left, and without. q is a queue of the row's own.
var retryRows = []struct {
	name, retry, q string
	want           ojs.State
}{
	{"retries remaining", oneRetry, "retries-remaining", ojs.StateRetryable},
	{"retries exhausted", noRetry, "retries-exhausted", ojs.StateDiscarded},
}

// Section 8, rows 1 and 2: the execution timeout ends the attempt at
// started_at + timeout + grace_period: retryable while attempts remain,
// discarded after, error type "timeout", kind "execution".
func TestExecutionTimeoutRetryableThenDiscarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range retryRows {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			j := enqueue(t, b, `{"type":"t.a","args":[],"queue":"`+q+`","timeout_ms":600,"grace_period":0,`+tc.retry+`}`)
			got := fetch1(t, b, q)
			if got == nil || got.ID != j.ID {
				t.Fatalf("fetch: %+v", got)
			}
			done := waitState(t, b, j.ID, tc.want, 15*time.Second)
			checkTimeoutError(t, done.Error, "timeout", "execution", 600)
			if done.Error.Attempt != 1 || len(done.Errors) != 1 {
				t.Fatalf("attempt history: %+v", done.Errors)
			}
			if done.DiscardedAt == nil && tc.want == ojs.StateDiscarded {
				t.Fatal("discarded without discarded_at")
			}
		})
	}
}

// 5.4 grace period: at started_at + timeout the worker is told to cancel
// (heartbeat answer), and the attempt ends only at + grace_period; a
// checkpointed ack inside the grace period still completes the job.
func TestGracePeriodSignalsThenEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout_ms":3000,"grace_period_ms":60000,`+noRetry+`}`)
	got := fetch1(t, b, "default")
	if got == nil || got.ID != j.ID {
		t.Fatalf("fetch: %+v", got)
	}
	res, err := b.svc.Heartbeat(ctx, ojs.HeartbeatRequest{WorkerID: "w1", JobIDs: []string{j.ID}})
	if err != nil || len(res.Extended) != 1 || len(res.Cancel) != 0 {
		t.Fatalf("heartbeat before the timeout: %v %+v", err, res)
	}
	time.Sleep(time.Until(got.StartedAt.Add(3200 * time.Millisecond)))
	res, err = b.svc.Heartbeat(ctx, ojs.HeartbeatRequest{WorkerID: "w1", JobIDs: []string{j.ID}})
	if err != nil || len(res.Cancel) != 1 || res.Cancel[0] != j.ID {
		t.Fatalf("heartbeat after the timeout should ask to cancel %s: %v %+v", j.ID, err, res)
	}
	if cur, _ := b.svc.Get(ctx, j.ID); cur.State != ojs.StateActive {
		t.Fatalf("job left active inside its grace period: %s", cur.State)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatalf("ack inside the grace period: %v", err)
	}
}

// The end of the grace period ends the attempt even with heartbeats: the
// heartbeat deadline never pushes past started_at + timeout + grace.
func TestHeartbeatsDoNotOutliveExecutionTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout_ms":400,"grace_period_ms":400,`+noRetry+`}`)
	fetch1(t, b, "default")
	deadline := time.Now().Add(15 * time.Second)
	for {
		cur, err := b.svc.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State == ojs.StateDiscarded {
			checkTimeoutError(t, cur.Error, "timeout", "execution", 400)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s after heartbeats past its timeout and grace", cur.State)
		}
		if _, err := b.svc.Heartbeat(ctx, ojs.HeartbeatRequest{WorkerID: "w1", JobIDs: []string{j.ID}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Section 8, rows 5 and 6: silence longer than heartbeat_timeout stalls
// the job: retryable or discarded, error type "stalled".
func TestHeartbeatTimeoutStalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range retryRows {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			j := enqueue(t, b, `{"type":"t.a","args":[],"queue":"`+q+`","heartbeat_timeout_ms":700,`+tc.retry+`}`)
			fetch1(t, b, q)
			done := waitState(t, b, j.ID, tc.want, 15*time.Second)
			checkTimeoutError(t, done.Error, "stalled", "stalled", 700)
		})
	}
}

// Per-job heartbeat timeouts are honoured: two jobs fetched together with
// different heartbeat_timeout stall at their own deadlines.
func TestHeartbeatTimeoutIsPerJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	short := enqueue(t, b, `{"type":"t.a","args":[],"heartbeat_timeout_ms":500,`+noRetry+`}`)
	long := enqueue(t, b, `{"type":"t.a","args":[],"heartbeat_timeout":120,`+noRetry+`}`)
	jobs, err := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{"default"}, Count: 2, WorkerID: "w"})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("fetch: %v %d", err, len(jobs))
	}
	waitState(t, b, short.ID, ojs.StateDiscarded, 15*time.Second)
	if cur, _ := b.svc.Get(testCtx(t), long.ID); cur.State != ojs.StateActive {
		t.Fatalf("job with heartbeat_timeout 120 s is %s", cur.State)
	}
}

// Section 8, row 4: a job not started within enqueue_ttl of created_at is
// discarded on time with enqueue_ttl_expired, and never handed out.
func TestEnqueueTTLDiscardsUnstartedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"queue":"ttl","enqueue_ttl_ms":500}`)
	done := waitState(t, b, j.ID, ojs.StateDiscarded, 15*time.Second)
	checkTimeoutError(t, done.Error, "enqueue_ttl_expired", "enqueue_ttl", 500)
	if done.Error.Retryable == nil || *done.Error.Retryable {
		t.Fatalf("enqueue_ttl_expired must not be retryable: %+v", done.Error)
	}
	if got := fetch1(t, b, "ttl"); got != nil {
		t.Fatalf("expired job handed out: %+v", got)
	}
	// An operator's retry from the dead letter queue lifts the passed TTL.
	if _, err := b.svc.RetryDeadLetter(testCtx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitFetch(t, b, "ttl", 10*time.Second); got.ID != j.ID || got.EnqueueTTLMs != 0 {
		t.Fatalf("retried job: %+v", got)
	}
}

// A job that started in time is not touched by its enqueue TTL.
func TestEnqueueTTLStopsAtFirstStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"enqueue_ttl_ms":2000}`)
	if got := fetch1(t, b, "default"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch within the TTL: %+v", got)
	}
	time.Sleep(2500 * time.Millisecond)
	if cur, _ := b.svc.Get(testCtx(t), j.ID); cur.State != ojs.StateActive {
		t.Fatalf("started job was %s by its enqueue TTL", cur.State)
	}
}

// The enqueue TTL applies to jobs waiting on a rate limit too.
func TestEnqueueTTLAppliesWhileWaitingOnRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hold := enqueue(t, b, `{"type":"t.a","args":[],"rate_limit":{"key":"ttl-k","concurrency":1}}`)
	if got := fetch1(t, b, "default"); got == nil || got.ID != hold.ID {
		t.Fatalf("fetch: %+v", got)
	}
	j := enqueue(t, b, `{"type":"t.a","args":[],"enqueue_ttl_ms":800,"rate_limit":{"key":"ttl-k","concurrency":1,"on_limit":"wait"}}`)
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatalf("limited job handed out: %+v", got)
	}
	done := waitState(t, b, j.ID, ojs.StateDiscarded, 15*time.Second)
	checkTimeoutError(t, done.Error, "enqueue_ttl_expired", "enqueue_ttl", 800)
	if _, err := b.svc.Ack(testCtx(t), ojs.AckRequest{JobID: hold.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if got := fetch1(t, b, "default"); got != nil {
		t.Fatalf("a waiter discarded by its TTL was handed out after the slot freed: %+v", got)
	}
}

// Section 8, row 3: the total timeout ends the job in any state,
// discarded with total_timeout, whatever attempts remain (5.2).
func TestTotalTimeoutDiscardsActiveJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout_ms":500,"total_timeout_ms":900,
		"retry":{"max_attempts":10,"initial_interval_ms":1,"jitter":false}}`)
	fetch1(t, b, "default")
	done := waitState(t, b, j.ID, ojs.StateDiscarded, 15*time.Second)
	if done.Error.TimeoutKind != "total" {
		// The execution timeout (500 ms + 30 s grace) cannot end it first.
		t.Fatalf("error = %+v", done.Error)
	}
	checkTimeoutError(t, done.Error, "total_timeout", "total", 900)
}

// 9.1: a retry that cannot finish before the total timeout is not
// scheduled: the job is discarded with total_timeout at once.
func TestRetryThatCannotFinishIsDiscarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout":30,"total_timeout":60,
		"retry":{"max_attempts":10,"initial_interval_ms":1000,"jitter":false}}`)
	fetch1(t, b, "default")
	res, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Code: "boom", Message: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	// now + 1 s + 30 s < created + 60 s: the first retry fits.
	if res.State != ojs.StateRetryable {
		t.Fatalf("first retry fits in the total timeout, got %s", res.State)
	}
	j2 := enqueue(t, b, `{"type":"t.a","args":[],"queue":"q2","timeout":50,"total_timeout":60,
		"retry":{"max_attempts":10,"initial_interval_ms":15000,"jitter":false}}`)
	fetch1(t, b, "q2")
	res, err = b.svc.Nack(ctx, ojs.NackRequest{JobID: j2.ID, Error: ojs.JobError{Code: "boom", Message: "x"}})
	if err != nil || res.State != ojs.StateDiscarded {
		t.Fatalf("retry in 15 s with timeout 50 s cannot end within 60 s: %v %+v", err, res)
	}
	cur, _ := b.svc.Get(ctx, j2.ID)
	if cur.Error.Type != "total_timeout" || cur.Error.TimeoutKind != "total" || len(cur.Errors) != 1 || cur.Errors[0].Code != "boom" {
		t.Fatalf("error %+v, history %+v", cur.Error, cur.Errors)
	}
}

// Late results: an ack or nack after the server ended the attempt is a
// 409 StateError naming the timeout, and changes nothing.
func TestLateAckAfterTimeoutConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout_ms":300,"grace_period":0,"rate_limit":{"key":"late","concurrency":1},`+oneRetry+`}`)
	fetch1(t, b, "default")
	before := waitState(t, b, j.ID, ojs.StateRetryable, 15*time.Second)
	for _, op := range []func() error{
		func() error { _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); return err },
		func() error {
			_, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Message: "x"}})
			return err
		},
	} {
		err := op()
		var se *ojs.StateError
		if !errors.As(err, &se) || !strings.Contains(se.Error(), "execution timeout") {
			t.Fatalf("late result: %v", err)
		}
	}
	after, _ := b.svc.Get(ctx, j.ID)
	if after.State != before.State || len(after.Errors) != len(before.Errors) {
		t.Fatalf("late result changed the job: %+v", after)
	}
	// The timeout released the slot (written after the transition, so
	// look until it shows); the late results released nothing more.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := b.svc.RateLimit(ctx, "late")
		if err == nil && st.Concurrency != nil && st.Concurrency.Active == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("rate limit slot after timeout and late results: %v %+v", err, st)
		}
	}
}

// A result for an attempt that is not the running one is late too.
func TestResultForOtherAttemptConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	fetch1(t, b, "default")
	_, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID, Attempt: 2})
	if !errors.Is(err, ojs.ErrInvalidState) {
		t.Fatalf("ack for attempt 2 of attempt 1: %v", err)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
}

// The jetgate process holding an active job dies: another process times
// the job out on schedule, from the lease in JetStream (issue 7, 9.4).
func TestAnotherProcessEnforcesExecutionTimeout(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t, admission.Config{})
	j := enqueue(t, a, `{"type":"t.a","args":[],"timeout_ms":800,"grace_period":0,`+noRetry+`}`)
	if got := fetch1(t, a, "default"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch: %+v", got)
	}
	a.svc.Kill()
	done := waitState(t, b, j.ID, ojs.StateDiscarded, 15*time.Second)
	checkTimeoutError(t, done.Error, "timeout", "execution", 800)
}

// The cancel signal is published on NATS at the execution timeout.
func TestCancelSignalOnNATS(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{})
	sub, err := nc.SubscribeSync("ojs.signal.cancel.>")
	if err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, b, `{"type":"t.a","args":[],"queue":"sig","timeout_ms":400,"grace_period":30}`)
	fetch1(t, b, "sig")
	msg, err := sub.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no cancel signal: %v", err)
	}
	var sig map[string]any
	if err := json.Unmarshal(msg.Data, &sig); err != nil || sig["job_id"] != j.ID || sig["reason"] != "execution_timeout" ||
		msg.Subject != "ojs.signal.cancel.sig."+j.ID {
		t.Fatalf("signal %s: %s (%v)", msg.Subject, msg.Data, err)
	}
	if cur, _ := b.svc.Get(testCtx(t), j.ID); cur.State != ojs.StateActive {
		t.Fatalf("job must stay active through its grace period, is %s", cur.State)
	}
}

// 9.3: a checkpoint saved during the grace period reaches the next attempt
// as last_checkpoint, and a progress update resets the heartbeat clock.
func TestCheckpointInGracePeriodReachesRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"t.a","args":[],"timeout_ms":400,"grace_period_ms":2500,"heartbeat_timeout":60,
		"retry":{"max_attempts":2,"initial_interval_ms":1,"jitter":false}}`)
	fetch1(t, b, "default")
	time.Sleep(500 * time.Millisecond) // past the timeout, inside the grace period
	p := 0.4
	st, applied, err := b.svc.ReportProgress(ctx, j.ID, &ojs.ProgressUpdate{Progress: &p,
		Checkpoint: json.RawMessage(`{"offset":40}`)})
	if err != nil || !applied || st.State != ojs.StateActive {
		t.Fatalf("progress in the grace period: %v %v %+v", err, applied, st)
	}
	next := waitFetch(t, b, "default", 15*time.Second)
	if next.ID != j.ID || next.Attempt != 2 || string(next.LastCheckpoint) != `{"offset":40}` || next.Progress != nil {
		t.Fatalf("retry attempt: %+v", next)
	}
	if next.Errors[0].TimeoutKind != "execution" {
		t.Fatalf("first attempt's error: %+v", next.Errors[0])
	}
}

// A fetch whose caller is gone (its context ended) says so instead of
// answering an empty list, and leaves the jobs for the next fetch.
func TestFetchWithEndedContextFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := enqueue(t, b, `{"type":"t.a","args":[]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"default"}}); !errors.Is(err, ojs.ErrUnavailable) || len(jobs) != 0 {
		t.Fatalf("fetch with an ended context: %v %v", jobs, err)
	}
	if got := waitFetch(t, b, "default", 10*time.Second); got.ID != j.ID {
		t.Fatalf("the job after the failed fetch: %+v", got)
	}
}
