package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Timer lateness: how long after its deadline a timeout takes effect.

const (
	timerStream   = "BENCH_TIMERS"
	timerSchedule = "bench.timer.%d.%d" // run, timer
	timerFired    = "bench.fired.%d"    // run
)

// timeoutSpread is how the n deadlines of a run are spread: over
// max(5 d, 300 ms) (5 s by default), starting timeoutBase after each job's
// start.
func timeoutSpread(d time.Duration) time.Duration { return max(5*d, 300*time.Millisecond) }

const timeoutBase = 300 * time.Millisecond

// GoTimeouts starts n jobs whose execution timeouts (grace period 0, one
// attempt) are spread over the run, waits for them to time out, and
// reports the lateness of each: discarded_at - (started_at + timeout).
func (e *Env) GoTimeouts(ctx context.Context, sh Shape, n int) (Sample, error) {
	svc := e.srv.Service()
	queue := fmt.Sprintf("bench-timeouts-%d", nextRun())
	spread := timeoutSpread(sh.Duration)
	body := func(queue string, i, size int) []byte {
		ms := timeoutBase.Milliseconds() + rand.Int64N(spread.Milliseconds())
		b := withField(jobBody(queue, i, size), "timeout_ms", strconv.FormatInt(ms, 10))
		b = withField(b, "grace_period", "0")
		return withField(b, "retry", `{"max_attempts":1}`)
	}
	started, err := e.startSilent(ctx, queue, n, body, sh.payloadBytes())
	if err != nil {
		return Sample{}, err
	}
	deadline := func(j *ojs.Job) time.Time { return j.StartedAt.Add(time.Duration(j.TimeoutMs) * time.Millisecond) }
	last := time.Time{}
	for _, j := range started {
		if d := deadline(j); d.After(last) {
			last = d
		}
	}
	if err := sleep(ctx, time.Until(last)+time.Second); err != nil {
		return Sample{}, err
	}
	late := make([]time.Duration, 0, n)
	for _, j := range started {
		for {
			cur, err := svc.Get(ctx, j.ID)
			if err != nil {
				return Sample{}, fmt.Errorf("get %s: %w", j.ID, err)
			}
			if cur.State == ojs.StateDiscarded && cur.DiscardedAt != nil {
				late = append(late, cur.DiscardedAt.Sub(deadline(j)))
				break
			}
			if cur.State != ojs.StateActive {
				return Sample{}, fmt.Errorf("job %s is %s, not timed out", j.ID, cur.State)
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return Sample{}, fmt.Errorf("job %s never timed out: %w", j.ID, err)
			}
		}
	}
	return latenessSample(late), nil
}

// startSilent enqueues n jobs body(queue, i) and fetches them all for a
// worker that never reports back; a fetch the loaded machine times out
// is asked again, as a worker would.
func (e *Env) startSilent(ctx context.Context, queue string, n int, body BodyFunc, size int) ([]*ojs.Job, error) {
	if err := e.enqueueParsed(ctx, queue, n, body, size); err != nil {
		return nil, err
	}
	svc := e.srv.Service()
	var started []*ojs.Job
	for failures := 0; len(started) < n; {
		got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: 100, WorkerID: "bench-silent"})
		if err != nil {
			if failures++; failures > 10 || ctx.Err() != nil {
				return nil, fmt.Errorf("fetch: %w", err)
			}
			continue
		}
		started = append(started, got...)
	}
	return started, nil
}

// GoIdleActive starts n jobs that wait on their timeouts (30 min
// execution, 1 h heartbeat: the worker is silent), lets the enqueues'
// aftermath pass for settle (the deferred lease writes 10 s after each
// claim, the GC returning memory, the ready stream forgetting the message
// ids of its 2-minute duplicate window), then reports the process CPU per
// second over measure. With timers in JetStream and nothing scanning jobs,
// it does not grow with n (DESIGN invariant 6).
func (e *Env) GoIdleActive(ctx context.Context, n int, settle, measure time.Duration) (Sample, error) {
	queue := fmt.Sprintf("bench-idle-%d", nextRun())
	body := func(queue string, i, size int) []byte {
		return withField(jobBody(queue, i, size), "heartbeat_timeout", "3600")
	}
	if _, err := e.startSilent(ctx, queue, n, body, 200); err != nil {
		return Sample{}, err
	}
	if err := sleep(ctx, settle); err != nil {
		return Sample{}, err
	}
	cpu, err := cpuPerSecond(ctx, measure)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Ops: int64(n), Elapsed: measure, Metrics: map[string]float64{"CPU ms/s": cpu}}, nil
}

// RawTimers is the baseline: n JetStream message schedules ("@at") spread
// the same way on a stream of their own, and the lateness of each fired
// message's arrival at a subscriber.
func (e *Env) RawTimers(ctx context.Context, sh Shape, n int) (Sample, error) {
	st, err := e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: timerStream, Subjects: []string{"bench.timer.>", "bench.fired.>"}, Storage: jetstream.FileStorage,
		AllowMsgSchedules: true, AllowMsgTTL: true,
	})
	if err != nil {
		return Sample{}, fmt.Errorf("create %s: %w", timerStream, err)
	}
	run := nextRun()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Purge(cctx)
	}()
	var mu sync.Mutex
	late := make([]time.Duration, 0, n)
	done := make(chan struct{})
	// Fired messages are stored by the server, not published: read them
	// with a consumer, as jetgate does.
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{fmt.Sprintf(timerFired, run)},
	})
	if err != nil {
		return Sample{}, fmt.Errorf("consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at, err := time.Parse(time.RFC3339Nano, m.Headers().Get("Bench-At"))
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		late = append(late, time.Since(at))
		if len(late) == n {
			close(done)
		}
	})
	if err != nil {
		return Sample{}, err
	}
	defer cc.Stop()
	spread := timeoutSpread(sh.Duration)
	start := time.Now()
	for i := range n {
		at := start.Add(timeoutBase + time.Duration(rand.Int64N(int64(spread))))
		m := nats.NewMsg(fmt.Sprintf(timerSchedule, run, i))
		m.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
		m.Header.Set(jetstream.ScheduleTargetHeader, fmt.Sprintf(timerFired, run))
		m.Header.Set("Bench-At", at.UTC().Format(time.RFC3339Nano))
		if _, err := e.async.PublishMsgAsync(m); err != nil {
			return Sample{}, err
		}
	}
	select {
	case <-e.async.PublishAsyncComplete():
	case <-ctx.Done():
		return Sample{}, ctx.Err()
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		got := len(late)
		mu.Unlock()
		return Sample{}, fmt.Errorf("%d of %d schedules fired: %w", got, n, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return latenessSample(late), nil
}

// latenessSample reports lateness quantiles in ms.
func latenessSample(late []time.Duration) Sample {
	s := Sample{Ops: int64(len(late)), Metrics: map[string]float64{}}
	s.setLatencies(late)
	s.Metrics["p50 late ms"] = s.Metrics["p50 ms"]
	s.Metrics["p99 late ms"] = s.Metrics["p99 ms"]
	s.Metrics["max late ms"] = quantile(s.Latencies, 1)
	delete(s.Metrics, "p50 ms")
	delete(s.Metrics, "p99 ms")
	return s
}
