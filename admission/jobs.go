package admission

import (
	"context"
	"errors"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Get returns a job by id.
func (s *Service) Get(ctx context.Context, id string) (*ojs.Job, error) {
	j, _, err := s.store.Get(ctx, id)
	return j, err
}

// Cancel moves a job that has not finished to cancelled. Pending messages
// and timers of the job become stale with the token change.
func (s *Service) Cancel(ctx context.Context, id string) (*ojs.Job, ojs.State, error) {
	nj, old, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if !ojs.CanTransition(j.State, ojs.StateCancelled) {
			return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State, Op: "cancel"}
		}
		nj := j.Clone()
		nj.State = ojs.StateCancelled
		nj.CancelledAt = ojs.NewTime(s.now())
		endAttempt(nj)
		return nj, nil, nil
	})
	if err != nil {
		return nil, "", err
	}
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	s.releaseDepth(nj)
	if old.State == ojs.StateActive {
		s.met.JobCancelled(ctx, nj.Queue, nj.Type, runTime(old))
	} else {
		s.met.JobCancelled(ctx, nj.Queue, nj.Type, 0)
	}
	switch old.State {
	case ojs.StateActive:
		s.releaseLease(old)
		s.releaseLimits(ctx, old)
	case ojs.StateScheduled, ojs.StateRetryable:
		s.store.CancelTimer(topology.TimerDue, id)
	}
	s.events.PublishJob(EventJobCancelled, nj, map[string]any{"previous_state": old.State})
	return nj, old.State, nil
}

// Activate makes a pending job available.
func (s *Service) Activate(ctx context.Context, id string) (*ojs.Job, error) {
	nj, _, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StatePending {
			return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State, Expected: ojs.StatePending, Op: "activate"}
		}
		now := s.now()
		nj := s.ready(j, now)
		nj.ActivatedAt = ojs.NewTime(now)
		return nj, s.store.PublishReady, nil
	})
	if err != nil {
		return nil, err
	}
	s.stats.move(nj.Queue, nj.Priority, ojs.StatePending, nj.State)
	s.notify.ready(nj.Queue)
	s.events.PublishJob(EventJobEnqueued, nj, nil)
	return nj, nil
}

// ready computes the available record of j with a fresh token. A job made
// available again after a terminal state (a dead letter retry) has no
// completed_at any more, and no retry_delay_ms: no backoff preceded it.
func (s *Service) ready(j *ojs.Job, now time.Time) *ojs.Job {
	nj := j.Clone()
	nj.State = ojs.StateAvailable
	nj.EnqueuedAt = ojs.NewTime(now)
	nj.NextAttemptAt = nil
	nj.CompletedAt = nil
	if j.State == ojs.StateDiscarded {
		nj.RetryDelayMs = nil
	}
	endAttempt(nj)
	return nj
}

func isNotFound(err error) bool { return errors.Is(err, ojs.ErrNotFound) }
