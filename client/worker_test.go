package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// startWorker starts a worker of e's client with fast heartbeats and
// polls; t.Cleanup stops it.
func startWorker(t *testing.T, e *env, cfg client.WorkerConfig, handlers map[string]client.Handler) *client.Worker {
	t.Helper()
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 100 * time.Millisecond
	}
	cfg.PollInterval = 50 * time.Millisecond
	cfg.FetchWait = 300 * time.Millisecond
	w, err := e.c.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for typ, h := range handlers {
		w.Handle(typ, h)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop worker: %v", err)
		}
	})
	return w
}

// waitCause waits up to 20 s for a handler's context cause on causes and
// fails the test unless it is want; what says what did not happen in time.
func waitCause(t *testing.T, causes <-chan error, want error, what string) {
	t.Helper()
	select {
	case c := <-causes:
		if !errors.Is(c, want) {
			t.Fatalf("cause %v, want %v", c, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(what)
	}
}

// A worker runs each job's handler once and acks it with its result;
// OnReported sees every ack confirmed (ojs-worker-protocol.md 6, 8:
// never more active jobs than its concurrency).
func TestWorkerRunsAndAcks(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		const n = 40
		var running, peak, ran atomic.Int64
		var acked atomic.Int64
		startWorker(t, e, client.WorkerConfig{Queues: []string{"work"}, Concurrency: 4,
			OnReported: func(j *client.Job, ack bool, err error) {
				if ack && err == nil {
					acked.Add(1)
				}
			}}, map[string]client.Handler{
			"sum": func(ctx context.Context, j *client.Job) (any, error) {
				r := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
				}
				ran.Add(1)
				var args []int
				if err := json.Unmarshal(j.Args, &args); err != nil {
					return nil, err
				}
				if jj, ok := client.JobFromContext(ctx); !ok || jj.ID != j.ID {
					return nil, errors.New("JobFromContext does not give the job")
				}
				return map[string]int{"sum": args[0] + args[1]}, nil
			},
		})
		var ids []string
		for i := range n {
			j := enqueue(t, ctx, e, "sum", []any{i, 1}, client.Queue("work"))
			ids = append(ids, j.ID)
		}
		eventually(t, 30*time.Second, "every job acked", func() bool { return acked.Load() == n })
		j := waitState(t, e.c, ids[7], "completed", 10*time.Second)
		if string(j.Result) != `{"sum":8}` {
			t.Fatalf("result %s", j.Result)
		}
		if ran.Load() != n || peak.Load() > 4 {
			t.Fatalf("ran %d handlers (want %d), peak concurrency %d (max 4)", ran.Load(), n, peak.Load())
		}
		if kind == "nats" {
			// Issue 19: over NATS the worker acks through ackbatch (as many
			// acks per request as are waiting; one when they come one by one).
			st := microStats(t, e.srv.NatsURL())
			t.Logf("requests by endpoint: fetch %d, ackbatch %d, ack %d", st["workers.fetch"], st["workers.ackbatch"], st["workers.ack"])
			if st["workers.ack"] != 0 || st["workers.ackbatch"] < 1 || st["workers.ackbatch"] > n {
				t.Fatalf("ack requests %d, ackbatch requests %d for %d jobs", st["workers.ack"], st["workers.ackbatch"], n)
			}
		}
	})
}

// ojs-timeouts.md 7.2: the handler's context is cancelled at the job's
// execution timeout with cause ErrExecutionTimeout; the error it returns
// fails the attempt with type "timeout".
func TestWorkerTimeoutCancelsContext(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		causes := make(chan error, 1)
		startWorker(t, e, client.WorkerConfig{Queues: []string{"slow"}}, map[string]client.Handler{
			"slow": func(ctx context.Context, j *client.Job) (any, error) {
				start := time.Now()
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil, errors.New("gave up after " + time.Since(start).Round(time.Millisecond).String())
			},
		})
		j := enqueue(t, ctx, e, "slow", nil, client.Queue("slow"), client.Timeout(time.Second),
			client.GracePeriod(10*time.Second), client.Retry(client.RetryPolicy{MaxAttempts: 1}))
		waitCause(t, causes, client.ErrExecutionTimeout, "handler context not cancelled at the execution timeout")
		g := waitState(t, e.c, j.ID, "discarded", 15*time.Second)
		if g.Error == nil || g.Error.Kind() != "timeout" {
			t.Fatalf("error %+v, want type timeout", g.Error)
		}
	})
}

// The heartbeat answer is the worker's cancel signal: a job cancelled
// while it runs is no longer extended, and the worker cancels its
// handler's context with cause ErrJobCancelled (ojs-worker-protocol.md
// 4.4, 5.6) and reports nothing for it.
func TestWorkerCancelSignal(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		started := make(chan struct{})
		causes := make(chan error, 1)
		var reports atomic.Int64
		startWorker(t, e, client.WorkerConfig{Queues: []string{"long"},
			OnReported: func(*client.Job, bool, error) { reports.Add(1) }}, map[string]client.Handler{
			"long": func(ctx context.Context, j *client.Job) (any, error) {
				close(started)
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil, ctx.Err()
			},
		})
		j := enqueue(t, ctx, e, "long", nil, client.Queue("long"))
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("job not started")
		}
		if _, err := e.c.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		waitCause(t, causes, client.ErrJobCancelled, "handler of a cancelled job not cancelled")
		if g, _ := e.c.Get(ctx, j.ID); g.State != "cancelled" || reports.Load() != 0 {
			t.Fatalf("state %s, %d reports", g.State, reports.Load())
		}
	})
}

// ojs-timeouts.md 5.5, ojs-worker-protocol.md 5.4: a job running longer
// than its heartbeat timeout is kept by the worker's heartbeats and
// completes on its first attempt; ReportProgress reaches the job.
func TestWorkerHeartbeatKeepsTheJob(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		release := make(chan struct{})
		progressed := make(chan error, 1)
		startWorker(t, e, client.WorkerConfig{Queues: []string{"beat"}, HeartbeatInterval: 200 * time.Millisecond},
			map[string]client.Handler{
				"beat": func(ctx context.Context, j *client.Job) (any, error) {
					progressed <- client.ReportProgress(ctx, 0.5, "half way")
					select {
					case <-release:
						return "done", nil
					case <-ctx.Done():
						return nil, context.Cause(ctx)
					}
				},
			})
		j := enqueue(t, ctx, e, "beat", nil, client.Queue("beat"), client.HeartbeatTimeout(time.Second))
		if err := <-progressed; err != nil {
			t.Fatalf("report progress: %v", err)
		}
		started := time.Now()
		// Three heartbeat timeouts pass with the job still active.
		eventually(t, 20*time.Second, "three heartbeat timeouts", func() bool {
			g, err := e.c.Get(ctx, j.ID)
			if err != nil || g.State != "active" || g.Attempt != 1 {
				t.Fatalf("job %+v %v: not kept active by heartbeats", g, err)
			}
			if g.Progress == nil || *g.Progress != 0.5 {
				t.Fatalf("progress %v", g.Progress)
			}
			return time.Since(started) > 3*time.Second
		})
		close(release)
		if g := waitState(t, e.c, j.ID, "completed", 10*time.Second); g.Attempt != 1 {
			t.Fatalf("attempt %d", g.Attempt)
		}
	})
}

// ojs-timeouts.md 5.4, 7.2: after the execution timeout the handler has
// its grace period: a result within it is acked; a handler that ignores
// its context past the grace period has its job failed by the worker
// (type timeout), and its late return is not reported again.
func TestWorkerGracePeriod(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		stuck := make(chan struct{})
		var reports sync.Map
		startWorker(t, e, client.WorkerConfig{Queues: []string{"grace"},
			OnReported: func(j *client.Job, ack bool, err error) {
				n, _ := reports.LoadOrStore(j.ID, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}}, map[string]client.Handler{
			"polite": func(ctx context.Context, j *client.Job) (any, error) {
				<-ctx.Done()
				return map[string]string{"partial": "saved"}, nil // cleanup within the grace period
			},
			"stubborn": func(ctx context.Context, j *client.Job) (any, error) {
				<-stuck
				return "too late", nil
			},
		})
		polite := enqueue(t, ctx, e, "polite", nil, client.Queue("grace"), client.Timeout(time.Second), client.GracePeriod(5*time.Second))
		stubborn := enqueue(t, ctx, e, "stubborn", nil, client.Queue("grace"), client.Timeout(time.Second),
			client.GracePeriod(time.Second), client.Retry(client.RetryPolicy{MaxAttempts: 1}))
		if g := waitState(t, e.c, polite.ID, "completed", 20*time.Second); string(g.Result) != `{"partial":"saved"}` {
			t.Fatalf("polite result %s", g.Result)
		}
		g := waitState(t, e.c, stubborn.ID, "discarded", 20*time.Second)
		if g.Error == nil || g.Error.Kind() != "timeout" {
			t.Fatalf("stubborn error %+v", g.Error)
		}
		close(stuck)
		eventually(t, 10*time.Second, "the stubborn job's failure reported", func() bool {
			n, ok := reports.Load(stubborn.ID)
			return ok && n.(*atomic.Int64).Load() >= 1
		})
		if n, _ := reports.Load(stubborn.ID); n.(*atomic.Int64).Load() != 1 {
			t.Fatalf("stubborn job reported %d times", n.(*atomic.Int64).Load())
		}
	})
}

// ojs-rate-limiting.md 9.1: a handler returning RateLimitedUntil(t)
// fails the attempt with rate_limit_until, and no job of its key starts
// before t.
func TestWorkerRateLimitUntil(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		var until atomic.Int64 // unix ns
		starts := make(chan time.Time, 4)
		startWorker(t, e, client.WorkerConfig{Queues: []string{"api"}}, map[string]client.Handler{
			"call": func(ctx context.Context, j *client.Job) (any, error) {
				starts <- time.Now()
				if j.Attempt == 1 {
					u := time.Now().Add(2 * time.Second)
					until.Store(u.UnixNano())
					return nil, client.RateLimitedUntil(u)
				}
				return "ok", nil
			},
		})
		conc := 10
		j := enqueue(t, ctx, e, "call", nil, client.Queue("api"),
			client.RateLimit(client.RateLimitPolicy{Key: "partner-api", Concurrency: &conc}),
			client.Retry(client.RetryPolicy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, NoJitter: true}))
		<-starts
		g := waitState(t, e.c, j.ID, "completed", 30*time.Second)
		second := <-starts
		if u := time.Unix(0, until.Load()); second.Before(u.Add(-50 * time.Millisecond)) {
			t.Fatalf("second attempt started %s before rate_limit_until", u.Sub(second))
		}
		if g.Attempt != 2 || len(g.Errors) == 0 && g.Error == nil {
			t.Fatalf("job %+v", g)
		}
	})
}

// ojs-worker-protocol.md 7.2, 9.2: Stop stops fetching, lets active jobs
// finish within the drain timeout, then cancels the rest with cause
// ErrShutdown and fails them with error type "shutdown"; jobs enqueued
// afterwards stay available.
func TestWorkerDrainsOnStop(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		ctx := ctxT(t)
		running := make(chan string, 2)
		finish := make(chan struct{})
		causes := make(chan error, 1)
		w, err := e.c.NewWorker(client.WorkerConfig{Queues: []string{"drain"}, DrainTimeout: 1500 * time.Millisecond,
			HeartbeatInterval: 100 * time.Millisecond, PollInterval: 50 * time.Millisecond, FetchWait: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("quick", func(ctx context.Context, j *client.Job) (any, error) {
			running <- j.ID
			<-finish
			return "finished during the drain", nil
		})
		w.Handle("endless", func(ctx context.Context, j *client.Job) (any, error) {
			running <- j.ID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		quick, _ := e.c.Enqueue(ctx, "quick", nil, client.Queue("drain"))
		endless := enqueue(t, ctx, e, "endless", nil, client.Queue("drain"),
			client.Retry(client.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour})) // stays retryable
		for range 2 {
			select {
			case <-running:
			case <-time.After(20 * time.Second):
				t.Fatal("jobs not started")
			}
		}
		stopped := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stopped <- w.Stop(sctx)
		}()
		eventually(t, 5*time.Second, "worker in terminate", func() bool { return w.State() == client.StateTerminate })
		close(finish)
		if err := <-stopped; err != nil {
			t.Fatalf("stop: %v", err)
		}
		if c := <-causes; !errors.Is(c, client.ErrShutdown) {
			t.Fatalf("cause %v, want ErrShutdown", c)
		}
		waitState(t, e.c, quick.ID, "completed", 10*time.Second)
		g := waitState(t, e.c, endless.ID, "retryable", 10*time.Second)
		if g.Error == nil || g.Error.Kind() != "shutdown" {
			t.Fatalf("endless job error %+v, want type shutdown", g.Error)
		}
		late := enqueue(t, ctx, e, "quick", nil, client.Queue("drain"))
		if g, _ := e.c.Get(ctx, late.ID); g.State != "available" {
			t.Fatalf("job enqueued after stop: %s", g.State)
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("second stop: %v", err)
		}
	})
}

// ojs-worker-protocol.md 4.4, 7.2: a "terminate" directive in the
// heartbeat answer (here from the admin API) makes Run drain and return.
func TestWorkerRunTerminatesOnDirective(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		w, err := e.c.NewWorker(client.WorkerConfig{Queues: []string{"ops"}, HeartbeatInterval: 100 * time.Millisecond,
			PollInterval: 50 * time.Millisecond, FetchWait: 200 * time.Millisecond, DrainTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx) }()
		eventually(t, 20*time.Second, "the admin API terminates the worker", func() bool {
			res, err := http.Post(e.srv.URL()+"/ojs/v1/admin/workers/"+w.ID()+"/terminate", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
		select {
		case <-w.Terminated():
		case <-time.After(20 * time.Second):
			t.Fatal("Terminated not closed after the directive")
		}
		select {
		case err := <-ran:
			if err != nil || w.State() != client.StateTerminate {
				t.Fatalf("run: %v, state %s", err, w.State())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return after a terminate directive")
		}
	})
}

// microStats returns the requests each endpoint of the "ojs" micro
// service served, by subject without the prefix ($SRV.STATS).
func microStats(t *testing.T, url string) map[string]int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg, err := nc.Request("$SRV.STATS.ojs", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("micro stats: %v", err)
	}
	var st struct {
		Endpoints []struct {
			Subject     string `json:"subject"`
			NumRequests int    `json:"num_requests"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ep := range st.Endpoints {
		out[strings.TrimPrefix(ep.Subject, client.DefaultPrefix+".")] += ep.NumRequests
	}
	return out
}

// A worker whose fetches fail backs off exponentially from PollInterval
// (honouring any Retry-After) instead of spinning: here every fetch is
// refused (401, a token the server does not know).
func TestWorkerFetchBacksOff(t *testing.T) {
	t.Parallel()
	e := setup(t, "http", app.Config{WorkerTokens: []string{"the-right-token"}}, client.Config{Token: "a-wrong-token"})
	startWorker(t, e, client.WorkerConfig{Queues: []string{"q"}, HeartbeatInterval: time.Hour}, nil)
	eventually(t, 10*time.Second, "first refused fetch", func() bool { return e.rt.count(401) >= 1 })
	start := time.Now()
	eventually(t, 20*time.Second, "1.6 s of refused fetches", func() bool { return time.Since(start) > 1600*time.Millisecond })
	// Waits of 50, 100, 200, 400, 800 ms: at most 6 fetches in 1.6 s
	// (32 without backoff).
	if n := e.rt.count(401); n > 7 {
		t.Fatalf("%d refused fetches in 1.6 s: no backoff", n)
	}
}

// ojs-timeouts.md 5.4: a job without its own timeout runs under the
// server's default; the heartbeat answer lists it in jobs_to_cancel once
// that passes, and the worker cancels the handler with cause
// ErrExecutionTimeout.
func TestWorkerCancelsAtTheServersDefaultTimeout(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{DefaultTimeout: time.Second, DefaultGracePeriod: 10 * time.Second}, client.Config{})
		ctx := ctxT(t)
		causes := make(chan error, 1)
		startWorker(t, e, client.WorkerConfig{Queues: []string{"dflt"}}, map[string]client.Handler{
			"wait": func(ctx context.Context, j *client.Job) (any, error) {
				if j.ExecutionTimeout(0) != 0 {
					return nil, errors.New("the job has a timeout of its own")
				}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return "cleaned up", nil
			},
		})
		j := enqueue(t, ctx, e, "wait", nil, client.Queue("dflt"))
		waitCause(t, causes, client.ErrExecutionTimeout, "handler not cancelled at the server's default timeout")
		waitState(t, e.c, j.ID, "completed", 10*time.Second) // its result came within the grace period
	})
}
