package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors.
var (
	// ErrCircuitOpen refuses an enqueue locally while the circuit breaker
	// is open after repeated 429s (ojs-backpressure.md 8.2).
	ErrCircuitOpen = errors.New("client: circuit breaker open after repeated 429 responses")
	// ErrExecutionTimeout is the cause of a handler's context cancelled
	// at the job's execution timeout (ojs-timeouts.md 7.2): the handler
	// has the job's grace period to return.
	ErrExecutionTimeout = errors.New("job execution timeout")
	// ErrJobCancelled is the cause of a handler's context cancelled
	// because the server no longer holds the job for this worker: it was
	// cancelled, or the server ended the attempt.
	ErrJobCancelled = errors.New("job cancelled")
	// ErrShutdown is the cause of a handler's context cancelled when the
	// worker's drain timeout passed; the job is failed with error type
	// "shutdown".
	ErrShutdown = errors.New("worker shutting down")
	// ErrStopped is returned by a Worker that was stopped or not started.
	ErrStopped = errors.New("client: worker stopped")
)

// Error is an error the server answered: the OJS error envelope
// {"error":{"code","message","retryable","details","request_id"}} with the
// HTTP status (over NATS, the status of the Nats-Service-Error-Code
// header) and the headers that came with it.
type Error struct {
	Status int
	Code   string
	// Type is the class of the failure (openapi.yaml's error type):
	// "validation_error" for a value out of its range (422), else the code.
	Type      string
	Message   string
	Retryable bool
	Details   map[string]any
	RequestID string
	// DocsURL links the section of jetgate's reference for the code.
	DocsURL string
	// RetryAfter is the Retry-After the server asked for (0: none).
	RetryAfter time.Duration
	// Header holds the response headers (Retry-After, X-OJS-Queue-*,
	// X-RateLimit-*).
	Header http.Header
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ojs %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// IsStatus reports whether err is an *Error with the given status.
func IsStatus(err error, status int) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Status == status
}

// IsCode reports whether err is an *Error with the given OJS code.
func IsCode(err error, code string) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code == code
}

// envelope is the OJS error envelope.
type envelope struct {
	Error *struct {
		Code      string         `json:"code"`
		Type      string         `json:"type"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
		Details   map[string]any `json:"details"`
		RequestID string         `json:"request_id"`
		DocsURL   string         `json:"docs_url"`
	} `json:"error"`
}

// newError builds the *Error of a failed answer.
func newError(status int, body []byte, h http.Header) *Error {
	e := &Error{Status: status, Header: h, RetryAfter: retryAfter(h)}
	var env envelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Code, e.Message, e.Retryable = env.Error.Code, env.Error.Message, env.Error.Retryable
		e.Details, e.RequestID = env.Error.Details, env.Error.RequestID
		e.Type, e.DocsURL = env.Error.Type, env.Error.DocsURL
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
		e.Retryable = status == http.StatusTooManyRequests || status >= 500
	}
	if e.Code == "" {
		e.Code = http.StatusText(status)
	}
	if e.RequestID == "" && h != nil {
		e.RequestID = h.Get("X-Request-Id")
	}
	return e
}

// retryAfter reads Retry-After as (possibly fractional) seconds or an
// HTTP date.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// JobError is the error of a failed attempt as a worker reports it (the
// binding's {"code","message","retryable","details"} with the worker
// protocol's "type"). A handler may return one to choose its type and
// whether it is retryable; RateLimitedUntil builds one.
type JobError struct {
	Type      string `json:"type,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Retryable *bool  `json:"retryable,omitempty"`
	Details   any    `json:"details,omitempty"`
	// RateLimitUntil holds every job of the job's rate-limit key until
	// then (ojs-rate-limiting.md 9.1).
	RateLimitUntil *time.Time `json:"rate_limit_until,omitempty"`
}

func (e *JobError) Error() string {
	if e.Type != "" {
		return e.Type + ": " + e.Message
	}
	return e.Message
}

// RateLimitedUntil is the error a handler returns when a downstream
// service rate-limited it: the attempt fails (retryable) and the server
// starts no job of the job's rate-limit key before t
// (ojs-rate-limiting.md 9.1, rate_limit_until).
func RateLimitedUntil(t time.Time) error {
	t = t.UTC()
	return &JobError{Type: "rate_limited", Code: "rate_limited", Retryable: ptr(true),
		Message: "rate limited downstream until " + t.Format(time.RFC3339Nano), RateLimitUntil: &t}
}

// Fail is an error a handler returns to fail the attempt with error type
// typ; retryable false discards the job without further attempts.
func Fail(typ, message string, retryable bool) error {
	return &JobError{Type: typ, Code: typ, Message: message, Retryable: &retryable}
}

func ptr[T any](v T) *T { return &v }
