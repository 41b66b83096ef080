package httpbind

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
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

// Page sizes of GET /ojs/v1/rate-limits (10.3 shows 20).
const (
	rateLimitsDefaultLimit = 20
	rateLimitsMaxLimit     = 200
)

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

// readLimitsBody reads a body of limits; an empty one reads as {}, so the
// missing limits are what is reported.
func readLimitsBody(r *http.Request) ([]byte, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), nil
	}
	return body, nil
}

func pathRateKey(r *http.Request) (string, error) {
	key := mux.Vars(r)["key"]
	if !ojs.ValidRateKey(key) {
		return "", invalid("key", "a rate limit key matching ^[a-zA-Z0-9][a-zA-Z0-9._:-]*$ (at most 255 characters)", strconv.Quote(short(key)))
	}
	return key, nil
}

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
	q := r.URL.Query()
	page, err := parsePage(q, rateLimitsDefaultLimit, rateLimitsMaxLimit)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			h.s.writeError(w, r, invalid("per_page", "an integer between 1 and 200", strconv.Quote(short(v))))
			return
		}
		page.Limit = min(n, rateLimitsMaxLimit)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			h.s.writeError(w, r, invalid("page", "an integer >= 1", strconv.Quote(short(v))))
			return
		}
		page.Offset = (n - 1) * page.Limit
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
	var ov ojs.RateLimitOverride
	body, err := readLimitsBody(r)
	if err != nil {
		return ov, err
	}
	o, err := parseObject(body)
	if err != nil {
		return ov, err
	}
	if err := onlyFields(o, "concurrency", "rate", "throttle", "expires_at"); err != nil {
		return ov, err
	}
	if ov.Limits, err = ojs.ParseLimits(body, ""); err != nil {
		return ov, err
	}
	if raw, ok := o.Get("expires_at"); ok {
		var t ojs.Time
		if err := json.Unmarshal(raw, &t); err != nil {
			return ov, invalid("expires_at", "an RFC 3339 time", describe(raw))
		}
		ov.ExpiresAt = &t
	}
	if ov.Limits.Empty() {
		return ov, invalid("concurrency", "present: an override sets at least one of concurrency, rate, throttle", "none of them")
	}
	return ov, nil
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
	body, err := readLimitsBody(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	o, err := parseObject(body)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if err := onlyFields(o, "concurrency", "rate", "throttle"); err != nil {
		h.s.writeError(w, r, err)
		return
	}
	l, err := ojs.ParseLimits(body, "")
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if l.Empty() {
		h.s.writeError(w, r, invalid("concurrency", "present: a queue rate limit sets at least one of concurrency, rate, throttle", "none of them"))
		return
	}
	if _, err := h.b.SetQueueRateLimit(r.Context(), name, &l); err != nil {
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
