package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Queues of the load.
const (
	queueMain    = "chaos-main"    // priorities 0..9, retries, execution timeouts
	queueBounded = "chaos-bounded" // max_depth boundedDepth, reject, count_active
	queueLimits  = "chaos-limits"  // rate-limited keys
	boundedDepth = 10
)

// Every job's heartbeat timeout and, unless its kind says otherwise,
// execution timeout: short, so abandoned jobs come back within the round.
const (
	jobHeartbeatTimeout = 2 * time.Second
	jobExecTimeout      = 10 * time.Second
	heartbeatEvery      = 500 * time.Millisecond
	nackShare           = 0.25 // of attempts a worker fails on purpose
)

// kind is one sort of job the producers send.
type kind struct {
	name, queue string
	perSecond   float64       // steady rate (0: bursts only)
	burst       int           // jobs per burst
	burstEvery  time.Duration // time between bursts
	priorities  bool          // random priority 0..9

	key                  string // rate limit key ("" none)
	conc                 int
	windowN, throttleN   int
	windowP, throttleP   time.Duration
	execTimeout          time.Duration
	overrunFirstAttempts bool // the first attempt runs past its execution timeout
}

// kinds are the load: priorities, a bounded queue hit in bursts, one key per
// limit (slow jobs share the concurrency key, so timeouts release slots),
// retries through nacks everywhere.
var kinds = []kind{
	{name: "chaos.plain", queue: queueMain, perSecond: 8, priorities: true},
	{name: "chaos.bounded", queue: queueBounded, burst: 14, burstEvery: 2 * time.Second},
	{name: "chaos.conc", queue: queueLimits, perSecond: 6, key: "chaos-conc", conc: 2},
	{name: "chaos.slow", queue: queueLimits, perSecond: 0.5, key: "chaos-conc", conc: 2,
		execTimeout: time.Second, overrunFirstAttempts: true},
	{name: "chaos.window", queue: queueLimits, perSecond: 3, key: "chaos-window", windowN: 4, windowP: time.Second},
	{name: "chaos.throttle", queue: queueLimits, perSecond: 3, key: "chaos-throttle", throttleN: 5, throttleP: time.Second},
}

func kindByName(name string) *kind {
	for i := range kinds {
		if kinds[i].name == name {
			return &kinds[i]
		}
	}
	return nil
}

// backlogGroup is what the producers' backlog counts by: the rate limit
// key when there is one (kinds sharing a key share its throughput).
func (k *kind) backlogGroup() string {
	if k.key != "" {
		return k.key
	}
	return k.name
}

func (k *kind) timeout() time.Duration {
	if k.execTimeout > 0 {
		return k.execTimeout
	}
	return jobExecTimeout
}

func (k *kind) body(id string, seq int) map[string]any {
	job := map[string]any{
		"id": id, "type": k.name, "args": []any{seq}, "queue": k.queue,
		"retry": map[string]any{"max_attempts": retryPolicyAttempts, "initial_interval": "PT0.2S", "backoff_coefficient": 1,
			"max_interval": "PT1S", "jitter": false},
		"heartbeat_timeout_ms": jobHeartbeatTimeout.Milliseconds(),
		"timeout_ms":           k.timeout().Milliseconds(),
		"grace_period_ms":      0,
	}
	if k.priorities {
		job["priority"] = rand.IntN(10)
	}
	if k.key != "" {
		rl := map[string]any{"key": k.key}
		if k.conc > 0 {
			rl["concurrency"] = k.conc
		}
		if k.windowN > 0 {
			rl["rate"] = map[string]any{"limit": k.windowN, "period": isoSeconds(k.windowP)}
		}
		if k.throttleN > 0 {
			rl["throttle"] = map[string]any{"limit": k.throttleN, "period": isoSeconds(k.throttleP)}
		}
		job["rate_limit"] = rl
	}
	return job
}

func isoSeconds(d time.Duration) string {
	return fmt.Sprintf("PT%gS", d.Seconds())
}

// load runs the producers and workers against the processes.
type load struct {
	api *api
	rec *recorder

	mu       sync.Mutex
	problems []violation // answers no correct jetgate gives (or harness bugs)
	seq      int
	backlog  map[string]int // per backlogGroup: accepted, not yet acked or nacked for the last time
}

// maxBacklog is how many jobs of one kind may be accepted and not yet
// finished before its producer holds back: the load stays steady instead of
// piling up behind a rate limit on a slow machine.
const maxBacklog = 30

// retryPolicyAttempts is every job's max_attempts.
const retryPolicyAttempts = 3

func (l *load) addBacklog(group string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.backlog == nil {
		l.backlog = map[string]int{}
	}
	l.backlog[group] += n
}

func (l *load) backedUp(group string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.backlog[group] >= maxBacklog
}

func (l *load) problem(v violation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, v)
}

func (l *load) takeProblems() []violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.problems
	l.problems = nil
	return p
}

// produce runs every kind's producer until ctx ends, then waits for the
// enqueues in flight (they are not cancelled: an enqueue cut off would be
// an unclear one for no reason).
func (l *load) produce(ctx context.Context, round int) {
	var wg sync.WaitGroup
	for i := range kinds {
		k := &kinds[i]
		wg.Go(func() { l.produceKind(ctx, round, k, &wg) })
	}
	wg.Wait()
}

func (l *load) produceKind(ctx context.Context, round int, k *kind, wg *sync.WaitGroup) {
	sem := make(chan struct{}, 8)
	every := k.burstEvery
	if k.perSecond > 0 {
		every = time.Duration(float64(time.Second) / k.perSecond)
	}
	for {
		jitter := time.Duration(rand.Int64N(int64(every)/2+1)) - every/4
		if !sleepCtx(ctx, every+jitter) {
			return
		}
		if l.backedUp(k.backlogGroup()) {
			continue
		}
		n := max(k.burst, 1)
		for range n {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				l.submit(round, k)
			})
		}
	}
}

// submit enqueues one job with an id of its own, so an enqueue whose
// answer was lost can be sent again: 201 or 409 duplicate then both mean
// stored.
func (l *load) submit(round int, k *kind) {
	id := uuid.Must(uuid.NewV7()).String()
	l.mu.Lock()
	l.seq++
	seq := l.seq
	l.mu.Unlock()
	body := k.body(id, seq)
	prio, ok := body["priority"].(int)
	if !ok {
		prio = -1
	}
	j := &jobRec{id: id, kind: k.name, queue: k.queue, priority: prio, round: round, submitted: time.Now(), enqueue: enqMaybe}
	l.rec.addJob(j)
	hadUnclear := false
	for try := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r := l.api.do(ctx, http.MethodPost, "/ojs/v1/jobs", body)
		cancel()
		now := time.Now()
		switch {
		case r.status == http.StatusCreated,
			r.status == http.StatusConflict && r.errorCode() == "duplicate" && hadUnclear:
			l.rec.update(func() { j.enqueue, j.acceptedAt = enqAccepted, now })
			l.addBacklog(k.backlogGroup(), 1)
			return
		case r.status == http.StatusTooManyRequests:
			l.rec.update(func() {
				if !hadUnclear {
					j.enqueue = enqRefused
				}
				l.rec.refused429++
			})
			return
		case r.unclear():
			hadUnclear = true
			l.rec.update(func() { l.rec.unclearRequests++ })
			time.Sleep(time.Duration(try+1) * 150 * time.Millisecond)
		default:
			l.rec.update(func() { j.enqueue = enqRefused })
			l.problem(violation{id + " (" + k.name + ")", "enqueue answered " + r.String(), now})
			return
		}
	}
}

// worker is a goroutine fetching, running and acking or nacking jobs. Killing
// it (kill) abandons what it holds: no ack, no nack, no more heartbeats.
type worker struct {
	id     string
	queues []string
	count  int
	l      *load
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	held     map[*hold]bool
	killedAt time.Time
}

func (l *load) startWorker(parent context.Context, id string, queues []string, count int) *worker {
	ctx, cancel := context.WithCancel(parent)
	w := &worker{id: id, queues: queues, count: count, l: l, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), held: map[*hold]bool{}}
	go func() {
		defer close(w.done)
		w.loop()
	}()
	return w
}

// kill stops the worker at once, holding whatever it holds, and waits for
// its goroutines.
func (w *worker) kill() (abandoned int) {
	w.mu.Lock()
	w.killedAt = time.Now()
	abandoned = len(w.held)
	w.mu.Unlock()
	w.cancel()
	<-w.done
	return abandoned
}

func (w *worker) busy() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

func (w *worker) loop() {
	var running sync.WaitGroup
	defer running.Wait()
	for w.ctx.Err() == nil {
		sent := time.Now()
		r := w.l.api.do(w.ctx, http.MethodPost, "/ojs/v1/workers/fetch",
			map[string]any{"queues": w.queues, "count": w.count, "worker_id": w.id})
		recv := time.Now()
		if r.unclear() {
			w.l.rec.update(func() { w.l.rec.unclearRequests++ })
			if slices.Contains(w.queues, queueBounded) {
				w.l.rec.addUnclearFetch(sent)
			}
			sleepCtx(w.ctx, 50*time.Millisecond)
			continue
		}
		var got struct {
			Jobs []struct {
				ID      string `json:"id"`
				Type    string `json:"type"`
				Attempt int    `json:"attempt"`
			} `json:"jobs"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil {
			w.l.problem(violation{"worker " + w.id, "fetch answered " + r.String(), recv})
			sleepCtx(w.ctx, 200*time.Millisecond)
			continue
		}
		if len(got.Jobs) == 0 {
			sleepCtx(w.ctx, 25*time.Millisecond)
			continue
		}
		for _, gj := range got.Jobs {
			k := kindByName(gj.Type)
			h := &hold{job: gj.ID, kind: gj.Type, worker: w.id, attempt: gj.Attempt, fetchSent: sent, fetchRecv: recv,
				execTimeout: jobExecTimeout, hbTimeout: jobHeartbeatTimeout}
			if k != nil {
				h.execTimeout = k.timeout()
			}
			w.l.rec.addHold(h)
			w.mu.Lock()
			w.held[h] = true
			w.mu.Unlock()
			running.Go(func() { w.run(h, k) })
		}
		running.Wait()
	}
}

// run works on one attempt: sleeps its duration (heartbeating when long),
// then acks or nacks it, unless the worker is killed first.
func (w *worker) run(h *hold, k *kind) {
	defer func() {
		w.mu.Lock()
		delete(w.held, h)
		w.mu.Unlock()
	}()
	d := time.Duration(20+rand.IntN(130)) * time.Millisecond
	if k != nil && k.overrunFirstAttempts && h.attempt == 1 {
		d = k.timeout() + 700*time.Millisecond
	}
	if d > heartbeatEvery {
		hbCtx, stop := context.WithCancel(w.ctx)
		defer stop()
		go w.heartbeat(hbCtx, h)
	}
	if !sleepCtx(w.ctx, d) {
		w.mu.Lock()
		killed := w.killedAt
		w.mu.Unlock()
		w.l.rec.update(func() { h.killed, h.outcome = killed, endAbandoned })
		return
	}
	w.finish(h, rand.Float64() >= nackShare)
}

func (w *worker) heartbeat(ctx context.Context, h *hold) {
	for sleepCtx(ctx, heartbeatEvery) {
		sent := time.Now()
		r := w.l.api.do(ctx, http.MethodPost, "/ojs/v1/workers/heartbeat",
			map[string]any{"worker_id": w.id, "active_jobs": []string{h.job}})
		var got struct {
			Extended []string `json:"jobs_extended"`
		}
		if r.status == http.StatusOK && json.Unmarshal(r.body, &got) == nil && slices.Contains(got.Extended, h.job) {
			w.l.rec.update(func() { h.lastExt = sent })
		}
	}
}

// finish acks or nacks the attempt, sending again (with the same attempt)
// while the answer is unclear.
func (w *worker) finish(h *hold, ok bool) {
	path, body := "/ojs/v1/workers/ack", map[string]any{"job_id": h.job, "worker_id": w.id, "attempt": h.attempt,
		"result": map[string]any{"worker": w.id}}
	if !ok {
		path, body = "/ojs/v1/workers/nack", map[string]any{"job_id": h.job, "worker_id": w.id, "attempt": h.attempt,
			"error": map[string]any{"code": "chaos_injected", "message": "injected failure", "retryable": true}}
	}
	first := time.Now()
	w.l.rec.update(func() { h.endSent = first })
	for try := range 6 {
		sent := time.Now()
		r := w.l.api.do(w.ctx, http.MethodPost, path, body)
		recv := time.Now()
		switch {
		case r.status == http.StatusOK:
			if k := kindByName(h.kind); k != nil && (ok || h.attempt >= retryPolicyAttempts) {
				w.l.addBacklog(k.backlogGroup(), -1)
			}
			w.l.rec.update(func() {
				if ok {
					h.outcome = endAck200
					j := w.l.rec.jobs[h.job]
					if j != nil {
						j.acks = append(j.acks, ack{worker: w.id, attempt: h.attempt, sent: sent, received: recv})
					}
				} else {
					h.outcome = endNack200
				}
			})
			return
		case r.status == http.StatusConflict && !r.retryable():
			w.l.rec.update(func() { h.outcome = map[bool]string{true: endAck409, false: endNack409}[ok] })
			return
		case w.ctx.Err() != nil:
			w.l.rec.update(func() { h.outcome = endKilledSend })
			return
		case r.unclear() || r.retryable():
			w.l.rec.update(func() { w.l.rec.unclearRequests++ })
			if !sleepCtx(w.ctx, time.Duration(try+1)*150*time.Millisecond) {
				w.l.rec.update(func() { h.outcome = endKilledSend })
				return
			}
		default:
			w.l.problem(violation{h.job, fmt.Sprintf("%s of attempt %d by %s answered %s", path, h.attempt, w.id, r.String()), recv})
			return
		}
	}
	w.l.rec.update(func() { h.outcome = endUnclear })
}
