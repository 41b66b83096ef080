package httpbind

import (
	"context"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
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
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			s.writeJSON(w, r, http.StatusOK, st)
		}, s.cfg.MaxBodyBytes},
	}
}

// patchJob is PATCH /ojs/v1/jobs/{id} {"priority": N} (PRI-R001): 200
// {"id","priority","previous_priority"}; 409 naming the state for a job
// that is not available or scheduled.
func (s *server) patchJob(w http.ResponseWriter, r *http.Request, pb PriorityBackend) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := readObject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := onlyFields(o, "priority"); err != nil {
		s.writeError(w, r, err) // only the priority can be changed
		return
	}
	raw, ok := o.get("priority")
	if !ok {
		s.writeError(w, r, invalid("priority", "an integer from 0 to 999", "nothing"))
		return
	}
	p, err := ojs.ParsePriority(raw, "priority")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := pb.SetPriority(r.Context(), id, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}
