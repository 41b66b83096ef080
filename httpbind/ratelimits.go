package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// RateLimitBackend is what the rate limiting extension's endpoints ask of
// the layer below (ojs-rate-limiting.md 7.2, 10). A Backend that also
// implements it gets the routes.
type RateLimitBackend interface {
	RateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error)
	RateLimits(ctx context.Context, page ojs.PageRequest) (*ojs.RateLimitPage, error)
	SetRateLimitOverride(ctx context.Context, key string, ov ojs.RateLimitOverride) (*ojs.RateLimitStatus, error)
	ResetRateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error)
	QueueRateLimit(ctx context.Context, queue string) (*ojs.RateLimitStatus, error)
	SetQueueRateLimit(ctx context.Context, queue string, l *ojs.Limits) (*ojs.QueueInfo, error)
}

func (s *server) rateLimitRoutes() []route {
	rl, ok := s.b.(RateLimitBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	h := rateLimitHandlers{s: s, b: rl}
	return []route{
		{http.MethodGet, "/ojs/v1/rate-limits", h.list, body},
		{http.MethodGet, "/ojs/v1/rate-limits/{key}", h.get, body},
		{http.MethodPut, "/ojs/v1/rate-limits/{key}", h.override, body},
		{http.MethodDelete, "/ojs/v1/rate-limits/{key}", h.reset, body},
		{http.MethodGet, "/ojs/v1/admin/queues/{name}/rate-limit", h.getQueue, body},
		{http.MethodPut, "/ojs/v1/admin/queues/{name}/rate-limit", h.setQueue, body},
		{http.MethodDelete, "/ojs/v1/admin/queues/{name}/rate-limit", h.deleteQueue, body},
	}
}

type rateLimitHandlers struct {
	s *server
	b RateLimitBackend
}

func pathRateKey(r *http.Request) (string, error) { return wire.RateKey(mux.Vars(r)["key"]) }

// get is GET /ojs/v1/rate-limits/{key} (10.1, RL-005).
func (h rateLimitHandlers) get(w http.ResponseWriter, r *http.Request) {
	key, err := pathRateKey(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	st, err := h.b.RateLimit(r.Context(), key)
	h.s.answer(w, r, st, err)
}

// list is GET /ojs/v1/rate-limits (10.3): page and per_page as the
// extension shows, or the binding's limit and offset.
func (h rateLimitHandlers) list(w http.ResponseWriter, r *http.Request) {
	page, err := wire.RateLimitsPage(r.URL.Query())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.RateLimits(r.Context(), page)
	h.s.answer(w, r, res, err)
}

// override is PUT /ojs/v1/rate-limits/{key} (10.2, RL-R004):
// {"concurrency"?, "rate"?, "throttle"?, "expires_at"?}.
func (h rateLimitHandlers) override(w http.ResponseWriter, r *http.Request) {
	key, err := pathRateKey(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	ov, err := decodeOverride(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	st, err := h.b.SetRateLimitOverride(r.Context(), key, ov)
	h.s.answer(w, r, st, err)
}

func decodeOverride(r *http.Request) (ojs.RateLimitOverride, error) {
	return decodeBody(r, wire.DecodeOverride)
}

// reset is DELETE /ojs/v1/rate-limits/{key}: removes the override and any
// rate_limit_until hold, and forgets the stored policy.
func (h rateLimitHandlers) reset(w http.ResponseWriter, r *http.Request) {
	key, err := pathRateKey(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	st, err := h.b.ResetRateLimit(r.Context(), key)
	h.s.answer(w, r, st, err)
}

// getQueue is GET /ojs/v1/admin/queues/{name}/rate-limit.
func (h rateLimitHandlers) getQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	st, err := h.b.QueueRateLimit(r.Context(), name)
	h.s.answer(w, r, st, err)
}

// setQueue is PUT /ojs/v1/admin/queues/{name}/rate-limit (7.2, RL-R005):
// {"concurrency"?, "rate"?, "throttle"?}.
func (h rateLimitHandlers) setQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	l, err := decodeBody(r, wire.DecodeQueueLimits)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if _, err := h.b.SetQueueRateLimit(r.Context(), name, l); err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.getQueue(w, r)
}

// deleteQueue is DELETE /ojs/v1/admin/queues/{name}/rate-limit.
func (h rateLimitHandlers) deleteQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	q, err := h.b.SetQueueRateLimit(r.Context(), name, nil)
	h.s.answer(w, r, q, err)
}
