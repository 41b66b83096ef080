package httpbind

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// RateLimitedError is the hook for 429 Too Many Requests
// (ojs-http-binding.md 18.2, ojs-rate-limiting.md, ojs-backpressure.md 7).
// Any error in a Backend's error chain that implements it answers 429 with
// code rate_limited, retryable true, a Retry-After header (fractional seconds
// allowed, spec/README.md decision 3) and the headers it returns, e.g.
// X-RateLimit-Limit/Remaining/Reset or X-OJS-Queue-Depth/Bound/Pressure.
// It is an interface so that admission can return its own concrete type
// without importing httpbind; errors.As finds it anywhere in a wrapped chain.
type RateLimitedError interface {
	error
	// RetryAfter is how long the client should wait; negative values are
	// sent as 0.
	RetryAfter() time.Duration
	// Headers are copied onto the 429 response (may be nil).
	Headers() http.Header
}

// ErrorDetailer may be implemented by any error to add entries to the
// envelope's details object (after the details httpbind derives itself).
type ErrorDetailer interface {
	error
	ErrorDetails() map[string]any
}

// errorBody is the binding's error envelope (ojs-http-binding.md 16.1).
type errorBody struct {
	Error errorObject `json:"error"`
}

// errorObject is the envelope's error. Hint is one sentence that says what
// to do about it. The embedded queueFullFields are set only on QUEUE_FULL,
// where ojs-backpressure.md 7.1 shows them beside code and message.
type errorObject struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
	Hint      string         `json:"hint"`
	*queueFullFields
}

// queueFullFields are the top-level fields of a QUEUE_FULL error.
type queueFullFields struct {
	Queue    string `json:"queue"`
	Depth    int64  `json:"depth"`
	Bound    int64  `json:"bound"`
	Strategy string `json:"strategy,omitempty"`
}

// apiError is an error classified for the wire.
type apiError struct {
	status    int
	code      string
	message   string
	retryable bool
	details   map[string]any
	header    http.Header
	hint      string
	queueFull *queueFullFields
}

// writeError is the one place where errors become HTTP responses (STYLE 10).
// Handlers return every failure here and never write error statuses by hand.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	if d, ok := errors.AsType[ErrorDetailer](err); ok {
		for k, v := range d.ErrorDetails() {
			e.details[k] = v
		}
	}
	s.logError(r, e, err)
	s.writeEnvelope(w, r, e)
}

// writeEnvelope writes a classified error: its headers and the envelope.
func (s *server) writeEnvelope(w http.ResponseWriter, r *http.Request, e apiError) {
	for k, vs := range e.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	s.writeJSON(w, r, e.status, errorBody{Error: errorObject{
		Code:            e.code,
		Message:         e.message,
		Retryable:       e.retryable,
		Details:         e.details,
		RequestID:       requestID(r.Context()),
		Hint:            cmp.Or(e.hint, defaultHint(e)),
		queueFullFields: e.queueFull,
	}})
}

// logError logs server-side failures at error level, with the real error;
// client errors are left to the request's debug line.
func (s *server) logError(r *http.Request, e apiError, err error) {
	if e.status < 500 {
		return
	}
	level := slog.LevelError
	if r.Context().Err() != nil {
		level = slog.LevelDebug // the client went away; nothing to fix here
	}
	s.log.Log(r.Context(), level, "request failed",
		"method", r.Method, "path", r.URL.Path, "status", e.status,
		"request_id", requestID(r.Context()), "error", err)
}

// classify maps an error to status, code and details. Typed errors first,
// then sentinels, then context errors; anything else is a generic 500.
// A validation error inside an envelopeError answers invalid_payload
// instead of invalid_request.
func classify(err error) apiError {
	e := classifyAny(err)
	if e.code == ojs.CodeInvalidRequest && e.status == http.StatusBadRequest && errors.Is(err, ojs.ErrInvalid) {
		if _, ok := errors.AsType[*envelopeError](err); ok {
			e.code = ojs.CodeInvalidPayload
		}
	}
	return e
}

func classifyAny(err error) apiError {
	if e, ok := classifyTyped(err); ok {
		return e
	}
	if e, ok := classifySentinel(err); ok {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return unavailable("the backend did not answer in time")
	}
	return apiError{status: http.StatusInternalServerError, code: ojs.CodeBackendError,
		message: "internal server error", retryable: true, details: map[string]any{}}
}

// classifyTyped handles the errors that carry data for the details object.
func classifyTyped(err error) (apiError, bool) {
	if e, ok := errors.AsType[RateLimitedError](err); ok {
		return rateLimited(e), true
	}
	if e, ok := errors.AsType[*ojs.QueueFullError](err); ok {
		return queueFull(e), true
	}
	if e, ok := errors.AsType[*ojs.ValidationError](err); ok {
		d := map[string]any{"field": cmp.Or(e.Field, "body"), "rule": e.Rule, "expected": e.Rule}
		if e.Received != "" {
			d["received"] = e.Received
		}
		ae := clientError(http.StatusBadRequest, ojs.CodeInvalidRequest, e.Error(), d)
		ae.hint = validationHint(e)
		return ae, true
	}
	if e, ok := errors.AsType[*ojs.NotFoundError](err); ok {
		return clientError(http.StatusNotFound, ojs.CodeNotFound, e.Error(),
			map[string]any{"resource_type": e.Resource, "resource_id": e.ID}), true
	}
	if e, ok := errors.AsType[*ojs.StateError](err); ok {
		// ojs-errors.md 4.1 INVALID_STATE_TRANSITION (409) in the binding's
		// vocabulary: 409 conflict, not retryable (the state will not
		// change back by itself).
		d := map[string]any{"job_id": e.JobID, "current_state": e.Current}
		if e.Expected != "" {
			d["expected_state"] = e.Expected
		}
		ae := clientError(http.StatusConflict, ojs.CodeConflict, e.Error(), d)
		ae.hint = stateHint(e)
		return ae, true
	}
	if e, ok := errors.AsType[*ojs.DuplicateError](err); ok {
		d := map[string]any{"existing_job_id": e.ExistingID}
		if e.UniqueKey != "" {
			d["unique_key"] = e.UniqueKey
		}
		return clientError(http.StatusConflict, ojs.CodeDuplicate, e.Error(), d), true
	}
	if e, ok := errors.AsType[*ojs.QueuePausedError](err); ok {
		d := map[string]any{"queue": e.Queue}
		if e.PausedAt != nil {
			d["paused_at"] = e.PausedAt
		}
		ae := clientError(http.StatusUnprocessableEntity, ojs.CodeQueuePaused, e.Error(), d)
		ae.retryable = true
		return ae, true
	}
	if e, ok := errors.AsType[*bindingError](err); ok {
		return e.apiError(), true
	}
	return apiError{}, false
}

// classifySentinel handles bare (wrapped) ojs sentinels. Their messages are
// domain messages written for clients, so 4xx answers show them.
func classifySentinel(err error) (apiError, bool) {
	msg := err.Error()
	switch {
	case errors.Is(err, ojs.ErrInvalid):
		return clientError(http.StatusBadRequest, ojs.CodeInvalidRequest, msg, nil), true
	case errors.Is(err, ojs.ErrNotFound):
		return clientError(http.StatusNotFound, ojs.CodeNotFound, msg, nil), true
	case errors.Is(err, ojs.ErrInvalidState):
		return clientError(http.StatusConflict, ojs.CodeConflict, msg, nil), true
	case errors.Is(err, ojs.ErrDuplicate):
		return clientError(http.StatusConflict, ojs.CodeDuplicate, msg, nil), true
	case errors.Is(err, ojs.ErrConflict):
		// A lost compare-and-swap race: retrying re-reads the new state.
		e := clientError(http.StatusConflict, ojs.CodeConflict, msg, nil)
		e.retryable = true
		e.hint = "Send the request again: it will act on the state the other writer left."
		return e, true
	case errors.Is(err, ojs.ErrQueuePaused):
		e := clientError(http.StatusUnprocessableEntity, ojs.CodeQueuePaused, msg, nil)
		e.retryable = true
		return e, true
	case errors.Is(err, ojs.ErrQueueFull):
		e := clientError(http.StatusTooManyRequests, ojs.CodeQueueFull, msg, nil)
		e.retryable, e.header = true, http.Header{"Retry-After": {"1"}}
		return e, true
	case errors.Is(err, ojs.ErrTooLarge):
		return clientError(http.StatusRequestEntityTooLarge, ojs.CodePayloadTooLarge, msg, nil), true
	case errors.Is(err, ojs.ErrShuttingDown):
		e := unavailable("the server is shutting down")
		e.hint = "Send the request again to another jetgate process, or to this one after it restarts."
		return e, true
	case errors.Is(err, ojs.ErrUnavailable):
		return unavailable("the backend is unavailable"), true
	}
	return apiError{}, false
}

// unavailable is a 503: retryable, with the Retry-After header ojs-errors.md
// ERR-006 requires on every 503.
func unavailable(msg string) apiError {
	return apiError{status: http.StatusServiceUnavailable, code: ojs.CodeBackendError, message: msg,
		retryable: true, details: map[string]any{}, header: http.Header{"Retry-After": {"1"}}}
}

func clientError(status int, code, msg string, details map[string]any) apiError {
	if details == nil {
		details = map[string]any{}
	}
	return apiError{status: status, code: code, message: msg, details: details}
}

func rateLimited(e RateLimitedError) apiError {
	h := http.Header{}
	for k, vs := range e.Headers() {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	after := max(e.RetryAfter(), 0)
	h.Set("Retry-After", formatRetryAfter(after))
	return apiError{
		status:    http.StatusTooManyRequests,
		code:      ojs.CodeRateLimited,
		message:   e.Error(),
		retryable: true,
		details:   map[string]any{"retry_after_seconds": retryAfterSeconds(after)},
		header:    h,
	}
}

// retryAfterSeconds rounds d up to the millisecond, in seconds.
func retryAfterSeconds(d time.Duration) float64 {
	ms := math.Ceil(float64(d) / float64(time.Millisecond))
	return ms / 1000
}

// formatRetryAfter writes d in seconds: an integer when whole ("5"), else
// with up to millisecond precision ("0.25"). spec/README.md decision 3 lets
// Retry-After be fractional; the official clients parse it as a float.
func formatRetryAfter(d time.Duration) string {
	return strconv.FormatFloat(retryAfterSeconds(d), 'f', -1, 64)
}

// bindingError is an error httpbind itself raises about the HTTP request
// (route, method, headers, size), already classified.
type bindingError struct {
	status   int
	code     string
	msg      string
	details  map[string]any
	header   http.Header
	sentinel error // for errors.Is, may be nil
}

func (e *bindingError) Error() string { return e.msg }
func (e *bindingError) Unwrap() error { return e.sentinel }

func (e *bindingError) apiError() apiError {
	d := make(map[string]any, len(e.details))
	for k, v := range e.details {
		d[k] = v
	}
	return apiError{status: e.status, code: e.code, message: e.msg, details: d, header: e.header.Clone()}
}

func errRouteNotFound(r *http.Request) error {
	return &bindingError{
		status: http.StatusNotFound, code: ojs.CodeNotFound,
		msg:     fmt.Sprintf("no endpoint at %s %s", r.Method, r.URL.Path),
		details: map[string]any{"resource_type": "endpoint", "resource_id": r.URL.Path},
	}
}

func errMethodNotAllowed(r *http.Request, allowed []string) error {
	return &bindingError{
		status: http.StatusMethodNotAllowed, code: ojs.CodeInvalidRequest,
		msg: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)",
			r.Method, r.URL.Path, strings.Join(allowed, ", ")),
		details: map[string]any{"method": r.Method, "allowed": allowed},
		header:  http.Header{"Allow": {strings.Join(allowed, ", ")}},
	}
}

func errTooLarge(limit int64) error {
	return &bindingError{
		status: http.StatusRequestEntityTooLarge, code: ojs.CodePayloadTooLarge,
		msg:      fmt.Sprintf("request body exceeds the limit of %d bytes", limit),
		details:  map[string]any{"limit_bytes": limit},
		sentinel: ojs.ErrTooLarge,
	}
}

func errUnsupported(msg string, details map[string]any) error {
	return &bindingError{status: http.StatusUnprocessableEntity, code: ojs.CodeUnsupported,
		msg: msg, details: details}
}

// invalid is a ValidationError about one field of the request.
func invalid(field, rule, received string) error {
	return &ojs.ValidationError{Field: field, Rule: rule, Received: received}
}

// envelopeError marks an error about a job envelope (the body of an
// enqueue) or about a body that is not a JSON object: a validation error
// in its chain answers invalid_payload (ojs-errors.md 4.1 INVALID_PAYLOAD:
// "job envelope fails structural validation; malformed JSON"). Other
// validation errors, about the rest of a request (query parameters,
// headers, the bodies of worker and admin calls), answer invalid_request.
type envelopeError struct{ err error }

func (e *envelopeError) Error() string { return e.err.Error() }
func (e *envelopeError) Unwrap() error { return e.err }

// inEnvelope marks err (nil stays nil) as an envelopeError.
func inEnvelope(err error) error {
	if err == nil {
		return nil
	}
	return &envelopeError{err: err}
}
