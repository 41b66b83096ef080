package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Every extension field set by a typed option reaches the stored job
// (ojs-priority.md, ojs-timeouts.md 6, ojs-retry.md, ojs-rate-limiting.md
// 6, ojs-core.md tags and meta), over either binding.
func TestEnqueueOptionsReachTheJob(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		conc := 3
		j, err := e.c.Enqueue(ctx, "email.send", []any{"a@example.com", 2},
			client.Queue("mail"), client.Priority(7), client.ScheduledAt(at),
			client.Timeout(90*time.Second), client.GracePeriod(5*time.Second), client.HeartbeatTimeout(20*time.Second),
			client.TotalTimeout(time.Hour), client.EnqueueTTL(2*time.Hour),
			client.Retry(client.RetryPolicy{MaxAttempts: 4, InitialInterval: 2 * time.Second, BackoffCoefficient: 3,
				MaxInterval: time.Minute, NonRetryableErrors: []string{"bad_input"}}),
			client.RateLimit(client.RateLimitPolicy{Key: "smtp:acme", Concurrency: &conc, Rate: client.Window(100, time.Minute)}),
			client.Tags("a", "b"), client.Meta("tenant", "acme"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := e.c.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g.Queue != "mail" || g.Priority != 7 || g.State != "scheduled" || g.ScheduledAt == nil || !g.ScheduledAt.Equal(at) {
			t.Fatalf("routing/schedule: queue %q priority %d state %q scheduled_at %v", g.Queue, g.Priority, g.State, g.ScheduledAt)
		}
		if g.ExecutionTimeout(0) != 90*time.Second || g.GraceOr(0) != 5*time.Second ||
			g.HeartbeatTimeoutOr(0) != 20*time.Second || g.TotalTimeoutMs != 3600_000 || g.EnqueueTTLMs != 7200_000 {
			t.Fatalf("timeouts: %+v", g)
		}
		if g.Retry == nil || g.Retry.MaxAttempts != 4 || g.Retry.InitialInterval.D() != 2*time.Second ||
			g.Retry.BackoffCoefficient != 3 || !slices.Equal(g.Retry.NonRetryableErrors, []string{"bad_input"}) {
			t.Fatalf("retry: %+v", g.Retry)
		}
		if g.RateLimit == nil || g.RateLimit.Key != "smtp:acme" || g.RateLimit.Concurrency == nil || *g.RateLimit.Concurrency != 3 ||
			g.RateLimit.Rate == nil || g.RateLimit.Rate.Limit != 100 {
			t.Fatalf("rate limit: %+v", g.RateLimit)
		}
		var meta map[string]any
		_ = json.Unmarshal(g.Meta, &meta)
		if !slices.Equal(g.Tags, []string{"a", "b"}) || meta["tenant"] != "acme" {
			t.Fatalf("tags %v meta %s", g.Tags, g.Meta)
		}
		if string(g.Args) != `["a@example.com",2]` {
			t.Fatalf("args %s", g.Args)
		}

		// A batch is all or nothing and comes back in order.
		jobs, err := e.c.EnqueueBatch(ctx, []client.Request{
			{Type: "b.one", Args: []any{1}, Options: []client.Option{client.Queue("batch")}},
			{Type: "b.two", Args: []any{2}, Options: []client.Option{client.Queue("batch"), client.Priority(0)}},
		})
		if err != nil || len(jobs) != 2 || jobs[0].Type != "b.one" || jobs[1].Priority != 0 {
			t.Fatalf("batch: %v %v", jobs, err)
		}
		st, err := e.c.QueueStats(ctx, "batch")
		if err != nil || st.Stats.Available != 2 {
			t.Fatalf("stats: %+v %v", st, err)
		}
		if c, err := e.c.Cancel(ctx, jobs[0].ID); err != nil || c.State != "cancelled" {
			t.Fatalf("cancel: %+v %v", c, err)
		}
		// PATCH priority (ojs-priority.md 10.2), pause and resume.
		if err := e.c.SetPriority(ctx, jobs[1].ID, 5); err != nil {
			t.Fatal(err)
		}
		if g, err := e.c.Get(ctx, jobs[1].ID); err != nil || g.Priority != 5 {
			t.Fatalf("priority after SetPriority: %v %v", g.Priority, err)
		}
		if err := e.c.PauseQueue(ctx, "batch"); err != nil {
			t.Fatal(err)
		}
		if st, err := e.c.QueueStats(ctx, "batch"); err != nil || st.Status != "paused" {
			t.Fatalf("paused queue: %+v %v", st, err)
		}
		if err := e.c.ResumeQueue(ctx, "batch"); err != nil {
			t.Fatal(err)
		}
		if st, err := e.c.QueueStats(ctx, "batch"); err != nil || st.Status != "active" {
			t.Fatalf("resumed queue: %+v %v", st, err)
		}
	})
}

// Issue 31 item 5: MaxAttempts(0) sends max_attempts 0, which the server
// honours (ojs-retry.md 2.2, docs/decisions.md: the first failure is
// final), instead of dropping it as empty and getting the default 3; no
// option still leaves the server's default, and MaxAttempts(0) after
// Retry keeps the rest of that policy.
func TestMaxAttemptsZeroIsSent(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		for _, tc := range []struct {
			name string
			opts []client.Option
			want int
		}{
			{"MaxAttempts(0)", []client.Option{client.MaxAttempts(0)}, 0},
			{"Retry then MaxAttempts(0)", []client.Option{client.Retry(client.RetryPolicy{MaxAttempts: 5, Backoff: "none"}), client.MaxAttempts(0)}, 0},
			{"no option", nil, 3},
			{"Retry with MaxAttempts 0 (the default)", []client.Option{client.Retry(client.RetryPolicy{Backoff: "none"})}, 3},
			{"MaxAttempts(4)", []client.Option{client.MaxAttempts(4)}, 4},
		} {
			j, err := e.c.Enqueue(ctx, "attempts.zero", []any{tc.name}, append(tc.opts, client.Queue("attempts"))...)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			g, err := e.c.Get(ctx, j.ID)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if j.MaxAttempts != tc.want || g.MaxAttempts != tc.want || g.Retry == nil || g.Retry.MaxAttempts != tc.want {
				t.Fatalf("%s: max_attempts %d, stored %d, retry %+v; want %d", tc.name, j.MaxAttempts, g.MaxAttempts, g.Retry, tc.want)
			}
		}
		// And it means what it says: the first retryable failure is final.
		jobs, err := e.c.Fetch(ctx, client.FetchRequest{Queues: []string{"attempts"}, Count: 1, WorkerID: "w"})
		if err != nil || len(jobs) != 1 || jobs[0].MaxAttempts != 0 {
			t.Fatalf("fetch: %v %v", jobs, err)
		}
		retryable := true
		r, err := e.c.NackJob(ctx, client.Nack{JobID: jobs[0].ID, Error: client.JobError{Type: "boom", Message: "failed", Retryable: &retryable}})
		if err != nil || r.State != "discarded" {
			t.Fatalf("nack of a max_attempts 0 job: %+v %v, want discarded", r, err)
		}
	})
}

// Errors come back typed with the binding's status, code, message and
// details (ojs-http-binding.md 16; the NATS binding carries the same
// envelope and the status in Nats-Service-Error-Code).
func TestErrorsAreTyped(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		_, err := e.c.Get(ctx, "019539a4-b68c-7def-8000-1a2b3c4d5e6f")
		ce, ok := errors.AsType[*client.Error](err)
		if !ok || ce.Status != http.StatusNotFound || ce.Code != "not_found" || ce.Message == "" || ce.Retryable {
			t.Fatalf("get of an unknown job: %#v", err)
		}
		_, err = e.c.Enqueue(ctx, "x.y", nil, client.Priority(-1))
		ce, ok = errors.AsType[*client.Error](err)
		if !ok || ce.Status != http.StatusBadRequest || (ce.Code != "invalid_request" && ce.Code != "invalid_payload") ||
			!client.IsStatus(err, 400) {
			t.Fatalf("negative priority: %#v", err)
		}
		if f, _ := ce.Details["field"].(string); f == "" {
			t.Fatalf("400 without the field in details: %#v", ce.Details)
		}
	})
}

// ojs-backpressure.md 8.1: an enqueue refused with 429 is retried, never
// sooner than the Retry-After the server sent, and succeeds once the
// queue has room.
func TestEnqueueRetriesA429AfterRetryAfter(t *testing.T) {
	t.Parallel()
	e := setup(t, "http", app.Config{QueueMaxDepth: 1}, client.Config{Retry: client.RetryConfig{Initial: 50 * time.Millisecond}})
	ctx := ctxT(t)
	first, err := e.c.Enqueue(ctx, "bp.job", nil, client.Queue("full"))
	if err != nil {
		t.Fatal(err)
	}
	e.rt.first429 = make(chan struct{})
	type res struct {
		j   *client.Job
		err error
		at  time.Time
	}
	done := make(chan res, 1)
	go func() {
		j, err := e.c.Enqueue(ctx, "bp.job", nil, client.Queue("full"))
		done <- res{j, err, time.Now()}
	}()
	select {
	case <-e.rt.first429:
	case <-time.After(20 * time.Second):
		t.Fatal("no 429 for the enqueue into a full queue")
	}
	refusedAt := time.Now()
	// Make room: work the job that fills the queue.
	jobs, err := e.c.Fetch(ctx, client.FetchRequest{Queues: []string{"full"}, Count: 1})
	if err != nil || len(jobs) != 1 || jobs[0].ID != first.ID {
		t.Fatalf("fetch: %v %v", jobs, err)
	}
	if _, err := e.c.AckJob(ctx, client.Ack{JobID: first.ID}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("enqueue after the queue drained: %v", r.err)
	}
	// The server's Retry-After is 1 s (admission's default): the retry
	// went out no sooner.
	if waited := r.at.Sub(refusedAt); waited < 900*time.Millisecond {
		t.Fatalf("retry after %s, before Retry-After (1 s)", waited)
	}
	if e.rt.count(429) < 1 || e.rt.count(201) < 2 {
		t.Fatalf("statuses %v", e.rt.statuses)
	}
}

// ojs-backpressure.md 8.2: the breaker opens after Threshold consecutive
// 429s and refuses locally (no request) until the cooldown passes; then
// one probe goes out and a success closes it.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	e := setup(t, "http", app.Config{QueueMaxDepth: 1}, client.Config{
		Retry:   client.RetryConfig{MaxRetries: -1},
		Breaker: client.BreakerConfig{Threshold: 2, Cooldown: 700 * time.Millisecond},
	})
	ctx := ctxT(t)
	first, err := e.c.Enqueue(ctx, "cb.job", nil, client.Queue("cb"))
	if err != nil {
		t.Fatal(err)
	}
	// The breaker opens on the second refusal, so not before that
	// request starts: its cooldown ends 700 ms after openedAt at the
	// earliest, however slow the machine.
	var openedAt time.Time
	for i := range 2 {
		openedAt = time.Now()
		if _, err := e.c.Enqueue(ctx, "cb.job", nil, client.Queue("cb")); !client.IsStatus(err, 429) {
			t.Fatalf("enqueue %d into a full queue: %v", i, err)
		}
	}
	sent := e.rt.requests.Load()
	_, err = e.c.Enqueue(ctx, "cb.job", nil, client.Queue("cb"))
	if !errors.Is(err, client.ErrCircuitOpen) || e.rt.requests.Load() != sent {
		t.Fatalf("breaker after 2 refusals: %v (requests %d -> %d)", err, sent, e.rt.requests.Load())
	}
	if _, err := e.c.Cancel(ctx, first.ID); err != nil { // room for one
		t.Fatal(err)
	}
	var j *client.Job
	eventually(t, 10*time.Second, "the breaker half-opens and the probe succeeds", func() bool {
		j, err = e.c.Enqueue(ctx, "cb.job", nil, client.Queue("cb"))
		return err == nil
	})
	if d := time.Since(openedAt); d < 700*time.Millisecond {
		t.Fatalf("breaker let an enqueue through %s after it opened, before its 700ms cooldown", d)
	}
	if _, err := e.c.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Enqueue(ctx, "cb.job", nil, client.Queue("cb")); err != nil {
		t.Fatalf("breaker not closed by the success: %v", err)
	}
}

// ojs-backpressure.md 7.3 / ojs-backpressure.txt: a queue whose
// X-OJS-Queue-Pressure passes the threshold paces the next enqueues.
func TestEnqueueSlowsUnderQueuePressure(t *testing.T) {
	t.Parallel()
	e := setup(t, "http", app.Config{QueueMaxDepth: 10}, client.Config{
		Pressure: client.PressureConfig{Threshold: 0.5, MaxDelay: 600 * time.Millisecond},
	})
	ctx := ctxT(t)
	for range 9 { // pressure 0.9 after the 9th
		if _, err := e.c.Enqueue(ctx, "p.job", nil, client.Queue("pressed")); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := e.c.Enqueue(ctx, "p.job", nil, client.Queue("pressed")); err != nil {
		t.Fatal(err)
	}
	// (0.9-0.5)/(1-0.5) * 600 ms = 480 ms before the request.
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Fatalf("enqueue at pressure 0.9 took %s, not paced", d)
	}
	start = time.Now()
	if _, err := e.c.Enqueue(ctx, "p.job", nil, client.Queue("other")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Logf("enqueue to an unbounded queue took %s (machine load?)", d)
	}
}

var _ = context.Background

// Issue 19: ackbatch / nackbatch settle many jobs in one request, with a
// result per item in order (an unknown job fails only its item); over
// HTTP the same calls send one request per job.
func TestAckAndNackBatch(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		reqs := make([]client.Request, 6)
		for i := range reqs {
			reqs[i] = client.Request{Type: "b.job", Args: []any{i}, Options: []client.Option{client.Queue("batchack")}}
		}
		if _, err := e.c.EnqueueBatch(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		jobs, err := e.c.Fetch(ctx, client.FetchRequest{Queues: []string{"batchack"}, Count: 6, WorkerID: "w1"})
		if err != nil || len(jobs) != 6 {
			t.Fatalf("fetch: %d jobs, %v", len(jobs), err)
		}
		acks := []client.Ack{{JobID: jobs[0].ID, Result: map[string]int{"n": 0}}, {JobID: "019539a4-b68c-7def-8000-1a2b3c4d5e6f"},
			{JobID: jobs[1].ID, Attempt: jobs[1].Attempt, WorkerID: "w1"}}
		res, err := e.c.AckBatch(ctx, acks)
		if err != nil || len(res) != 3 {
			t.Fatalf("ackbatch: %v %v", res, err)
		}
		if res[0].State != "completed" || res[1].Err == nil || res[1].Err.Status != 404 || res[2].State != "completed" {
			t.Fatalf("ackbatch results %+v %+v %+v", res[0], res[1], res[2])
		}
		nacks := make([]client.Nack, 0, 4)
		for _, j := range jobs[2:] {
			nacks = append(nacks, client.Nack{JobID: j.ID, Error: client.JobError{Type: "boom", Message: "failed"}})
		}
		nres, err := e.c.NackBatch(ctx, nacks)
		if err != nil || len(nres) != 4 {
			t.Fatalf("nackbatch: %v %v", nres, err)
		}
		for i, r := range nres {
			if r.Err != nil || r.JobID != jobs[2+i].ID || r.State != "retryable" {
				t.Fatalf("nackbatch result %d: %+v", i, r)
			}
		}
		if kind == "nats" {
			if st := microStats(t, e.srv.NatsURL()); st["workers.ackbatch"] != 1 || st["workers.nackbatch"] != 1 {
				t.Fatalf("requests: %v", st)
			}
		}
	})
}

// ojs-backpressure.md 7.1, 7.2 (BP-002, BP-005): a refused enqueue is a
// 429 *Error with code QUEUE_FULL, retryable, its Retry-After and the
// pressure headers, over HTTP and over NATS (headers as NATS headers).
func TestQueueFullIsTyped(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{QueueMaxDepth: 1}, client.Config{Retry: client.RetryConfig{MaxRetries: -1}})
		ctx := ctxT(t)
		if _, err := e.c.Enqueue(ctx, "f.job", nil, client.Queue("tiny")); err != nil {
			t.Fatal(err)
		}
		_, err := e.c.Enqueue(ctx, "f.job", nil, client.Queue("tiny"))
		ce, ok := errors.AsType[*client.Error](err)
		if !ok || ce.Status != 429 || ce.Code != "QUEUE_FULL" || !ce.Retryable || ce.RetryAfter != time.Second ||
			ce.Header.Get("X-OJS-Queue-Depth") != "1" || ce.Header.Get("X-OJS-Queue-Pressure") == "" {
			t.Fatalf("enqueue into a full queue: %#v", err)
		}
	})
}

// ojs-backpressure.md 5.2 (BP-R002): BlockTimeout sends OJS-Block-Timeout
// (HTTP header or NATS header): on a queue with the block strategy the
// server holds the enqueue that long before it answers 429.
func TestBlockTimeout(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{QueueMaxDepth: 1, QueueOverflow: "block"}, client.Config{Retry: client.RetryConfig{MaxRetries: -1}})
		ctx := ctxT(t)
		if _, err := e.c.Enqueue(ctx, "b.job", nil, client.Queue("blocky")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := e.c.Enqueue(ctx, "b.job", nil, client.Queue("blocky"), client.BlockTimeout(700*time.Millisecond))
		if waited := time.Since(start); !client.IsStatus(err, 429) || waited < 600*time.Millisecond {
			t.Fatalf("blocked enqueue: %v after %s, want 429 after the 700 ms block", err, waited)
		}
	})
}

// Config.Token is the bearer token on either binding (Authorization
// header, HTTP or NATS): a known token is served, an unknown one gets a
// typed 401.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		srv := startServer(t, app.Config{AdminTokens: []string{"admin-secret"}})
		ctx := ctxT(t)
		good := newClient(t, srv, kind, client.Config{Token: "admin-secret"})
		if _, err := good.c.Enqueue(ctx, "auth.job", nil); err != nil {
			t.Fatalf("enqueue with the admin token: %v", err)
		}
		bad := newClient(t, srv, kind, client.Config{Token: "not-a-token"})
		_, err := bad.c.Enqueue(ctx, "auth.job", nil)
		if ce, ok := errors.AsType[*client.Error](err); !ok || ce.Status != 401 || ce.Code != "unauthorized" {
			t.Fatalf("enqueue with an unknown token: %#v", err)
		}
	})
}

// Issue 32 through the Go client, over either binding: a nack with
// Requeue hands the job back (available, attempt not counted), the
// answers carry completed_at for a discarded job, the job's errors their
// type, and a refused retry policy is a 422 *Error of type
// validation_error with its docs link.
func TestRequeueAndIssue32Fields(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		j, err := e.c.Enqueue(ctx, "r.job", []any{1}, client.Queue("requeue32"), client.Retry(client.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			t.Fatal(err)
		}
		fetch := func() *client.Job {
			t.Helper()
			jobs, err := e.c.Fetch(ctx, client.FetchRequest{Queues: []string{"requeue32"}, Count: 1, WorkerID: "w1"})
			if err != nil || len(jobs) != 1 || jobs[0].ID != j.ID || jobs[0].Attempt != 1 {
				t.Fatalf("fetch: %v %v", jobs, err)
			}
			return jobs[0]
		}
		fetch()
		r, err := e.c.NackJob(ctx, client.Nack{JobID: j.ID, Requeue: true})
		if err != nil || !r.Requeued || r.State != "available" || r.Attempt != 0 {
			t.Fatalf("requeue: %+v %v", r, err)
		}
		fetch() // at once, attempt 1 again
		r, err = e.c.NackJob(ctx, client.Nack{JobID: j.ID, Error: client.JobError{Code: "E_DISK", Message: "disk full"}})
		if err != nil || r.State != "discarded" || r.CompletedAt == nil {
			t.Fatalf("nack: %+v %v", r, err)
		}
		g, err := e.c.Get(ctx, j.ID)
		if err != nil || g.CompletedAt == nil || len(g.Errors) != 1 || g.Errors[0].Type != "E_DISK" {
			t.Fatalf("discarded job: %+v %v", g, err)
		}
		_, err = e.c.Enqueue(ctx, "r.job", nil, client.Retry(client.RetryPolicy{MaxAttempts: 3, BackoffCoefficient: 0.5}))
		ce, ok := errors.AsType[*client.Error](err)
		if !ok || ce.Status != http.StatusUnprocessableEntity || ce.Type != "validation_error" ||
			ce.DocsURL == "" || ce.Details["field"] != "options.retry.backoff_coefficient" {
			t.Fatalf("retry policy out of range: %#v", err)
		}
	})
}
