package admission

import (
	"context"
	"strconv"

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
		s.priorityChanged(ctx, old, nj)
	}
	return &ojs.PriorityChange{ID: nj.ID, Priority: nj.Priority, PreviousPriority: old.Priority}, nil
}

// priorityChanged records a priority change from old to nj.
func (s *Service) priorityChanged(ctx context.Context, old, nj *ojs.Job) {
	if nj.State == ojs.StateAvailable {
		s.stats.move(nj.Queue, old.Priority, ojs.StateAvailable, "")
		s.stats.move(nj.Queue, nj.Priority, "", ojs.StateAvailable)
		s.notify.ready(nj.Queue)
	}
	s.events.PublishJob(EventPriorityChanged, nj, map[string]any{
		"job_id": nj.ID, "previous_priority": old.Priority, "new_priority": nj.Priority,
	})
	s.met.PriorityChanged(ctx, nj.Queue)
}

// PriorityStats counts a queue's available jobs per priority (PRI-R003):
// each level's ready messages, less those an active job's claim still
// holds, plus the jobs parked on a rate limit at that level (stats.go).
// Jobs waiting on a rate limit are available and counted.
func (s *Service) PriorityStats(ctx context.Context, queue string) (*ojs.PriorityStats, error) {
	if _, ok := s.queues.get(queue); !ok {
		if _, err := s.store.GetQueue(ctx, queue); err != nil {
			return nil, err
		}
	}
	c, err := s.queueCounts(ctx, queue)
	if err != nil {
		return nil, err
	}
	out := &ojs.PriorityStats{Queue: queue, CountsByPriority: make(map[string]int64, len(c.levels))}
	for p, n := range c.levels {
		out.CountsByPriority[strconv.Itoa(p)] = n
		out.Total += n
	}
	return out, nil
}

// PriorityDepths reports every queue's available jobs per priority, for
// the ojs.queue.available_by_priority gauge; queues whose numbers cannot
// be read are left out of that scrape.
func (s *Service) PriorityDepths(ctx context.Context) map[string]map[int]int64 {
	out := map[string]map[int]int64{}
	for q, c := range s.allQueueCounts(ctx) {
		out[q] = c.levels
	}
	return out
}
