package wire

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/authz"
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

// ErrorBody is the binding's error envelope (ojs-http-binding.md 16.1).
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the envelope's error. Type is the class of the failure
// as openapi.yaml's OJSError names it (issue 32): validation_error for a
// well-formed value that breaks its rule (422), else the code. Hint is one
// sentence that says what to do about it; DocsURL links the section of
// docs/reference.md for the code (issue 32; ojs-errors.md 3.2 calls it
// doc_url, which is sent too). The embedded QueueFullFields are set only
// on QUEUE_FULL, where ojs-backpressure.md 7.1 shows them beside code and
// message.
type ErrorObject struct {
	Code      string         `json:"code"`
	Type      string         `json:"type"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
	Hint      string         `json:"hint"`
	DocsURL   string         `json:"docs_url"`
	DocURL    string         `json:"doc_url"`
	*QueueFullFields
}

// TypeValidation is the error type of a well-formed value that breaks a
// rule of what it means (a retry policy out of range): 422, openapi.yaml's
// validation_error.
const TypeValidation = "validation_error"

// ReferenceURL is the docs/reference.md an envelope's docs_url points
// into; its section "Error `<code>`" describes each code.
const ReferenceURL = "https://github.com/jetgate/jetgate/blob/main/docs/reference.md"

// DocsURL is the link to the section of docs/reference.md for an error
// code: the heading "### Error `<code>`", whose anchor GitHub writes as
// "error-" and the code in lower case (TestReferenceHasEveryErrorCode
// keeps the headings there).
func DocsURL(code string) string {
	return ReferenceURL + "#" + ErrorAnchor(code)
}

// ErrorAnchor is the anchor of an error code's section in the reference.
func ErrorAnchor(code string) string { return "error-" + strings.ToLower(code) }

// QueueFullFields are the top-level fields of a QUEUE_FULL error.
type QueueFullFields struct {
	Queue    string `json:"queue"`
	Depth    int64  `json:"depth"`
	Bound    int64  `json:"bound"`
	Strategy string `json:"strategy,omitempty"`
}

// Error is an error classified for the wire: the HTTP status (which the
// NATS binding sends as its Nats-Service-Error-Code header), the OJS error
// code, the envelope's fields and the headers that go with it. It is also
// an error itself, so a binding can return an already classified failure
// (a route that does not exist, a missing token) through the same path:
// Classify returns it unchanged.
type Error struct {
	Status int
	Code   string
	// Type is the envelope's type; empty: the code.
	Type      string
	Message   string
	Retryable bool
	Details   map[string]any
	Header    http.Header
	Hint      string
	QueueFull *QueueFullFields
	// Sentinel is what errors.Is finds behind the error (may be nil).
	Sentinel error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Sentinel }

// clone is a copy whose details and headers the caller may change.
func (e *Error) clone() Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details))
	maps.Copy(c.Details, e.Details)
	c.Header = e.Header.Clone()
	return c
}

// Envelope is the OJS error envelope of e (ojs-http-binding.md 16.1),
// with the hint of its code when e has none of its own.
func (e Error) Envelope(requestID string) ErrorBody {
	d := e.Details
	if d == nil {
		d = map[string]any{}
	}
	docs := DocsURL(e.Code)
	return ErrorBody{Error: ErrorObject{
		Code: e.Code, Type: cmp.Or(e.Type, e.Code), Message: e.Message, Retryable: e.Retryable, Details: d,
		RequestID: requestID, Hint: cmp.Or(e.Hint, DefaultHint(e)), DocsURL: docs, DocURL: docs,
		QueueFullFields: e.QueueFull,
	}}
}

// Classify is the one place where errors become wire answers (STYLE 10):
// typed errors first, then sentinels, then context errors; anything else
// is a generic 500. A validation error marked by InEnvelope answers
// invalid_payload instead of invalid_request. An ErrorDetailer in the
// chain adds its details last.
func Classify(err error) Error {
	e := classifyAny(err)
	if e.Code == ojs.CodeInvalidRequest && (e.Status == http.StatusBadRequest || e.Type == TypeValidation) && errors.Is(err, ojs.ErrInvalid) {
		if _, ok := errors.AsType[*envelopeError](err); ok {
			e.Code = ojs.CodeInvalidPayload
		}
	}
	if d, ok := errors.AsType[ErrorDetailer](err); ok {
		maps.Copy(e.Details, d.ErrorDetails())
	}
	return e
}

func classifyAny(err error) Error {
	if e, ok := classifyTyped(err); ok {
		return e
	}
	if e, ok := classifySentinel(err); ok {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return unavailable("the backend did not answer in time")
	}
	return Error{Status: http.StatusInternalServerError, Code: ojs.CodeBackendError,
		Message: "internal server error", Retryable: true, Details: map[string]any{}}
}

// classifyTyped handles the errors that carry data for the details object.
func classifyTyped(err error) (Error, bool) {
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
		ae.Hint = validationHint(e)
		if e.Semantic {
			// Issue 32: a retry policy out of range is 422 with type
			// validation_error (openapi.yaml's OJSError); the code stays
			// the binding's (invalid_payload in a job envelope).
			ae.Status, ae.Type = http.StatusUnprocessableEntity, TypeValidation
		}
		return ae, true
	}
	if e, ok := errors.AsType[*ojs.TooLargeError](err); ok {
		return tooLarge(e), true
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
		ae.Hint = stateHint(e)
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
		ae.Retryable = true
		return ae, true
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.clone(), true
	}
	return Error{}, false
}

// classifySentinel handles bare (wrapped) ojs sentinels. Their messages are
// domain messages written for clients, so 4xx answers show them.
func classifySentinel(err error) (Error, bool) {
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
		e.Retryable = true
		e.Hint = "Send the request again: it will act on the state the other writer left."
		return e, true
	case errors.Is(err, ojs.ErrQueuePaused):
		e := clientError(http.StatusUnprocessableEntity, ojs.CodeQueuePaused, msg, nil)
		e.Retryable = true
		return e, true
	case errors.Is(err, ojs.ErrQueueFull):
		e := clientError(http.StatusTooManyRequests, ojs.CodeQueueFull, msg, nil)
		e.Retryable, e.Header = true, http.Header{"Retry-After": {"1"}}
		return e, true
	case errors.Is(err, ojs.ErrTooLarge):
		return clientError(http.StatusRequestEntityTooLarge, ojs.CodePayloadTooLarge, msg, nil), true
	case errors.Is(err, ojs.ErrShuttingDown):
		e := unavailable("the server is shutting down")
		e.Hint = "Send the request again to another jetgate process, or to this one after it restarts."
		return e, true
	case errors.Is(err, ojs.ErrUnavailable):
		return unavailable("the backend is unavailable"), true
	}
	return Error{}, false
}

// unavailable is a 503: retryable, with the Retry-After header ojs-errors.md
// ERR-006 requires on every 503.
func unavailable(msg string) Error {
	return Error{Status: http.StatusServiceUnavailable, Code: ojs.CodeBackendError, Message: msg,
		Retryable: true, Details: map[string]any{}, Header: http.Header{"Retry-After": {"1"}}}
}

func clientError(status int, code, msg string, details map[string]any) Error {
	if details == nil {
		details = map[string]any{}
	}
	return Error{Status: status, Code: code, Message: msg, Details: details}
}

func rateLimited(e RateLimitedError) Error {
	h := http.Header{}
	for k, vs := range e.Headers() {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	after := max(e.RetryAfter(), 0)
	h.Set("Retry-After", FormatRetryAfter(after))
	return Error{
		Status:    http.StatusTooManyRequests,
		Code:      ojs.CodeRateLimited,
		Message:   e.Error(),
		Retryable: true,
		Details:   map[string]any{"retry_after_seconds": RetryAfterSeconds(after)},
		Header:    h,
	}
}

// retryAfterSeconds rounds d up to the millisecond, in seconds.
func RetryAfterSeconds(d time.Duration) float64 {
	ms := math.Ceil(float64(d) / float64(time.Millisecond))
	return ms / 1000
}

// formatRetryAfter writes d in seconds: an integer when whole ("5"), else
// with up to millisecond precision ("0.25"). spec/README.md decision 3 lets
// Retry-After be fractional; the official clients parse it as a float.
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatFloat(RetryAfterSeconds(d), 'f', -1, 64)
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
func InEnvelope(err error) error {
	if err == nil {
		return nil
	}
	return &envelopeError{err: err}
}

// The hint of an error envelope is one sentence that tells the client what
// to do. Errors that know more (the field of a validation error, the state
// a job must be in) set their own hint where they are classified; the rest
// get the hint of their code and status here.

// validationHint names the field to fix and the rule it must meet.
func validationHint(e *ojs.ValidationError) string {
	switch {
	case e.Field == "" || e.Field == "body":
		return "Send the request body as one valid JSON object (check quotes, commas and brackets)."
	case e.Rule == "required":
		return fmt.Sprintf("Add the required field '%s' and send the request again.", e.Field)
	case e.Rule != "":
		return fmt.Sprintf("Change '%s' so that it is %s, then send the request again.", e.Field, strings.TrimSuffix(e.Rule, "."))
	}
	return fmt.Sprintf("Fix '%s' as the message says and send the request again.", e.Field)
}

// stateHint says what state the operation needs and how to see the job's.
func stateHint(e *ojs.StateError) string {
	if e.Expected != "" {
		return fmt.Sprintf("Read the job (GET /ojs/v1/jobs/%s): it is '%s', and this operation needs it '%s'; do not repeat it.",
			e.JobID, e.Current, e.Expected)
	}
	return fmt.Sprintf("Read the job (GET /ojs/v1/jobs/%s): in state '%s' it no longer allows this operation.", e.JobID, e.Current)
}

// defaultHint is the hint of an error that did not set its own.
func DefaultHint(e Error) string {
	switch e.Code {
	case ojs.CodeInvalidPayload:
		return "Fix the job envelope as the message says and send it again."
	case ojs.CodeNotFound:
		return notFoundHint(e.Details)
	case ojs.CodeConflict:
		return "Read the resource's current state and act on it; repeating the request will not succeed."
	case ojs.CodeDuplicate:
		return "The job already exists: use the existing job (details.existing_job_id), or enqueue with another unique key."
	case ojs.CodeQueuePaused:
		return "Resume the queue (POST /ojs/v1/queues/{name}/resume), then send the request again."
	case ojs.CodeUnsupported:
		return "Leave out what the message names; GET /ojs/manifest lists what this server supports."
	case ojs.CodePayloadTooLarge:
		return "Send a smaller body: move large data out of args and pass a reference to it."
	case ojs.CodeRateLimited:
		return "Wait the Retry-After header's seconds before sending the request again."
	case ojs.CodeUnauthorized:
		return "Send the header 'Authorization: Bearer <token>' with a token the server is configured with."
	case ojs.CodeForbidden:
		return "Use a token of a role allowed this operation (details.required_roles)."
	case ojs.CodeQueueFull:
		return "Wait the Retry-After header's seconds and send the job again, or let workers drain the queue first."
	}
	switch e.Status {
	case http.StatusMethodNotAllowed:
		return "Use one of the methods in the Allow header."
	case http.StatusServiceUnavailable:
		return "Send the request again after the Retry-After header's seconds, with backoff if it repeats."
	case http.StatusBadRequest:
		return "Fix the request as the message says and send it again."
	}
	if e.Status >= 500 {
		return "Send the request again with backoff; if it keeps failing, give the operator the request_id."
	}
	return "Fix the request as the message says and send it again."
}

func notFoundHint(d map[string]any) string {
	kind, _ := d["resource_type"].(string)
	switch {
	case kind == "endpoint":
		return "Check the method and path: the OJS endpoints are under /ojs/v1 (GET /ojs/manifest lists them)."
	case kind != "":
		return fmt.Sprintf("Check the %s id: it names no %s here (it may never have existed or may have been removed).",
			strings.ReplaceAll(kind, "_", " "), strings.ReplaceAll(kind, "_", " "))
	}
	return "Check the id or name in the path: it names nothing here."
}

// Headers of the backpressure extension (ojs-backpressure.md 5.2, 7.2,
// 7.3 and ojs-backpressure.txt).
const (
	HeaderBlockTimeout      = "OJS-Block-Timeout"
	HeaderQueueDepth        = "X-OJS-Queue-Depth"
	HeaderQueueMaxDepth     = "X-OJS-Queue-Max-Depth"
	HeaderQueueBound        = "X-OJS-Queue-Bound"
	HeaderQueuePressure     = "X-OJS-Queue-Pressure"
	HeaderQueueSizeBytes    = "X-OJS-Queue-Size-Bytes"
	HeaderQueueMaxSizeBytes = "X-OJS-Queue-Max-Size-Bytes"
)

// queueFullReason is details.reason of a 429 from a full queue: the core
// spec's QUEUE_FULL code (ojs-backpressure.md 7.1).
const queueFullReason = "QUEUE_FULL"

// SetPressureHeaders sets the X-OJS-Queue-* headers of p on h (7.3).
func SetPressureHeaders(h http.Header, p ojs.Pressure) {
	h.Set(HeaderQueueDepth, strconv.FormatInt(p.Depth, 10))
	if p.MaxDepth > 0 {
		h.Set(HeaderQueueMaxDepth, strconv.FormatInt(p.MaxDepth, 10))
		h.Set(HeaderQueueBound, strconv.FormatInt(p.MaxDepth, 10))
	}
	if p.MaxSizeBytes > 0 {
		h.Set(HeaderQueueSizeBytes, strconv.FormatInt(p.SizeBytes, 10))
		h.Set(HeaderQueueMaxSizeBytes, strconv.FormatInt(p.MaxSizeBytes, 10))
		if p.MaxDepth == 0 {
			h.Set(HeaderQueueBound, strconv.FormatInt(p.MaxSizeBytes, 10))
		}
	}
	h.Set(HeaderQueuePressure, strconv.FormatFloat(p.Ratio, 'f', -1, 64))
}

// queueFull maps a refused enqueue to 429 (ojs-backpressure.md 7.1,
// BP-002, BP-005): code rate_limited (the binding's code for 429),
// retryable, Retry-After and the pressure headers.
func queueFull(e *ojs.QueueFullError) Error {
	h := http.Header{}
	SetPressureHeaders(h, e.Pressure)
	after := max(e.RetryAfter, 0)
	h.Set("Retry-After", FormatRetryAfter(after))
	bound := e.MaxDepth
	if e.Bound == "max_size_bytes" {
		bound = e.MaxSizeBytes
	}
	d := map[string]any{
		"reason": queueFullReason, "queue": e.Queue, "depth": e.Depth, "bound": bound,
		"max_depth": e.MaxDepth, "pressure": e.Ratio, "strategy": e.Strategy, "bound_type": e.Bound,
		"retry_after_seconds": RetryAfterSeconds(after),
	}
	if e.MaxSizeBytes > 0 {
		d["size_bytes"], d["max_size_bytes"] = e.SizeBytes, e.MaxSizeBytes
	}
	if e.Bound == "tenant_max_depth" {
		d["tenant"] = e.Tenant
	}
	if e.Waited > 0 {
		d["waited_ms"] = e.Waited.Milliseconds()
	}
	// ojs-backpressure.md 7.1: code QUEUE_FULL, with queue, depth, bound
	// and strategy beside code and message (kept in details too).
	return Error{Status: http.StatusTooManyRequests, Code: ojs.CodeQueueFull, Message: e.Error(),
		Retryable: true, Details: d, Header: h,
		QueueFull: &QueueFullFields{Queue: e.Queue, Depth: e.Depth, Bound: bound, Strategy: e.Strategy},
		Hint:      "Wait the Retry-After header's seconds and send the job again, or let workers drain queue '" + e.Queue + "' first."}
}

// ErrTooLarge is the 413 of a request body of size bytes over limit
// bytes (size 0: unknown, the body was cut off at the limit).
func ErrTooLarge(limit, size int64) error {
	return &ojs.TooLargeError{What: "request body", Limit: limit, Size: size,
		Hint: fmt.Sprintf("Send a body of at most %d bytes: move large data out of the request and pass a reference to it.", limit)}
}

// tooLarge is the 413 payload_too_large of a request or a part of one
// over a size limit (issue 31): not retryable, naming the limit and the
// size (details.limit_bytes, details.size_bytes, details.field).
func tooLarge(e *ojs.TooLargeError) Error {
	d := map[string]any{"limit_bytes": e.Limit}
	if e.Size > 0 {
		d["size_bytes"] = e.Size
	}
	if e.Field != "" {
		d["field"] = e.Field
	}
	ae := clientError(http.StatusRequestEntityTooLarge, ojs.CodePayloadTooLarge, e.Error(), d)
	ae.Hint = e.Hint
	return ae
}

// ErrUnsupported is the 422 unsupported of a request for something this
// server does not serve.
func ErrUnsupported(msg string, details map[string]any) error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: ojs.CodeUnsupported,
		Message: msg, Details: details}
}

// ErrUnauthorized is the 401 of a request without a valid bearer token.
func ErrUnauthorized() error {
	return &Error{
		Status: http.StatusUnauthorized, Code: ojs.CodeUnauthorized,
		Message: "a valid bearer token is required",
		Details: map[string]any{},
		Header:  http.Header{"Www-Authenticate": {`Bearer realm="jetgate"`}},
	}
}

// ErrForbidden is the 403 of a known token whose role may not perform op;
// what names the operation ("POST /ojs/v1/jobs", "ojs.v1.jobs.enqueue").
func ErrForbidden(role authz.Role, op authz.Op, what string) error {
	var roles []string
	for _, rr := range []authz.Role{authz.RoleProducer, authz.RoleWorker, authz.RoleAdmin} {
		if rr.Allows(op) {
			roles = append(roles, rr.String())
		}
	}
	return &Error{
		Status: http.StatusForbidden, Code: ojs.CodeForbidden,
		Message: "the " + role.String() + " role may not " + what,
		Details: map[string]any{"role": role.String(), "required_roles": roles},
	}
}
