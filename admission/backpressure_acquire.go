package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// fullError is a unit refused by a depth stream's limits.
type fullError struct {
	bound  string // "max_depth", "max_size_bytes", "tenant_max_depth"
	tenant string
}

func (e *fullError) Error() string { return "queue full: " + e.bound }

// asFull classifies a refused unit publish.
func asFull(err error, tenant string) (*fullError, bool) {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil, false
	}
	switch d := apiErr.Description; {
	case strings.Contains(d, "maximum messages per subject exceeded"):
		return &fullError{bound: "tenant_max_depth", tenant: tenant}, true
	case strings.Contains(d, "maximum messages exceeded"):
		return &fullError{bound: "max_depth"}, true
	case strings.Contains(d, "maximum bytes exceeded"):
		return &fullError{bound: "max_size_bytes"}, true
	}
	return nil, false
}

// acquire takes the units of jobs (all of one queue) following the
// queue's strategy.
func (s *Service) acquire(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) error {
	_, source := s.backpressureOf(q.name)
	if err := s.ensureDepth(ctx, q, cfg, source); err != nil {
		return err
	}
	if cfg.MaxDepth > 0 && int64(len(jobs)) > cfg.MaxDepth {
		// Can never fit: refuse at once whatever the strategy.
		return s.rejected(ctx, q, cfg, &fullError{bound: "max_depth"}, jobs, 0)
	}
	var err error
	switch cfg.Strategy {
	case ojs.StrategyBlock:
		err = s.acquireBlocking(ctx, q, cfg, jobs)
	case ojs.StrategyDropOldest:
		err = s.acquireDropping(ctx, q, cfg, jobs)
	default:
		if q.certainlyFull(cfg, len(jobs), time.Now(), s.bp.trust) {
			// backpressure_certain.go: no room can have come since a
			// refusal; answer from it.
			return s.refusedEarly(ctx, q, cfg, jobs)
		}
		a := q.startAttempt()
		err = s.tryAcquire(ctx, q, cfg, jobs)
		q.attempted(cfg, a, err)
		if full, ok := errors.AsType[*fullError](err); ok {
			err = s.rejected(ctx, q, cfg, full, jobs, 0)
		}
	}
	if err == nil {
		s.acquired(ctx, q, cfg, len(jobs))
	}
	return err
}

// acquired accounts n units just taken and reports the queue's pressure.
func (s *Service) acquired(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, n int) {
	q.mu.Lock()
	q.depth += int64(n)
	q.mu.Unlock()
	ojs.ReportPressure(ctx, s.observe(ctx, q, cfg, false))
}

// tryAcquire publishes one unit per job and records each unit's sequence
// on its job. If any is refused, the others are released and a
// *fullError returned.
func (s *Service) tryAcquire(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) error {
	wait, err := s.startUnits(ctx, q, cfg, jobs)
	if err != nil {
		return err
	}
	return wait()
}

// startUnits publishes the units of jobs, pipelined; wait collects the
// acks, as tryAcquire describes.
func (s *Service) startUnits(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) (wait func() error, err error) {
	msgs := make([]*nats.Msg, len(jobs))
	tenants := make([]string, len(jobs))
	for i, j := range jobs {
		if msgs[i], tenants[i], err = s.unit(q.name, cfg, j); err != nil {
			return nil, err
		}
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	var firstErr error
	for i, m := range msgs {
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			firstErr = fmt.Errorf("reserve depth of %s: %w", q.name, jobstore.Unavailable(err))
			break
		}
		futures[i] = f
	}
	return func() error {
		for i, f := range futures {
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				jobs[i].Internal.DepthSeq = ack.Sequence
			case err := <-f.Err():
				if full, ok := asFull(err, tenants[i]); ok {
					if _, already := errors.AsType[*fullError](firstErr); !already {
						firstErr = full
					}
				} else if firstErr == nil {
					firstErr = fmt.Errorf("reserve depth of %s: %w", q.name, jobstore.Unavailable(err))
				}
			case <-ctx.Done():
				if firstErr == nil {
					firstErr = fmt.Errorf("reserve depth of %s: %w", q.name, jobstore.Unavailable(ctx.Err()))
				}
			}
		}
		if firstErr != nil {
			for _, j := range jobs {
				if j.Internal.DepthSeq != 0 {
					s.releaseUnit(ctx, depthUnit{queue: q.name, seq: j.Internal.DepthSeq})
					j.Internal.DepthSeq = 0
				}
			}
		}
		return firstErr
	}, nil
}

// acquireBlocking waits until the units fit or the block timeout passes.
// Blocked producers are served in arrival order across every process
// (backpressure_block.go): each takes a ticket, and only the holder of the
// oldest ticket tries for room. Waiting costs nothing: a waiter is woken
// by a release in this process, a freed notice from another, or the
// deadline of a ticket ahead of it, never by a poll. Once EndBlocking is
// called no producer waits: each takes its ticket back and gets
// ojs.ErrShuttingDown, with no unit held for it.
func (s *Service) acquireBlocking(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) error {
	timeout := s.blockTimeout(ctx)
	var last *fullError
	try := func() (done bool, err error) {
		err = s.tryAcquire(ctx, q, cfg, jobs)
		full, ok := errors.AsType[*fullError](err)
		if !ok {
			return true, err
		}
		last = full
		return false, nil
	}
	start := time.Now()
	// Room now and nobody waiting anywhere: take it without a ticket. A
	// producer that may not wait never goes ahead of those who do.
	none, err := s.nobodyWaiting(ctx, q)
	if err != nil {
		return err
	}
	if none {
		if done, err := try(); done {
			return err
		}
	}
	if timeout <= 0 {
		if last == nil {
			last = &fullError{bound: "max_depth"}
		}
		return s.rejected(ctx, q, cfg, last, jobs, 0)
	}
	if s.blockingEnded() {
		return endedBlocking(q)
	}
	w, err := s.enterTicket(ctx, q, start.Add(timeout), len(jobs))
	if err != nil {
		return err
	}
	defer s.leaveTicket(q, w)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var ahead *time.Timer
	defer func() {
		if ahead != nil {
			ahead.Stop()
		}
	}()
	for {
		if s.blockingEnded() {
			return endedBlocking(q)
		}
		head, err := s.headTicket(ctx, q)
		if err != nil {
			return err
		}
		var aheadC <-chan time.Time
		switch {
		case head.seq == 0 || head.seq >= w.seq:
			// The oldest waiter (a ticket ahead that vanished, with the
			// stream, counts as gone).
			if done, err := try(); done {
				return err
			}
		case time.Now().After(head.deadline.Add(ticketGrace)):
			// Its producer gave up long ago without taking the ticket
			// back: the process died.
			s.dropTicket(ctx, q, head.seq)
			continue
		default:
			if ahead != nil {
				ahead.Stop()
			}
			ahead = time.NewTimer(time.Until(head.deadline.Add(ticketGrace)))
			aheadC = ahead.C
		}
		select {
		case <-w.ch:
		case <-aheadC:
		case <-deadline.C:
			if last == nil {
				last = &fullError{bound: "max_depth"}
			}
			return s.rejected(ctx, q, cfg, last, jobs, time.Since(start))
		case <-s.bp.ending:
			return endedBlocking(q)
		case <-ctx.Done():
			return fmt.Errorf("wait for room in queue %s: %w", q.name, jobstore.Unavailable(ctx.Err()))
		}
	}
}

// EndBlocking ends the waits of the producers blocked on full queues (the
// block strategy, acquireBlocking) and keeps new ones from waiting: each
// takes its ticket back, holds no unit, and gets ojs.ErrShuttingDown,
// which the bindings answer 503 with Retry-After, so it can send the job
// to another process. A producer that finds room still gets it. A process
// about to stop calls it before its bindings stop answering (issue 31
// item 6: a blocked producer otherwise waits out its block timeout, past
// the shutdown timeout, and gets no answer at all); Stop calls it too.
// Safe to call more than once.
func (s *Service) EndBlocking() {
	s.bp.endingOne.Do(func() { close(s.bp.ending) })
}

// blockingEnded reports whether EndBlocking was called.
func (s *Service) blockingEnded() bool {
	select {
	case <-s.bp.ending:
		return true
	default:
		return false
	}
}

// endedBlocking is the error of a producer that stops waiting for room in
// q because the process stops.
func endedBlocking(q *bpQueue) error {
	return fmt.Errorf("wait for room in queue %s: %w", q.name, ojs.ErrShuttingDown)
}

// blockTimeout is the request's OJS-Block-Timeout, or the default, capped
// at MaxBlockTimeout.
func (s *Service) blockTimeout(ctx context.Context) time.Duration {
	d, ok := ojs.BlockTimeout(ctx)
	if !ok {
		d = s.cfg.DefaultBlockTimeout
	}
	return min(max(d, 0), s.cfg.MaxBlockTimeout)
}

// leave removes w from the waiters; when w was the head, the next waiter
// becomes head and tries at once (room may be left).
func (q *bpQueue) leave(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, o := range q.waiters {
		if o == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if i == 0 && len(q.waiters) > 0 {
				signal(q.waiters[0].ch)
			}
			return
		}
	}
}

// wakeHead lets the oldest waiter try again.
func (q *bpQueue) wakeHead() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) > 0 {
		signal(q.waiters[0].ch)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// acquireDropping makes room by discarding the oldest available jobs of
// the lowest priority, as many as the refused units, and tries again. The
// per-tenant bound is not made room for: dropping another tenant's job
// would not help, so it rejects.
func (s *Service) acquireDropping(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) error {
	var full *fullError
	for range len(jobs) + 8 {
		err := s.tryAcquire(ctx, q, cfg, jobs)
		f, ok := errors.AsType[*fullError](err)
		if !ok {
			return err
		}
		full = f
		if full.bound == "tenant_max_depth" {
			break
		}
		n, err := s.dropOldest(ctx, q, len(jobs))
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return s.rejected(ctx, q, cfg, full, jobs, 0)
}

// rejected records an overflow and builds the 429 error, with a fresh
// reading of the queue's depth.
func (s *Service) rejected(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, full *fullError, jobs []*ojs.Job, waited time.Duration) error {
	return s.refusal(ctx, q, cfg, full, jobs, waited, s.observe(ctx, q, cfg, true))
}

// refusedEarly is rejected for a refusal remembered
// (backpressure_certain.go): the depth is the last reading, read again
// only when older than pressureFresh.
func (s *Service) refusedEarly(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, jobs []*ojs.Job) error {
	return s.refusal(ctx, q, cfg, &fullError{bound: "max_depth"}, jobs, 0, s.observe(ctx, q, cfg, false))
}

// refusal records an overflow seen at pressure p and builds the 429 error.
func (s *Service) refusal(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, full *fullError, jobs []*ojs.Job, waited time.Duration, p ojs.Pressure) error {
	if pr, ok := s.met.(PressureRecorder); ok {
		pr.QueueRejected(ctx, q.name, cfg.Strategy)
	}
	d := refusalData{Bound: bound(cfg, full.bound), BoundType: full.bound, Depth: p.Depth, JobType: jobs[0].Type,
		Jobs: len(jobs), MaxDepth: cfg.MaxDepth, Queue: q.name, Strategy: cfg.Strategy}
	if full.tenant != "" || full.bound == "tenant_max_depth" {
		d.Tenant = &full.tenant
	}
	// Both events carry the same data, encoded once: under overload
	// (jetgate load) encoding it per event was a tenth of the CPU.
	data, err := json.Marshal(d)
	if err == nil {
		s.queueEvent(EventQueueOverflow, q.name, json.RawMessage(data))
		s.queueEvent(EventBackpressureRejected, q.name, json.RawMessage(data))
	}
	s.maybeReconcile(q)
	return &ojs.QueueFullError{Pressure: p, Bound: full.bound, Tenant: full.tenant, Waited: waited,
		RetryAfter: s.cfg.BackpressureRetryAfter}
}

// refusalData is the data of a refusal's queue.overflow and
// backpressure.rejected events (ojs-backpressure.md 10.1), fields in the
// order a map of them encoded in.
type refusalData struct {
	Bound     int64   `json:"bound"`
	BoundType string  `json:"bound_type"`
	Depth     int64   `json:"depth"`
	JobType   string  `json:"job_type"`
	Jobs      int     `json:"jobs"`
	MaxDepth  int64   `json:"max_depth"`
	Queue     string  `json:"queue"`
	Strategy  string  `json:"strategy"`
	Tenant    *string `json:"tenant,omitempty"`
}

func bound(cfg ojs.Backpressure, kind string) int64 {
	switch kind {
	case "max_size_bytes":
		return cfg.MaxSizeBytes
	case "tenant_max_depth":
		return cfg.TenantMaxDepth
	}
	return cfg.MaxDepth
}

// observe returns the queue's pressure, read from its depth stream when
// the last reading is older than pressureFresh (or fresh is asked), and
// emits the warning, critical and cleared events when the level changes.
//
// A fresh reading (a refusal's) is taken after the caller arrived, but
// refusals share them: one that arrives while another's reading is under
// way waits for it and takes the next, which also serves every refusal
// that arrived meanwhile. Reading afresh for each refusal (a stream info
// and an overdraft read) made a 429 cost as much as an enqueue, and under
// overload (jetgate load, issue 20) the refusals crowded out the drain.
func (s *Service) observe(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, fresh bool) ojs.Pressure {
	if fresh {
		arrived := time.Now()
		q.readMu.Lock()
		q.mu.Lock()
		covered := q.freshAt.After(arrived)
		st := q.stream
		q.mu.Unlock()
		if !covered && st != nil {
			start := time.Now()
			s.readDepth(ctx, q, st)
			q.mu.Lock()
			q.freshAt, q.seenAt = start, start
			q.mu.Unlock()
		}
		q.readMu.Unlock()
	} else {
		q.mu.Lock()
		stale := time.Since(q.seenAt) > pressureFresh
		if stale {
			q.seenAt = time.Now() // one reader at a time; the others use the last reading
		}
		st := q.stream
		q.mu.Unlock()
		if stale && st != nil {
			s.readDepth(ctx, q, st)
		}
	}
	q.mu.Lock()
	// The depth stream holds at most max_depth units (its MaxMsgs). The
	// count here is the last reading plus this process's admissions and
	// releases since, and a reading taken while an admission was under
	// way already holds its unit: under overload (jetgate load) the sum
	// ran past the bound and a 429 reported depth 5126 of 5000.
	units := q.depth
	if cfg.MaxDepth > 0 {
		units = min(units, cfg.MaxDepth)
	}
	p := ojs.Pressure{Queue: q.name, Depth: units + q.over, MaxDepth: cfg.MaxDepth, MaxSizeBytes: cfg.MaxSizeBytes, Strategy: cfg.Strategy}
	if cfg.MaxSizeBytes > 0 {
		p.SizeBytes = q.bytes
	}
	p.Ratio = pressureRatio(p)
	level := 0
	switch {
	case p.Ratio >= ojs.CriticalThreshold:
		level = 2
	case p.Ratio >= cfg.WarningThreshold:
		level = 1
	}
	prev := q.level
	q.level = level
	q.mu.Unlock()
	if pr, ok := s.met.(PressureRecorder); ok {
		pr.QueuePressure(ctx, q.name, p.Ratio)
	}
	s.pressureEvents(p, prev, level)
	return p
}

// readDepth reads a queue's depth, size and overdraft from JetStream.
func (s *Service) readDepth(ctx context.Context, q *bpQueue, st jetstream.Stream) {
	if info, err := st.Info(ctx); err == nil {
		q.mu.Lock()
		q.depth, q.bytes = int64(info.State.Msgs), int64(info.State.Bytes)
		q.mu.Unlock()
	}
	if n, ok := s.overdraftCount(ctx, q.name); ok {
		q.mu.Lock()
		q.over = n
		q.mu.Unlock()
	}
}

func pressureRatio(p ojs.Pressure) float64 {
	var r float64
	if p.MaxDepth > 0 {
		r = float64(p.Depth) / float64(p.MaxDepth)
	}
	if p.MaxSizeBytes > 0 {
		r = max(r, float64(p.SizeBytes)/float64(p.MaxSizeBytes))
	}
	return min(max(r, 0), 1)
}

func (s *Service) pressureEvents(p ojs.Pressure, prev, level int) {
	if prev == level {
		return
	}
	data := map[string]any{"queue": p.Queue, "depth": p.Depth, "bound": p.MaxDepth, "max_size_bytes": p.MaxSizeBytes,
		"size_bytes": p.SizeBytes, "pressure": p.Ratio}
	switch {
	case level > prev && level >= 1 && prev < 1:
		s.queueEvent(EventQueuePressureWarning, p.Queue, data)
		s.queueEvent(EventBackpressureWarning, p.Queue, data)
		if level == 2 {
			s.queueEvent(EventQueuePressureCritical, p.Queue, data)
		}
	case level == 2:
		s.queueEvent(EventQueuePressureCritical, p.Queue, data)
	case level == 0:
		s.queueEvent(EventBackpressureCleared, p.Queue, data)
	}
}

// queueEvent emits a queue event with a data object (a map, or one
// encoded already).
func (s *Service) queueEvent(eventType, queue string, data any) {
	s.events.Publish(eventType, queue, data)
}
