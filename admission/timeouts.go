package admission

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Timeouts (ojs-timeouts.md), all enforced from JetStream timers:
//
//   - An active job has one lease timer (ojs.timer.lease.<job>) set at its
//     next deadline: the heartbeat deadline (last sign of life + heartbeat
//     timeout), the execution timeout (started_at + timeout: the cancel
//     signal) or the end of the grace period (started_at + timeout +
//     grace_period), whichever comes first. The timer's kind header says
//     which. A heartbeat or progress update replaces it; the signal, when it
//     fires, arms the next one. So each active job costs one pending
//     message schedule whatever its deadlines, and nothing scans jobs.
//   - A job with an enqueue TTL, expires_at or a total timeout has one
//     expire timer (ojs.timer.expire.<job>) at the earliest of them that
//     still applies. When it fires, the job's record decides: discarded if a
//     deadline passed, otherwise the timer is armed at the next one.
//
// Every timeout is a compare-and-swap of the job record like any other
// transition, so an ack racing a timeout has exactly one winner, and the
// loser's ack or nack is answered 409 (late result).

// Lease timer headers.
const (
	headerLeaseKind = "Ojs-Lease-Kind"
	// headerBeatAt is the unix millisecond of the last sign of life the
	// deadline counts from; headerBeatMs the heartbeat timeout.
	headerBeatAt = "Ojs-Beat-At"
	headerBeatMs = "Ojs-Beat-Ms"
)

// Lease timer kinds.
const (
	leaseHeartbeat = "heartbeat" // silence: the job stalls
	leaseSignal    = "signal"    // execution timeout: the worker is told to cancel
	leaseExecution = "execution" // execution timeout + grace: the attempt ends
)

// Error types and timeout kinds of ojs-timeouts.md 8.
const (
	errTimeout      = "timeout"
	errStalled      = "stalled"
	errTotalTimeout = "total_timeout"
	errTTLExpired   = "enqueue_ttl_expired"
	errExpired      = "expired"

	kindExecution = "execution"
	kindTotal     = "total"
	kindTTL       = "enqueue_ttl"
	kindStalled   = "stalled"
)

// Timeout events (ojs-timeouts.md 11.1).
const (
	EventJobTimeout      = "job.timeout"
	EventJobStalled      = "job.stalled"
	EventJobTTLExpired   = "job.ttl_expired"
	EventJobTotalTimeout = "job.total_timeout"
)

// attemptClock holds the deadlines of one attempt of an active job.
type attemptClock struct {
	exec, grace time.Duration
	soft, hard  time.Time
	beat        time.Duration
}

// attemptOf returns the deadlines of active job j's current attempt.
func (s *Service) attemptOf(j *ojs.Job) attemptClock {
	c := attemptClock{
		exec:  j.ExecutionTimeout(s.cfg.DefaultTimeout),
		grace: max(j.GraceOr(s.cfg.DefaultGracePeriod), 0),
		beat:  time.Duration(j.Internal.BeatMs) * time.Millisecond,
	}
	if c.beat <= 0 {
		c.beat = j.HeartbeatTimeoutOr(s.cfg.DefaultHeartbeatTimeout)
	}
	if j.StartedAt != nil {
		c.soft = j.StartedAt.Add(c.exec)
		c.hard = c.soft.Add(c.grace)
	}
	return c
}

// next returns the attempt's next deadline after a sign of life at
// lastBeat, with heartbeat timeout beat, as seen at now, and its kind.
func (c attemptClock) next(lastBeat time.Time, beat time.Duration, now time.Time) (time.Time, string) {
	exec, kind := c.hard, leaseExecution
	if c.grace > 0 && now.Before(c.soft) {
		exec, kind = c.soft, leaseSignal
	}
	if hb := lastBeat.Add(beat); hb.Before(exec) {
		return hb, leaseHeartbeat
	}
	return exec, kind
}

// cancelRequested reports whether the worker of the attempt should
// cancel it: its execution timeout passed.
func (c attemptClock) cancelRequested(now time.Time) bool {
	return !c.soft.IsZero() && !now.Before(c.soft)
}

// leaseHeaders are the headers of a lease timer of kind counting from
// lastBeat.
func leaseHeaders(kind string, lastBeat time.Time, beat time.Duration) []string {
	return []string{
		headerLeaseKind, kind,
		headerBeatAt, strconv.FormatInt(lastBeat.UnixMilli(), 10),
		headerBeatMs, strconv.FormatInt(beat.Milliseconds(), 10),
	}
}

// firstLease returns the first lease timer of active job j's attempt, as
// written at its start (the claim, or a deferred or redelivered write).
func (s *Service) firstLease(j *ojs.Job) (time.Time, []string) {
	c := s.attemptOf(j)
	at, kind := c.next(j.StartedAt.Time, c.beat, j.StartedAt.Time)
	return at, leaseHeaders(kind, j.StartedAt.Time, c.beat)
}

// leaseRef is what a fired lease timer says about its deadline.
type leaseRef struct {
	kind     string
	lastBeat time.Time
	beat     time.Duration
}

func readLease(h nats.Header) leaseRef {
	r := leaseRef{kind: h.Get(headerLeaseKind)}
	if ms, err := strconv.ParseInt(h.Get(headerBeatAt), 10, 64); err == nil {
		r.lastBeat = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(h.Get(headerBeatMs), 10, 64); err == nil {
		r.beat = time.Duration(ms) * time.Millisecond
	}
	if r.kind == "" {
		r.kind = leaseHeartbeat // a timer written before kinds existed
	}
	return r
}

// seconds rounds d up to whole seconds, as the spec's *_seconds fields
// count.
func seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// timeoutError is the error object of ojs-timeouts.md 8.
func timeoutError(typ, kind, msg string, limit, elapsed time.Duration) ojs.JobError {
	retryable := typ != errTotalTimeout && typ != errTTLExpired && typ != errExpired
	return ojs.JobError{
		Code: typ, Type: typ, Message: msg, Retryable: &retryable,
		TimeoutKind: kind, LimitSeconds: seconds(limit), ElapsedSeconds: seconds(elapsed),
		LimitMs: limit.Milliseconds(), ElapsedMs: elapsed.Milliseconds(),
	}
}

// leaseFired handles an active job's lease timer: the cancel signal at its
// execution timeout, or the end of the attempt at the end of its grace
// period or of its worker's silence.
func (s *Service) leaseFired(ctx context.Context, ref jobstore.MsgRef, h nats.Header) error {
	lr := readLease(h)
	if lr.kind == leaseSignal {
		return s.signalCancel(ctx, ref, lr)
	}
	var kindOut string
	var te ojs.JobError
	var re reentry
	nj, old, err := s.transition(ctx, ref.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateActive || j.Internal.Token != ref.Token {
			return nil, nil, staleOrEarly(j, ref)
		}
		now := s.now()
		c := s.attemptOf(j)
		var e ojs.JobError
		switch {
		case lr.kind == leaseExecution:
			kindOut = kindExecution
			e = timeoutError(errTimeout, kindExecution,
				fmt.Sprintf("Job execution exceeded timeout of %s (grace period %s)", fmtSeconds(c.exec), fmtSeconds(c.grace)),
				c.exec, now.Sub(j.StartedAt.Time))
		default:
			kindOut = kindStalled
			beat, last := lr.beat, lr.lastBeat
			if beat <= 0 {
				beat = c.beat
			}
			if last.IsZero() {
				last = j.StartedAt.Time
			}
			e = timeoutError(errStalled, kindStalled,
				fmt.Sprintf("no heartbeat, progress, ack or nack from worker %s for %s (heartbeat timeout %s)",
					quoteOr(j.WorkerID, "(unknown)"), fmtSeconds(now.Sub(last)), fmtSeconds(beat)),
				beat, now.Sub(last))
		}
		te = e
		nj, pre := s.failed(j, e, &re)
		return nj, pre, nil
	})
	s.done(&re, nj)
	if err != nil {
		return err
	}
	s.leases.cancel(old.ID)
	s.ackHeld(old.Internal.HeldAck)
	s.releaseLimits(ctx, old)
	s.releaseDepth(nj)
	s.beats.done(old.ID)
	s.log.Info("job timed out", "job", nj.ID, "queue", nj.Queue, "kind", kindOut, "state", nj.State)
	s.timedOut(ctx, nj, te, runTime(old))
	s.afterFailure(ctx, nj)
	return nil
}

// timedOut records timeout e of nj in events and metrics; ran is how long
// the attempt ran, if it was active.
func (s *Service) timedOut(ctx context.Context, nj *ojs.Job, e ojs.JobError, ran time.Duration) {
	event := map[string]string{
		kindExecution: EventJobTimeout, kindStalled: EventJobStalled,
		kindTTL: EventJobTTLExpired, kindTotal: EventJobTotalTimeout,
	}[e.TimeoutKind]
	if event == "" {
		return
	}
	s.met.JobTimedOut(ctx, nj.Queue, nj.Type, e.TimeoutKind)
	if ran > 0 {
		outcome := map[string]string{kindExecution: "timeout", kindStalled: "stalled"}[e.TimeoutKind]
		s.met.JobExecuted(ctx, nj.Queue, nj.Type, cmp.Or(outcome, "timeout"), ran)
	}
	s.events.PublishJob(event, nj, map[string]any{
		"job_id": nj.ID, "timeout_kind": e.TimeoutKind, "limit_seconds": e.LimitSeconds,
		"elapsed_seconds": e.ElapsedSeconds, "attempt": nj.Attempt,
	})
	if e.TimeoutKind == kindStalled && nj.Progress != nil {
		s.events.PublishJob(EventProgressStalled, nj, map[string]any{
			"job_id": nj.ID, "last_progress": *nj.Progress, "last_update": nj.ProgressUpdatedAt,
		})
	}
}

// cancelSignal is the message published on ojs.signal.cancel.<queue>.<job>
// when an active job reaches its execution timeout.
type cancelSignal struct {
	JobID    string    `json:"job_id"`
	Type     string    `json:"type"`
	Queue    string    `json:"queue"`
	WorkerID string    `json:"worker_id,omitempty"`
	Attempt  int       `json:"attempt"`
	Reason   string    `json:"reason"`
	Deadline *ojs.Time `json:"deadline"`
}

// signalCancel tells the worker of an active job that its execution
// timeout passed: a NATS message on the job's cancel subject now, and the
// job's id in every heartbeat answer from now on. The lease timer is armed
// at the next deadline: the end of the grace period, or the heartbeat
// deadline if that comes first. A heartbeat that wrote a later timer in the
// meantime is kept.
func (s *Service) signalCancel(ctx context.Context, ref jobstore.MsgRef, lr leaseRef) error {
	j, rev, err := s.store.Get(ctx, ref.JobID)
	if err != nil {
		return err
	}
	j.Rev = rev // staleOrEarly compares it with the message's base revision
	if j.State != ojs.StateActive || j.Internal.Token != ref.Token {
		return staleOrEarly(j, ref)
	}
	c := s.attemptOf(j)
	now := s.now()
	if lr.lastBeat.IsZero() {
		lr.lastBeat = j.StartedAt.Time
	}
	if lr.beat <= 0 {
		lr.beat = c.beat
	}
	if now.Before(c.soft) {
		now = c.soft // the server's clock fired the signal: the execution timeout passed
	}
	at, kind := c.next(lr.lastBeat, lr.beat, now)
	if _, err := s.store.CreateTimer(ctx, topology.TimerLease, j.ID, ref.Token, at,
		leaseHeaders(kind, lr.lastBeat, lr.beat)...); err != nil {
		return err
	}
	b, err := json.Marshal(cancelSignal{
		JobID: j.ID, Type: j.Type, Queue: j.Queue, WorkerID: j.WorkerID, Attempt: j.Attempt,
		Reason: "execution_timeout", Deadline: ojs.NewTime(c.hard),
	})
	if err != nil {
		return err
	}
	if err := s.nc.Publish(topology.CancelSignalSubject(j.Queue, j.ID), b); err != nil {
		s.log.Warn("cancel signal not published", "job", j.ID, "error", err)
	}
	s.log.Info("job reached its execution timeout; worker told to cancel", "job", j.ID, "queue", j.Queue,
		"grace_until", c.hard)
	return nil
}

func fmtSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		n := int64(d / time.Second)
		if n == 1 {
			return "1 second"
		}
		return strconv.FormatInt(n, 10) + " seconds"
	}
	return d.Round(time.Millisecond).String()
}
