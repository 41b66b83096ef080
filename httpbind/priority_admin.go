package httpbind

import (
	"context"
	"net/http"

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

var decodeAging = wire.DecodeAging

// pathGroup reads and checks the {group} path variable.
func pathGroup(r *http.Request) (string, error) { return groupName(r, "group", "group", "group") }

func groupName(r *http.Request, v, field, what string) (string, error) {
	return wire.GroupName(mux.Vars(r)[v], field, what)
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

var decodeGroup = wire.DecodeGroup

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
