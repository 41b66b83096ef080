package httpbind

import (
	"context"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// PriorityBackend is what PATCH /ojs/v1/jobs/{id} asks of the layer
// below (ojs-priority.md 8.1, 10.2). A Backend that also implements it
// gets the route.
type PriorityBackend interface {
	SetPriority(ctx context.Context, id string, priority int) (*ojs.PriorityChange, error)
	PriorityStats(ctx context.Context, queue string) (*ojs.PriorityStats, error)
}

func (s *server) priorityRoutes() []route {
	pb, ok := s.b.(PriorityBackend)
	if !ok {
		return nil
	}
	return []route{
		{http.MethodPatch, "/ojs/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
			s.patchJob(w, r, pb)
		}, s.cfg.MaxBodyBytes},
		{http.MethodGet, "/ojs/v1/queues/{name}/priority-stats", func(w http.ResponseWriter, r *http.Request) {
			name, err := pathQueue(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			st, err := pb.PriorityStats(r.Context(), name)
			s.answer(w, r, st, err)
		}, s.cfg.MaxBodyBytes},
	}
}

// TimeoutBackend is what PATCH /ojs/v1/jobs/{id} asks of the layer below
// to change a job's timeouts (ojs-timeouts.md 12.3), with its priority in
// the same compare-and-swap when both are given.
type TimeoutBackend interface {
	PatchJob(ctx context.Context, id string, tp *ojs.TimeoutPatch, priority *int) (*ojs.Job, int, error)
}

// patchJob is PATCH /ojs/v1/jobs/{id}.
//
//   - {"priority": N} (PRI-R001): 200 {"id","priority","previous_priority"};
//     409 naming the state for a job that is not available or scheduled.
//   - timeout fields (timeout, total_timeout, enqueue_ttl, grace_period,
//     heartbeat_timeout, their _ms forms; null resets one to the default),
//     with or without priority: 200 {"job": {...}, "previous_priority"};
//     409 for a job that is not pending, scheduled or available.
func (s *server) patchJob(w http.ResponseWriter, r *http.Request, pb PriorityBackend) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tb, timeouts := s.b.(TimeoutBackend)
	p, err := decodeBody(r, func(b []byte) (wire.Patch, error) { return wire.DecodePatch(b, timeouts) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if p.Timeouts == nil {
		res, err := pb.SetPriority(r.Context(), id, *p.Priority)
		s.answer(w, r, res, err)
		return
	}
	j, prev, err := tb.PatchJob(r.Context(), id, p.Timeouts, p.Priority)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wire.PatchReply{Job: j.Public(), PreviousPriority: prev})
}
