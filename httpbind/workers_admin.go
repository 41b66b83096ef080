package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// WorkerBackend is what the worker lifecycle endpoints ask of the layer
// below: the worker registry (ojs-worker-protocol.md 4, ojs-admin-api.md
// 9, ojs-graceful-shutdown.md 5). A Backend that also implements it gets
// the routes.
type WorkerBackend interface {
	ListWorkers(ctx context.Context, page, perPage int) (*ojs.WorkerPage, error)
	Worker(ctx context.Context, id string) (*ojs.Worker, error)
	WorkerHealth(ctx context.Context, id string) (*ojs.WorkerHealth, error)
	// Directive sets an operator's "quiet" or "terminate" for a worker.
	Directive(ctx context.Context, id, directive string) (*ojs.Worker, error)
	// Deregister removes a stale worker.
	Deregister(ctx context.Context, id string) (*ojs.Worker, error)
}

func (s *server) workerRoutes() []route {
	wb, ok := s.b.(WorkerBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	h := workerHandlers{s: s, b: wb}
	return []route{
		{http.MethodPost, "/ojs/v1/workers/beat", h.beat, body},
		{http.MethodGet, "/ojs/v1/workers/{id}/health", h.health, body},
		{http.MethodGet, "/ojs/v1/admin/workers", h.list, body},
		{http.MethodGet, "/ojs/v1/admin/workers/{id}", h.get, body},
		{http.MethodDelete, "/ojs/v1/admin/workers/{id}", h.deregister, body},
		{http.MethodPost, "/ojs/v1/admin/workers/{id}/quiet", h.direct(ojs.WorkerQuiet), body},
		{http.MethodPost, "/ojs/v1/admin/workers/{id}/terminate", h.direct(ojs.WorkerTerminate), body},
	}
}

type workerHandlers struct {
	s *server
	b WorkerBackend
}

// beat is POST /ojs/v1/workers/beat: a heartbeat under the graceful
// shutdown extension's vocabulary. Same body as /workers/heartbeat, with
// "state": running | quiet | drain | terminate; the answer is
// {"acknowledged":true,"worker_id","state","jobs_extended",
// "jobs_to_cancel","server_time"}, where state is the state the worker is
// to be in (drain stays drain here).
func (h workerHandlers) beat(w http.ResponseWriter, r *http.Request) {
	req, err := decodeHeartbeat(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.s.b.Heartbeat(r.Context(), req)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.BeatReply(req, res))
}

func pathWorkerID(r *http.Request) (string, error) { return wire.WorkerID(mux.Vars(r)["id"], "id") }

// health is GET /ojs/v1/workers/{id}/health: {"worker_id","status":
// "healthy"|"stale","ready","state","reported_state","directive"?,
// "active_jobs","last_seen_at","last_heartbeat_at"?,"seconds_since_seen"}.
func (h workerHandlers) health(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkerID(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.WorkerHealth(r.Context(), id)
	h.s.answer(w, r, res, err)
}

// list is GET /ojs/v1/admin/workers?page=&per_page= (ojs-admin-api.md
// 9.1): {"items","summary","pagination":{"total","page","per_page"}}.
func (h workerHandlers) list(w http.ResponseWriter, r *http.Request) {
	page, per, err := parseAdminPage(r.URL.Query())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.ListWorkers(r.Context(), page, per)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.WorkerListReply(res, page, per))
}

// get is GET /ojs/v1/admin/workers/{id} (9.2): the worker with its
// active job ids from its last heartbeat.
func (h workerHandlers) get(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkerID(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.Worker(r.Context(), id)
	h.s.answer(w, r, res, err)
}

// direct is POST /ojs/v1/admin/workers/{id}/quiet (9.3) and
// .../terminate: the worker's next heartbeat, answered by any jetgate
// process, says the directive. Answers the worker.
func (h workerHandlers) direct(directive string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathWorkerID(r)
		if err != nil {
			h.s.writeError(w, r, err)
			return
		}
		res, err := h.b.Directive(r.Context(), id, directive)
		h.s.answer(w, r, res, err)
	}
}

// deregister is DELETE /ojs/v1/admin/workers/{id} (9.4): removes a stale
// worker (409 for one seen within the heartbeat timeout).
func (h workerHandlers) deregister(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkerID(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.Deregister(r.Context(), id)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"worker": res, "deregistered": true})
}
