package httpbind

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// RateLimitedError is the hook for 429 Too Many Requests
// (ojs-http-binding.md 18.2, ojs-rate-limiting.md, ojs-backpressure.md 7).
// Any error in a Backend's error chain that implements it answers 429 with
// code rate_limited, retryable true, a Retry-After header (fractional seconds
// allowed, spec/README.md decision 3) and the headers it returns, e.g.
// X-RateLimit-Limit/Remaining/Reset or X-OJS-Queue-Depth/Bound/Pressure.
// It is wire.RateLimitedError: the NATS binding maps it the same way.
type RateLimitedError = wire.RateLimitedError

// ErrorDetailer may be implemented by any error to add entries to the
// envelope's details object (after the details the mapping derives itself).
type ErrorDetailer = wire.ErrorDetailer

// The error mapping (status, code, envelope, hint) is package wire's,
// shared with the NATS binding; these names keep httpbind's code short.
type (
	apiError     = wire.Error
	bindingError = wire.Error
)

var (
	classify    = wire.Classify
	defaultHint = wire.DefaultHint
	invalid     = wire.Invalid
	inEnvelope  = wire.InEnvelope
)

// writeError is the one place where errors become HTTP responses (STYLE 10).
// Handlers return every failure here and never write error statuses by hand.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	s.logError(r, e, err)
	s.writeEnvelope(w, r, e)
}

// writeEnvelope writes a classified error: its headers and the envelope.
func (s *server) writeEnvelope(w http.ResponseWriter, r *http.Request, e apiError) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	s.writeJSON(w, r, e.Status, e.Envelope(requestID(r.Context())))
}

// logError logs server-side failures at error level, with the real error;
// client errors are left to the request's debug line.
func (s *server) logError(r *http.Request, e apiError, err error) {
	if e.Status < 500 {
		return
	}
	level := slog.LevelError
	switch {
	case r.Context().Err() != nil:
		level = slog.LevelDebug // the client went away; nothing to fix here
	case errors.Is(err, ojs.ErrShuttingDown):
		// The 503 of a server shutting down (a blocked producer, a
		// fetch) is an expected answer: the client tries another
		// process. natsbind logs it the same way.
		level = slog.LevelInfo
	}
	s.log.Log(r.Context(), level, "request failed",
		"method", r.Method, "path", r.URL.Path, "status", e.Status,
		"request_id", requestID(r.Context()), "error", err)
}

func errRouteNotFound(r *http.Request) error {
	return &bindingError{
		Status: http.StatusNotFound, Code: ojs.CodeNotFound,
		Message: fmt.Sprintf("no endpoint at %s %s", r.Method, r.URL.Path),
		Details: map[string]any{"resource_type": "endpoint", "resource_id": r.URL.Path},
	}
}

func errMethodNotAllowed(r *http.Request, allowed []string) error {
	return &bindingError{
		Status: http.StatusMethodNotAllowed, Code: ojs.CodeInvalidRequest,
		Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)",
			r.Method, r.URL.Path, strings.Join(allowed, ", ")),
		Details: map[string]any{"method": r.Method, "allowed": allowed},
		Header:  http.Header{"Allow": {strings.Join(allowed, ", ")}},
		Hint:    methodHint(r),
	}
}

// methodHint points a request that reads a collection the binding only
// writes to where it can be read: GET /ojs/v1/jobs lists nothing (the core
// binding enqueues there), the admin API lists jobs (issue 31). Other
// 405s keep the default hint (the Allow header).
func methodHint(r *http.Request) string {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.TrimSuffix(r.URL.Path, "/") == "/ojs/v1/jobs" {
		return "POST /ojs/v1/jobs enqueues a job; to list jobs use GET /ojs/v1/admin/jobs (filters: queue, state, type)."
	}
	return ""
}

// errTooLarge is the 413 of a body of size bytes (0: unknown) over limit.
func errTooLarge(limit, size int64) error { return wire.ErrTooLarge(limit, size) }

func errUnsupported(msg string, details map[string]any) error {
	return wire.ErrUnsupported(msg, details)
}
