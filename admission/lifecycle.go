package admission

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Lifecycle is where a job's life meets a feature that is not the core
// (unique jobs today): admission calls Admit before it stores new jobs and
// JobChanged after it stored a state change. Implementations live in their
// own packages (admission/unique) and are passed in Config.Hooks.
//
// Both calls run on every enqueue and state change, so an implementation
// must return at once, without a JetStream round trip, for jobs that do
// not use its feature.
type Lifecycle interface {
	// Admit runs once per enqueue call (one job, or a whole batch in
	// order) after each job got its id, first state and created_at and
	// before anything of them is stored. An error refuses the whole call.
	// An Admission whose Existing[i] is set answers jobs[i] with that
	// existing job instead: jobs[i] is not created. Admit may change the
	// jobs (their first state, schedule and meta) but not their ids.
	Admit(ctx context.Context, jobs Jobs, batch []*ojs.Job) (Admission, error)
	// JobChanged runs after a state change of j (from a state) was stored
	// by an operation that reads and compare-and-swaps the record (cancel,
	// ack, nack, timeouts, expiry, retry, promotion). Claims by a fetch do
	// not call it; an implementation must not rely on seeing every change.
	JobChanged(ctx context.Context, j *ojs.Job, from ojs.State)
}

// Admission is a Lifecycle's answer to Admit.
type Admission struct {
	// Existing is nil or holds, per job of the batch, the existing job
	// that answers it (nil: the job is created).
	Existing []*ojs.Job
	// Done, when set, is called once with the outcome of the create
	// (nil: every job not answered by Existing is stored).
	Done func(ctx context.Context, err error)
}

// Jobs is what a Lifecycle may do to existing jobs: the operations the
// HTTP API offers, with their checks, events and counters.
type Jobs interface {
	Get(ctx context.Context, id string) (*ojs.Job, error)
	Cancel(ctx context.Context, id string) (*ojs.Job, ojs.State, error)
	SetPriority(ctx context.Context, id string, priority int) (*ojs.PriorityChange, error)
}

// admit runs every hook's Admit over batch. It returns the existing job
// answering each job (nil when no hook answers any) and a func to call
// with the outcome of the create.
func (s *Service) admit(ctx context.Context, batch []*ojs.Job) (existing []*ojs.Job, done func(error), err error) {
	var dones []func(context.Context, error)
	finish := func(err error) {
		for _, d := range dones {
			d(context.WithoutCancel(ctx), err)
		}
	}
	for _, h := range s.cfg.Hooks {
		a, err := h.Admit(ctx, s, batch)
		if err != nil {
			finish(err)
			return nil, nil, err
		}
		if a.Done != nil {
			dones = append(dones, a.Done)
		}
		for i, e := range a.Existing {
			if e == nil {
				continue
			}
			if existing == nil {
				existing = make([]*ojs.Job, len(batch))
			}
			existing[i] = e
		}
	}
	return existing, finish, nil
}

// changed tells every hook of a stored state change.
func (s *Service) changed(ctx context.Context, j *ojs.Job, from ojs.State) {
	if j.State == from {
		return
	}
	for _, h := range s.cfg.Hooks {
		h.JobChanged(ctx, j, from)
	}
}
