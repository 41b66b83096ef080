package admission

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// EventPriorityChanged is emitted when a job's priority is updated after
// enqueue (ojs-priority.md 11.1, PRI-R004).
const EventPriorityChanged = "priority.changed"

// SetPriority changes the priority of an available or scheduled job
// (ojs-priority.md 8.1, PRI-R001); other states are a StateError (409).
//
// It is one transition of the job. An available job gets a fresh token and
// a ready message on its new level, published before the compare-and-swap:
// its old message turns stale, so a fetch racing the change hands the job
// out at its old or at its new priority, never twice, never not at all. It
// joins the back of its new level. A scheduled job keeps its timer, which
// makes it available at the new priority when due.
func (s *Service) SetPriority(ctx context.Context, id string, priority int) (*ojs.PriorityChange, error) {
	nj, old, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		switch j.State {
		case ojs.StateAvailable:
			nj := j.Clone()
			nj.Priority = priority
			nj.Internal.Token = jobstore.NewToken()
			return nj, s.store.PublishReady, nil
		case ojs.StateScheduled:
			nj := j.Clone()
			nj.Priority = priority
			return nj, nil, nil
		}
		return nil, nil, &ojs.StateError{JobID: j.ID, Current: j.State,
			Op: "change the priority (allowed for available and scheduled jobs) of"}
	})
	if err != nil {
		return nil, err
	}
	if nj.Priority != old.Priority {
		s.events.PublishJob(EventPriorityChanged, nj, map[string]any{
			"job_id": nj.ID, "previous_priority": old.Priority, "new_priority": nj.Priority,
		})
		s.met.PriorityChanged(ctx, nj.Queue)
	}
	return &ojs.PriorityChange{ID: nj.ID, Priority: nj.Priority, PreviousPriority: old.Priority}, nil
}
