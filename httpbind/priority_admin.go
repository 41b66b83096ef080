package httpbind

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// PriorityAdminBackend is what the priority extension's admin endpoints
// ask of the layer below: per-queue aging (ojs-priority.md 8.2) and
// worker groups, the server-level default of queue consumption (7.3). A
// Backend that also implements it gets the routes.
type PriorityAdminBackend interface {
	QueueAging(ctx context.Context, queue string) (*ojs.QueueAging, error)
	// SetQueueAging sets a queue's aging; nil removes it.
	SetQueueAging(ctx context.Context, queue string, a *ojs.Aging) (*ojs.QueueAging, error)
	WorkerGroup(ctx context.Context, name string) (*ojs.WorkerGroup, error)
	WorkerGroups(ctx context.Context) ([]ojs.WorkerGroup, error)
	SetWorkerGroup(ctx context.Context, g ojs.WorkerGroup) (*ojs.WorkerGroup, error)
	DeleteWorkerGroup(ctx context.Context, name string) error
}

const (
	queueAgingPath  = "/ojs/v1/admin/queues/{name}/aging"
	workerGroupPath = "/ojs/v1/admin/worker-groups/{group}"
)

func (s *server) priorityAdminRoutes() []route {
	pb, ok := s.b.(PriorityAdminBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	h := priorityAdminHandlers{s: s, b: pb}
	return []route{
		{http.MethodGet, queueAgingPath, h.getAging, body},
		{http.MethodPut, queueAgingPath, h.putAging, body},
		{http.MethodDelete, queueAgingPath, h.deleteAging, body},
		{http.MethodGet, "/ojs/v1/admin/worker-groups", h.listGroups, body},
		{http.MethodGet, workerGroupPath, h.getGroup, body},
		{http.MethodPut, workerGroupPath, h.putGroup, body},
		{http.MethodDelete, workerGroupPath, h.deleteGroup, body},
	}
}

type priorityAdminHandlers struct {
	s *server
	b PriorityAdminBackend
}

// getAging is GET /ojs/v1/admin/queues/{name}/aging: {"queue","aging"},
// aging null when the queue has none.
func (h priorityAdminHandlers) getAging(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err == nil {
		var a *ojs.QueueAging
		if a, err = h.b.QueueAging(r.Context(), name); err == nil {
			h.s.writeJSON(w, r, http.StatusOK, a)
			return
		}
	}
	h.s.writeError(w, r, err)
}

// putAging is PUT /ojs/v1/admin/queues/{name}/aging:
// {"interval_ms" | "interval" (ISO 8601), "step"?, "min_priority"?}.
func (h priorityAdminHandlers) putAging(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	o, err := readObject(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	a, err := decodeAging(o)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.SetQueueAging(r.Context(), name, a)
	h.s.answer(w, r, res, err)
}

// deleteAging is DELETE /ojs/v1/admin/queues/{name}/aging.
func (h priorityAdminHandlers) deleteAging(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err == nil {
		var a *ojs.QueueAging
		if a, err = h.b.SetQueueAging(r.Context(), name, nil); err == nil {
			h.s.writeJSON(w, r, http.StatusOK, a)
			return
		}
	}
	h.s.writeError(w, r, err)
}

// decodeAging reads an aging object. The interval is given once, as
// interval_ms or as an ISO 8601 interval; both with different values is
// refused naming both (spec/README.md decision 2).
func decodeAging(o object) (*ojs.Aging, error) {
	if err := onlyFields(o, "interval_ms", "interval", "step", "min_priority"); err != nil {
		return nil, err
	}
	maxMs := ojs.MaxAgingInterval.Milliseconds()
	ms, err := o.Integer("interval_ms", 0, 1, maxMs)
	if err != nil {
		return nil, err
	}
	iso, err := o.Str("interval", false)
	if err != nil {
		return nil, err
	}
	a := ojs.Aging{Interval: time.Duration(ms) * time.Millisecond}
	if iso != "" {
		d, err := ojs.ParseISODuration(iso)
		if err != nil || d < ojs.MinAgingInterval || d > ojs.MaxAgingInterval {
			return nil, invalid("interval", "an ISO 8601 duration from PT0.001S to P30D", strconv.Quote(short(iso)))
		}
		if ms != 0 && d != a.Interval {
			return nil, &ojs.ValidationError{Field: "interval", Rule: "the same interval as interval_ms",
				Message: fmt.Sprintf("interval %q and interval_ms %d give different intervals: give one", iso, ms)}
		}
		a.Interval = d
	}
	if a.Interval == 0 {
		return nil, invalid("interval_ms", "an integer of milliseconds (or interval, an ISO 8601 duration)", "nothing")
	}
	step, err := o.Integer("step", ojs.DefaultAgingStep, 1, ojs.MaxPriority)
	if err != nil {
		return nil, err
	}
	minPrio, err := o.Integer("min_priority", 0, 0, ojs.MaxPriority)
	if err != nil {
		return nil, err
	}
	a.Step, a.MinPriority = int(step), int(minPrio)
	return &a, a.Validate("")
}

// pathGroup reads and checks the {group} path variable.
func pathGroup(r *http.Request) (string, error) { return groupName(r, "group", "group", "group") }

// groupName reads the path variable v, a worker group's (or pool's) name;
// a 400 names field and says what it names.
func groupName(r *http.Request, v, field, what string) (string, error) {
	name := mux.Vars(r)[v]
	if !ojs.ValidGroupName(name) {
		return "", invalid(field, "a "+what+` name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(short(name)))
	}
	return name, nil
}

// listGroups is GET /ojs/v1/admin/worker-groups: {"groups":[...]}.
func (h priorityAdminHandlers) listGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := h.b.WorkerGroups(r.Context())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"groups": gs})
}

// getGroup is GET /ojs/v1/admin/worker-groups/{group}.
func (h priorityAdminHandlers) getGroup(w http.ResponseWriter, r *http.Request) {
	name, err := pathGroup(r)
	if err == nil {
		var g *ojs.WorkerGroup
		if g, err = h.b.WorkerGroup(r.Context(), name); err == nil {
			h.s.writeJSON(w, r, http.StatusOK, g)
			return
		}
	}
	h.s.writeError(w, r, err)
}

// putGroup is PUT /ojs/v1/admin/worker-groups/{group}: {"strategy",
// "queues": [names] or [{"name","weight"}] (ojs-priority.md 7.3),
// "weights"?: {queue: weight}}. It creates or replaces the group.
func (h priorityAdminHandlers) putGroup(w http.ResponseWriter, r *http.Request) {
	name, err := pathGroup(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	o, err := readObject(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	g, err := decodeGroup(name, o)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.SetWorkerGroup(r.Context(), g)
	h.s.answer(w, r, res, err)
}

// decodeGroup reads the body of a PUT of group name.
func decodeGroup(name string, o object) (ojs.WorkerGroup, error) {
	g := ojs.WorkerGroup{Name: name}
	if err := onlyFields(o, "strategy", "queues", "weights"); err != nil {
		return g, err
	}
	strategy, err := o.Str("strategy", true)
	if err != nil {
		return g, err
	}
	queues, weights, err := groupQueues(o)
	if err != nil {
		return g, err
	}
	g.Strategy, g.Queues, g.Weights = strategy, queues, weights
	return g, g.Validate()
}

// groupQueues reads the queues of a worker group or pool body: "queues"
// (names, or {name, weight} objects; not empty) and "weights"
// ({queue: weight}, for listed queues).
func groupQueues(o object) ([]string, map[string]int, error) {
	queues, weights, err := wire.FetchQueues(o)
	if err != nil {
		return nil, nil, err
	}
	if len(queues) == 0 {
		return nil, nil, invalid("queues", "a non-empty array of queue names or of {name, weight} objects", describe(o["queues"]))
	}
	for i, q := range queues {
		if err := checkQueueName(fmt.Sprintf("queues[%d]", i), q); err != nil {
			return nil, nil, err
		}
	}
	if raw, ok := o.Get("weights"); ok {
		if weights, err = wire.WeightsObject(raw, weights); err != nil {
			return nil, nil, err
		}
	}
	return queues, weights, nil
}

// deleteGroup is DELETE /ojs/v1/admin/worker-groups/{group}:
// {"name","deleted":true}; 404 when there is no such group.
func (h priorityAdminHandlers) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name, err := pathGroup(r)
	if err == nil {
		if err = h.b.DeleteWorkerGroup(r.Context(), name); err == nil {
			h.s.writeJSON(w, r, http.StatusOK, map[string]any{"name": name, "deleted": true})
			return
		}
	}
	h.s.writeError(w, r, err)
}
