package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Ack completes an active job. A job that is not active (already acked,
// stalled, cancelled) is a StateError: 409 for the worker.
func (s *Service) Ack(ctx context.Context, req ojs.AckRequest) (*ojs.AckResult, error) {
	// The record budget (issue 31): a result within its part of the
	// reserve always lands; a larger one if the job's record has room.
	small := s.sizes.CheckResult(req.Result)
	nj, old, err := s.transition(ctx, req.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if !answers(j, req.Attempt, req.WorkerID) {
			return nil, nil, lateResult(j, "acknowledge", req.Attempt, req.WorkerID)
		}
		now := s.now()
		nj := j.Clone()
		nj.State = ojs.StateCompleted
		nj.CompletedAt = ojs.NewTime(now)
		if nj.Progress != nil {
			one := 1.0 // PRG-005: a completed job is done
			nj.Progress, nj.ProgressUpdatedAt = &one, ojs.NewTime(now)
		}
		if len(req.Result) > 0 && string(req.Result) != "null" {
			nj.Result = json.RawMessage(req.Result)
		}
		// The job succeeded: "error" (the last failed attempt's) no longer
		// describes it; the "errors" history keeps every attempt's error.
		nj.Error = nil
		endAttempt(nj)
		if !small {
			if err := s.sizes.CheckResultIn(nj); err != nil {
				return nil, nil, err
			}
		}
		return nj, nil, nil
	})
	if err != nil {
		return nil, err
	}
	s.releaseLease(old)
	s.releaseLimits(ctx, old)
	s.releaseDepth(nj)
	s.beats.done(old.ID)
	var d time.Duration
	if nj.StartedAt != nil {
		d = nj.CompletedAt.Sub(nj.StartedAt.Time)
	}
	s.stats.move(nj.Queue, nj.Priority, ojs.StateActive, ojs.StateCompleted)
	s.stats.sample(nj.Queue, func(smp *statSample) {
		smp.Completed++
		smp.DurationMs += d.Milliseconds()
	})
	s.met.JobCompleted(ctx, nj.Queue, nj.Type, d)
	s.met.JobExecuted(ctx, nj.Queue, nj.Type, "completed", d)
	s.events.PublishJob(EventJobCompleted, nj, nil)
	return &ojs.AckResult{ID: nj.ID, JobID: nj.ID, State: nj.State, CompletedAt: nj.CompletedAt}, nil
}

// Nack records a failed attempt: the job is retried after its backoff, or
// discarded (dead letter) when attempts are exhausted or the error is not
// retryable.
func (s *Service) Nack(ctx context.Context, req ojs.NackRequest) (*ojs.NackResult, error) {
	if req.Requeue {
		return s.requeue(ctx, req)
	}
	// The record budget's part for an error (issue 31), measured as the
	// error is stored: with its attempt, time and type.
	req.Error.Classify()
	stored := req.Error
	stored.Attempt, stored.At = math.MaxInt32, ojs.NewTime(s.now())
	if err := s.sizes.CheckError(stored); err != nil {
		return nil, err
	}
	var re reentry
	nj, old, err := s.transition(ctx, req.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if !answers(j, req.Attempt, req.WorkerID) {
			return nil, nil, lateResult(j, "fail", req.Attempt, req.WorkerID)
		}
		nj, pre := s.failed(j, req.Error, &re)
		return nj, pre, nil
	})
	s.done(&re, nj)
	if err != nil {
		return nil, err
	}
	s.releaseLease(old)
	s.releaseLimits(ctx, old)
	s.holdKey(ctx, old, req.Error)
	s.releaseDepth(nj)
	s.beats.done(old.ID)
	s.met.JobExecuted(ctx, nj.Queue, nj.Type, "failed", runTime(old))
	s.afterFailure(ctx, nj)
	res := &ojs.NackResult{ID: nj.ID, JobID: nj.ID, State: nj.State, Attempt: nj.Attempt, MaxAttempts: nj.MaxAttempts}
	if nj.State == ojs.StateRetryable {
		res.NextAttemptAt = nj.NextAttemptAt
		if nj.NextAttemptAt != nil {
			res.RetryDelayMs = millisUntil(s.now(), nj.NextAttemptAt.Time)
		}
	} else {
		res.DiscardedAt, res.CompletedAt = nj.DiscardedAt, nj.CompletedAt
	}
	return res, nil
}

// requeue hands an active job back (a nack with requeue, a worker shutting
// down: issue 32): in one compare-and-swap it is available again at once,
// with a fresh ready message written before it, as a retry that is due
// is. The attempt is not a failure: its count is given back (the next
// claim runs the same attempt number), no error is recorded and no backoff
// waits. Like a retry, the job retakes a unit of its bounded queue (or
// an overdraft unit when the queue is full) if its claim gave its unit up.
func (s *Service) requeue(ctx context.Context, req ojs.NackRequest) (*ojs.NackResult, error) {
	var re reentry
	nj, old, err := s.transition(ctx, req.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if !answers(j, req.Attempt, req.WorkerID) {
			return nil, nil, lateResult(j, "requeue", req.Attempt, req.WorkerID)
		}
		nj := s.ready(j, s.now())
		nj.Attempt = max(j.Attempt-1, 0)
		nj.Progress, nj.ProgressData, nj.ProgressMessage, nj.ProgressUpdatedAt = nil, nil, "", nil
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			if err := s.take(ctx, &re, nj); err != nil {
				return err
			}
			return s.store.PublishReady(ctx, nj)
		}, nil
	})
	s.done(&re, nj)
	if err != nil {
		return nil, err
	}
	s.releaseLease(old)
	s.releaseLimits(ctx, old)
	s.beats.done(old.ID)
	s.met.JobExecuted(ctx, nj.Queue, nj.Type, "requeued", runTime(old))
	s.stats.move(nj.Queue, nj.Priority, ojs.StateActive, nj.State)
	s.notify.ready(nj.Queue)
	s.events.PublishJob(EventJobEnqueued, nj, map[string]any{"requeued": true, "previous_state": ojs.StateActive})
	return &ojs.NackResult{ID: nj.ID, JobID: nj.ID, State: nj.State, Attempt: nj.Attempt,
		MaxAttempts: nj.MaxAttempts, Requeued: true}, nil
}

// millisUntil is the time from now to t in milliseconds, rounded up, at
// least 0: a retry_delay_ms.
func millisUntil(now, t time.Time) *int64 {
	ms := int64((max(t.Sub(now), 0) + time.Millisecond - 1) / time.Millisecond)
	return &ms
}

// failed computes the record after a failed attempt of active job j, and
// what it relies on: for a retry the unit of its bounded queue (taken into
// re, see take) and the retry timer, or else the dead letter index.
func (s *Service) failed(j *ojs.Job, e ojs.JobError, re *reentry) (*ojs.Job, func(context.Context, *ojs.Job) error) {
	now := s.now()
	policy := ojs.DefaultRetryPolicy()
	if j.Retry != nil {
		policy = *j.Retry
	}
	maxAttempts := j.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = policy.MaxAttempts
	}
	e.Classify()
	e.Attempt = j.Attempt
	e.At = ojs.NewTime(now)
	nj := j.Clone()
	nj.Error = &e
	nj.Errors = ojs.AppendError(nj.Errors, e, s.sizes.Errors)
	nj.MaxAttempts = maxAttempts
	endAttempt(nj)
	retry := (e.Retryable == nil || *e.Retryable) && !policy.NonRetryable(e.Kind()) && j.Attempt < maxAttempts
	// A backoff of a few hundred years ends at the latest time JetStream
	// can schedule, not past it (where it would wrap around).
	next := ojs.Schedulable(now.Add(policy.Delay(j.Attempt)))
	if end, ok := j.TotalDeadline(); retry && ok {
		// ojs-timeouts.md 9.1: a retry that cannot finish before the total
		// timeout is not scheduled; the total timeout wins over
		// max_attempts.
		if exec := j.ExecutionTimeout(s.cfg.DefaultTimeout); next.Add(exec).After(end) {
			limit := time.Duration(j.TotalTimeoutMs) * time.Millisecond
			te := timeoutError(errTotalTimeout, kindTotal, fmt.Sprintf(
				"Job exceeded its total timeout of %s: a retry at %s with timeout %s could not finish by %s",
				fmtSeconds(limit), next.UTC().Format(time.RFC3339), fmtSeconds(exec), end.UTC().Format(time.RFC3339)),
				limit, now.Sub(j.CreatedAt.Time))
			te.At = e.At
			nj.Error = &te
			retry = false
		}
	}
	if retry {
		nj.State = ojs.StateRetryable
		nj.NextAttemptAt = ojs.NewTime(next)
		// The backoff before the next attempt, which that attempt's
		// fetch carries (issue 32), in milliseconds rounded up.
		nj.RetryDelayMs = millisUntil(now, next)
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			if err := s.take(ctx, re, nj); err != nil {
				return err
			}
			return s.store.SetJobTimer(ctx, topology.TimerDue, nj, next)
		}
	}
	nj.State = ojs.StateDiscarded
	nj.DiscardedAt = ojs.NewTime(now)
	nj.NextAttemptAt = nil
	return nj, func(ctx context.Context, nj *ojs.Job) error {
		return s.store.PutDead(ctx, jobstore.DeadEntry{JobID: nj.ID, Queue: nj.Queue, DiscardedAt: nj.DiscardedAt})
	}
}

func (s *Service) afterFailure(ctx context.Context, nj *ojs.Job) {
	s.stats.move(nj.Queue, nj.Priority, ojs.StateActive, nj.State)
	s.stats.sample(nj.Queue, func(smp *statSample) { smp.Failed++ })
	d := runTime(nj)
	s.events.PublishJob(EventJobFailed, nj, nil)
	if nj.State == ojs.StateRetryable {
		// metrics: JobFailed is an attempt that will be retried,
		// JobDiscarded a job that failed for good.
		s.met.JobFailed(ctx, nj.Queue, nj.Type, d)
		s.events.PublishJob(EventJobRetrying, nj, nil)
		return
	}
	if nj.Error != nil && nj.Error.TimeoutKind == kindTotal {
		s.timedOut(ctx, nj, *nj.Error, 0)
	}
	s.met.JobDiscarded(ctx, nj.Queue, nj.Type, d)
	s.events.PublishJob(EventJobDiscarded, nj, nil)
}

// answers reports whether a result for attempt (0: unsaid) from workerID
// ("": unsaid) answers active job j's current attempt.
func answers(j *ojs.Job, attempt int, workerID string) bool {
	return j.State == ojs.StateActive && (attempt <= 0 || attempt == j.Attempt) &&
		(workerID == "" || j.WorkerID == "" || workerID == j.WorkerID)
}

// lateResult is the 409 of an ack or nack (op) for job j that is not the
// active attempt it answers: the server timed the attempt out, or it was
// cancelled, or another attempt runs now. Nothing changes.
func lateResult(j *ojs.Job, op string, attempt int, workerID string) error {
	err := &ojs.StateError{JobID: j.ID, Current: j.State, Expected: ojs.StateActive, Op: op}
	switch {
	case j.State == ojs.StateActive && attempt > 0 && attempt != j.Attempt:
		err.Reason = fmt.Sprintf("the result is for attempt %d, but attempt %d is running now", attempt, j.Attempt)
	case j.State == ojs.StateActive:
		err.Reason = fmt.Sprintf("the job is held by worker '%s', not '%s'", j.WorkerID, workerID)
	case j.Error != nil && j.Error.TimeoutKind != "" && (j.State == ojs.StateRetryable || j.State == ojs.StateDiscarded):
		err.Reason = fmt.Sprintf("the server ended attempt %d at %s (%s timeout: %s); the late result was not applied",
			j.Error.Attempt, j.Error.At, j.Error.TimeoutKind, j.Error.Message)
	}
	return err
}

// runTime is how long the job's last attempt ran, until now.
func runTime(j *ojs.Job) time.Duration {
	if j.StartedAt == nil {
		return 0
	}
	return time.Since(j.StartedAt.Time)
}

// Heartbeat extends the heartbeat deadline of the worker's active jobs and
// answers the worker's directive, with the jobs whose execution timeout
// passed (the worker should cancel them within their grace period). Jobs
// that are no longer active, or are held by another worker, are left out
// of the extended list.
func (s *Service) Heartbeat(ctx context.Context, req ojs.HeartbeatRequest) (*ojs.HeartbeatResult, error) {
	res := &ojs.HeartbeatResult{State: ojs.WorkerRunning, Extended: []string{}, Cancel: []string{}, ServerTime: s.now()}
	for _, id := range req.JobIDs {
		ok, cancel, err := s.extend(ctx, id, req.WorkerID, req.VisibilityTimeout)
		if err != nil {
			return nil, err
		}
		if ok {
			res.Extended = append(res.Extended, id)
		}
		if cancel {
			res.Cancel = append(res.Cancel, id)
		}
	}
	if w := s.cfg.Workers; w != nil {
		res.WorkerState = w.Beat(ctx, req)
		res.State = ojs.HeartbeatState(res.WorkerState)
	}
	return res, nil
}

// extend moves an active job's lease timer to its next deadline counted
// from now: the heartbeat timeout (vis, or the attempt's), unless the
// execution timeout or the end of the grace period comes first. The timer
// keeps the token of the job's activation, so the record does not change.
// cancel reports that the job's execution timeout passed.
func (s *Service) extend(ctx context.Context, id, workerID string, vis time.Duration) (ok, cancel bool, err error) {
	j, _, err := s.store.Get(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return false, false, nil
		}
		return false, false, err
	}
	if j.State != ojs.StateActive || (workerID != "" && j.WorkerID != "" && j.WorkerID != workerID) {
		return false, false, nil
	}
	return s.heartbeatJob(ctx, j, vis)
}
