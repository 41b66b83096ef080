package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Deadlines of a job as a whole: expires_at and the enqueue TTL (until the
// first start) and the total timeout (until the job ends). One expire timer
// per job stands at the earliest of them that still applies; see
// timeouts.go.

// deadline is one of a job's whole-life deadlines.
type deadline struct {
	kind  string // errExpired, errTTLExpired or errTotalTimeout
	at    time.Time
	limit time.Duration
}

// deadlines returns the deadlines that apply to j in its current state.
func deadlines(j *ojs.Job) []deadline {
	var out []deadline
	if j.State != ojs.StateActive {
		if j.ExpiresAt != nil {
			out = append(out, deadline{kind: errExpired, at: j.ExpiresAt.Time})
		}
		if at, ok := j.TTLDeadline(); ok {
			out = append(out, deadline{kind: errTTLExpired, at: at, limit: time.Duration(j.EnqueueTTLMs) * time.Millisecond})
		}
	}
	if at, ok := j.TotalDeadline(); ok {
		out = append(out, deadline{kind: errTotalTimeout, at: at, limit: time.Duration(j.TotalTimeoutMs) * time.Millisecond})
	}
	return out
}

// expiry returns the earliest deadline of j that passed by now.
func (s *Service) expiry(j *ojs.Job, now time.Time) (deadline, bool) {
	var first deadline
	found := false
	for _, d := range deadlines(j) {
		if !now.Before(d.at) && (!found || d.at.Before(first.at)) {
			first, found = d, true
		}
	}
	return first, found
}

// nextExpiry returns the earliest deadline of j after after (every
// deadline, for the zero time).
func nextExpiry(j *ojs.Job, after time.Time) (time.Time, bool) {
	var next time.Time
	for _, d := range deadlines(j) {
		if d.at.After(after) && (next.IsZero() || d.at.Before(next)) {
			next = d.at
		}
	}
	return next, !next.IsZero()
}

// expireToken is the token of expire timers: their handler decides from
// the record's deadlines alone, so the timer outlives transitions.
const expireToken = "expire"

// armExpiry writes the first expire timer of a new job, unless the job id
// already has one (a duplicate id: the existing job's timer stays).
func (s *Service) armExpiry(ctx context.Context, j *ojs.Job) error {
	at, ok := nextExpiry(j, time.Time{})
	if !ok {
		return nil
	}
	_, err := s.store.CreateTimer(ctx, topology.TimerExpire, j.ID, expireToken, at)
	return err
}

// expire computes the discarded record of job j whose deadline d passed,
// and the dead letter index entry that goes first.
func (s *Service) expire(j *ojs.Job, d deadline) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
	now := s.now()
	var e ojs.JobError
	switch d.kind {
	case errExpired:
		e = ojs.JobError{Code: errExpired, Type: errExpired,
			Message: "job expired at " + j.ExpiresAt.String() + " before it could start"}
	case errTTLExpired:
		e = timeoutError(errTTLExpired, kindTTL,
			fmt.Sprintf("Job was not started within its enqueue TTL of %s", fmtSeconds(d.limit)),
			d.limit, now.Sub(j.CreatedAt.Time))
	default:
		e = timeoutError(errTotalTimeout, kindTotal,
			fmt.Sprintf("Job exceeded its total timeout of %s", fmtSeconds(d.limit)),
			d.limit, now.Sub(j.CreatedAt.Time))
	}
	e.At = ojs.NewTime(now)
	nj := j.Clone()
	if j.State == ojs.StateActive {
		e.Attempt = j.Attempt
		nj.Errors = ojs.AppendError(nj.Errors, e, s.sizes.Errors)
	}
	nj.Error = &e
	nj.State = ojs.StateDiscarded
	nj.DiscardedAt = ojs.NewTime(now)
	nj.NextAttemptAt = nil
	endAttempt(nj)
	return nj, func(ctx context.Context, nj *ojs.Job) error {
		return s.store.PutDead(ctx, jobstore.DeadEntry{JobID: nj.ID, Queue: nj.Queue, DiscardedAt: nj.DiscardedAt})
	}, nil
}

// expired finishes the expiry of old into nj: what it held is given back,
// and the stats, metrics and events recorded.
func (s *Service) expired(ctx context.Context, old, nj *ojs.Job) {
	var ran time.Duration
	if old.State == ojs.StateActive {
		s.releaseLease(old)
		s.releaseLimits(ctx, old)
		s.beats.done(old.ID)
		ran = runTime(old)
	}
	s.releaseDepth(nj)
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	if nj.Error.Type == errExpired {
		s.met.JobExpired(ctx, nj.Queue, nj.Type)
		s.events.PublishJob(EventJobExpired, nj, nil)
	} else {
		s.timedOut(ctx, nj, *nj.Error, ran)
	}
	s.met.JobDiscarded(ctx, nj.Queue, nj.Type, ran)
	s.events.PublishJob(EventJobDiscarded, nj, nil)
}

// errNotDue marks an expire timer that fired before any deadline of its
// job passed (a deadline moved, or the TTL no longer applies).
var errNotDue = errors.New("no deadline passed yet")

// expireFired handles a job's expire timer.
func (s *Service) expireFired(ctx context.Context, id string) error {
	var cur *ojs.Job
	nj, old, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		cur = j
		if j.State.Terminal() {
			return nil, nil, errStale
		}
		d, ok := s.expiry(j, s.now())
		if !ok {
			return nil, nil, errNotDue
		}
		return s.expire(j, d)
	})
	if errors.Is(err, errNotDue) {
		if at, ok := nextExpiry(cur, s.now()); ok {
			return s.store.SetTimer(ctx, topology.TimerExpire, id, expireToken, at)
		}
		return nil
	}
	if err != nil {
		return err
	}
	s.expired(ctx, old, nj)
	return nil
}

// rearmExpiry moves j's expire timer to its next deadline, or cancels it
// when none is left (PATCH of its timeouts).
func (s *Service) rearmExpiry(ctx context.Context, j *ojs.Job) error {
	if at, ok := nextExpiry(j, s.now()); ok {
		return s.store.SetTimer(ctx, topology.TimerExpire, j.ID, expireToken, at)
	}
	if _, ok := s.expiry(j, s.now()); ok {
		return s.store.SetTimer(ctx, topology.TimerExpire, j.ID, expireToken, s.now())
	}
	s.store.CancelTimer(topology.TimerExpire, j.ID)
	return nil
}

// PatchJob changes the timeouts (and, if priority is set, the priority) of
// a pending, scheduled or available job in one compare-and-swap
// (ojs-timeouts.md 12.3; the priority follows SetPriority's rules: only
// scheduled and available jobs). The job's expire timer follows its new
// deadlines. It returns the new record and the old priority.
func (s *Service) PatchJob(ctx context.Context, id string, tp *ojs.TimeoutPatch, priority *int) (*ojs.Job, int, error) {
	nj, old, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		switch j.State {
		case ojs.StatePending, ojs.StateScheduled, ojs.StateAvailable:
		default:
			return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State,
				Op: "change the timeouts (allowed for pending, scheduled and available jobs) of"}
		}
		nj := j.Clone()
		if tp != nil {
			if err := tp.Apply(nj); err != nil {
				return nil, nil, err
			}
		}
		if priority == nil || *priority == j.Priority {
			return nj, nil, nil
		}
		switch j.State {
		case ojs.StateAvailable:
			nj.Priority = *priority
			nj.Internal.Token = jobstore.NewToken()
			return nj, s.store.PublishReady, nil
		case ojs.StateScheduled:
			nj.Priority = *priority
			return nj, nil, nil
		}
		return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State,
			Op: "change the priority (allowed for available and scheduled jobs) of"}
	})
	if err != nil {
		return nil, 0, err
	}
	if err := s.rearmExpiry(ctx, nj); err != nil {
		s.log.Warn("expire timer not moved; the old one fires and re-arms", "job", nj.ID, "error", err)
	}
	if nj.Priority != old.Priority {
		s.priorityChanged(ctx, old, nj)
	}
	return nj, old.Priority, nil
}
