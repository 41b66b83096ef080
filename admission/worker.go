package admission

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Ack completes an active job. A job that is not active (already acked,
// stalled, cancelled) is a StateError: 409 for the worker.
func (s *Service) Ack(ctx context.Context, req ojs.AckRequest) (*ojs.AckResult, error) {
	nj, old, err := s.transition(ctx, req.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateActive {
			return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State, Expected: ojs.StateActive, Op: "acknowledge"}
		}
		now := s.now()
		nj := j.Clone()
		nj.State = ojs.StateCompleted
		nj.CompletedAt = ojs.NewTime(now)
		if len(req.Result) > 0 && string(req.Result) != "null" {
			nj.Result = json.RawMessage(req.Result)
		}
		nj.Internal.Token = jobstore.NewToken()
		nj.Internal.LeaseUntil = nil
		nj.Internal.Limits = nil
		clearHeld(nj)
		return nj, nil, nil
	})
	if err != nil {
		return nil, err
	}
	s.releaseLease(old)
	s.releaseLimits(ctx, old)
	s.releaseDepth(nj)
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
	s.events.PublishJob(EventJobCompleted, nj, nil)
	return &ojs.AckResult{JobID: nj.ID, State: nj.State, CompletedAt: nj.CompletedAt}, nil
}

// Nack records a failed attempt: the job is retried after its backoff, or
// discarded (dead letter) when attempts are exhausted or the error is not
// retryable.
func (s *Service) Nack(ctx context.Context, req ojs.NackRequest) (*ojs.NackResult, error) {
	nj, old, err := s.transition(ctx, req.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateActive {
			return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State, Expected: ojs.StateActive, Op: "fail"}
		}
		nj, pre := s.failed(j, req.Error)
		return nj, pre, nil
	})
	if err != nil {
		return nil, err
	}
	s.releaseLease(old)
	s.releaseLimits(ctx, old)
	s.holdKey(ctx, old, req.Error)
	s.releaseDepth(nj)
	s.afterFailure(ctx, nj)
	res := &ojs.NackResult{JobID: nj.ID, State: nj.State, Attempt: nj.Attempt, MaxAttempts: nj.MaxAttempts}
	if nj.State == ojs.StateRetryable {
		res.NextAttemptAt = nj.NextAttemptAt
	} else {
		res.DiscardedAt = nj.DiscardedAt
	}
	return res, nil
}

// failed computes the record after a failed attempt of active job j, and
// the message it relies on: the retry timer, or the dead letter index.
func (s *Service) failed(j *ojs.Job, e ojs.JobError) (*ojs.Job, func(context.Context, *ojs.Job) error) {
	now := s.now()
	policy := ojs.DefaultRetryPolicy()
	if j.Retry != nil {
		policy = *j.Retry
	}
	maxAttempts := j.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = policy.MaxAttempts
	}
	e.Attempt = j.Attempt
	e.At = ojs.NewTime(now)
	nj := j.Clone()
	nj.Error = &e
	nj.Errors = append(nj.Errors, e)
	nj.MaxAttempts = maxAttempts
	nj.Internal.Token = jobstore.NewToken()
	nj.Internal.LeaseUntil = nil
	nj.Internal.Limits = nil
	clearHeld(nj)
	retry := (e.Retryable == nil || *e.Retryable) && !policy.NonRetryable(e.Kind()) && j.Attempt < maxAttempts
	if retry {
		next := now.Add(policy.Delay(j.Attempt))
		nj.State = ojs.StateRetryable
		nj.NextAttemptAt = ojs.NewTime(next)
		return nj, func(ctx context.Context, nj *ojs.Job) error {
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
	s.met.JobDiscarded(ctx, nj.Queue, nj.Type, d)
	s.events.PublishJob(EventJobDiscarded, nj, nil)
}

// runTime is how long the job's last attempt ran, until now.
func runTime(j *ojs.Job) time.Duration {
	if j.StartedAt == nil {
		return 0
	}
	return time.Since(j.StartedAt.Time)
}

// Heartbeat extends the visibility timeout of the worker's active jobs and
// answers the worker's directive. Jobs that are no longer active, or are
// held by another worker, are left out of the extended list.
func (s *Service) Heartbeat(ctx context.Context, req ojs.HeartbeatRequest) (*ojs.HeartbeatResult, error) {
	res := &ojs.HeartbeatResult{State: ojs.WorkerRunning, Extended: []string{}, ServerTime: s.now()}
	for _, id := range req.JobIDs {
		ok, err := s.extend(ctx, id, req)
		if err != nil {
			return nil, err
		}
		if ok {
			res.Extended = append(res.Extended, id)
		}
	}
	return res, nil
}

// extend pushes an active job's lease timer forward. The timer keeps the
// token of the job's activation, so the record does not change.
func (s *Service) extend(ctx context.Context, id string, req ojs.HeartbeatRequest) (bool, error) {
	j, _, err := s.store.Get(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if j.State != ojs.StateActive || (req.WorkerID != "" && j.WorkerID != "" && j.WorkerID != req.WorkerID) {
		return false, nil
	}
	vis := req.VisibilityTimeout
	if vis <= 0 {
		vis = j.VisibilityTimeout(s.cfg.DefaultVisibilityTimeout)
	}
	if err := s.store.SetTimer(ctx, topology.TimerLease, j.ID, j.Internal.Token, s.now().Add(vis)); err != nil {
		return false, err
	}
	return true, nil
}
