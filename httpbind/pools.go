package httpbind

import (
	"context"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// PoolBackend is what the fair scheduling extension's endpoints ask of
// the layer below (ojs-fair-scheduling.md 10). A Backend that also
// implements it gets the routes.
type PoolBackend interface {
	ListPools(ctx context.Context) ([]ojs.Pool, error)
	Pool(ctx context.Context, name string) (*ojs.Pool, error)
	SetPool(ctx context.Context, g ojs.WorkerGroup) (*ojs.Pool, error)
	DeletePool(ctx context.Context, name string) error
	SchedulingStats(ctx context.Context) (*ojs.SchedulingStats, error)
}

// ExtFairScheduling is the fair scheduling extension's URI.
const ExtFairScheduling = "urn:ojs:ext:fair-scheduling"

func (s *server) poolRoutes() []route {
	pb, ok := s.b.(PoolBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	h := poolHandlers{s: s, b: pb}
	return []route{
		{http.MethodGet, "/ojs/v1/admin/pools", h.list, body},
		{http.MethodGet, "/ojs/v1/admin/pools/{pool}", h.get, body},
		{http.MethodPut, "/ojs/v1/admin/pools/{pool}", h.put, body},
		{http.MethodDelete, "/ojs/v1/admin/pools/{pool}", h.delete, body},
		{http.MethodGet, "/ojs/v1/admin/scheduling/stats", h.stats, body},
	}
}

type poolHandlers struct {
	s *server
	b PoolBackend
}

// pathPool reads and checks the {pool} path variable: a pool is a worker
// group, named by the same rule.
func pathPool(r *http.Request) (string, error) { return groupName(r, "pool", "name", "pool") }

// list is GET /ojs/v1/admin/pools (10.1, FS-004): {"items":[...]}.
func (h poolHandlers) list(w http.ResponseWriter, r *http.Request) {
	ps, err := h.b.ListPools(r.Context())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if ps == nil {
		ps = []ojs.Pool{}
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"items": ps})
}

// get is GET /ojs/v1/admin/pools/{pool}: the pool, also under "pool".
func (h poolHandlers) get(w http.ResponseWriter, r *http.Request) {
	name, err := pathPool(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	p, err := h.b.Pool(r.Context(), name)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.NewPoolReply(p))
}

// put is PUT /ojs/v1/admin/pools/{pool} (10.1): {"queues": [names] or
// [{"name","weight"}] or {name: {"weight"}}, "concurrency"?, "strategy"?:
// "round-robin" (default) | "strict" | "weighted", "weights"?: {queue:
// weight}}. It creates or replaces the pool and answers it, also under
// "pool" (wire.PoolReply).
func (h poolHandlers) put(w http.ResponseWriter, r *http.Request) {
	name, err := pathPool(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	o, err := readObject(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	g, err := decodePool(name, o)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	p, err := h.b.SetPool(r.Context(), g)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.NewPoolReply(p))
}

var decodePool = wire.DecodePool

// delete is DELETE /ojs/v1/admin/pools/{pool}: {"name","deleted":true};
// 404 when there is no such pool.
func (h poolHandlers) delete(w http.ResponseWriter, r *http.Request) {
	name, err := pathPool(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if err := h.b.DeletePool(r.Context(), name); err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"name": name, "deleted": true})
}

// stats is GET /ojs/v1/admin/scheduling/stats (10.2, FS-R004), also
// under "stats".
func (h poolHandlers) stats(w http.ResponseWriter, r *http.Request) {
	st, err := h.b.SchedulingStats(r.Context())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.NewSchedulingStatsReply(st))
}
