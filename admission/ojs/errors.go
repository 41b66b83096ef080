package ojs

import (
	"errors"
	"fmt"
)

// Error codes of the HTTP binding (ojs-http-binding.md 16.3).
const (
	CodeInvalidRequest   = "invalid_request"
	CodeInvalidPayload   = "invalid_payload"
	CodeNotFound         = "not_found"
	CodeBackendError     = "backend_error"
	CodeRateLimited      = "rate_limited"
	CodeDuplicate        = "duplicate"
	CodeQueuePaused      = "queue_paused"
	CodeSchemaValidation = "schema_validation"
	CodeUnsupported      = "unsupported"
	CodeConflict         = "conflict"
	CodePayloadTooLarge  = "payload_too_large"
	// CodeUnauthorized (401) and CodeForbidden (403) refuse a request
	// without a valid bearer token, or whose token's role may not do it.
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	// CodeQueueFull is a backpressure refusal (429). It is written as
	// ojs-errors.md 4.4 and ojs-backpressure.md 7.1 write it, the one
	// code of the catalog the binding's lowercase table does not list
	// (spec/README.md decision 8).
	CodeQueueFull = "QUEUE_FULL"
)

// Sentinel errors. Wrap them (or use the typed errors below) so httpbind can
// map them with errors.Is / errors.As.
var (
	ErrNotFound     = errors.New("not found")
	ErrDuplicate    = errors.New("duplicate job")
	ErrInvalidState = errors.New("invalid state transition")
	ErrQueuePaused  = errors.New("queue paused")
	ErrUnavailable  = errors.New("backend unavailable")
	ErrInvalid      = errors.New("invalid request")
	ErrConflict     = errors.New("conflict")
	ErrShuttingDown = errors.New("server shutting down")
	ErrTooLarge     = errors.New("payload too large")
)

// ValidationError names the field and the rule a request broke. It maps to
// 400 invalid_request, or invalid_payload when it is about a job envelope
// or a body that is not JSON (httpbind decides, it knows the request).
type ValidationError struct {
	Field    string // JSON path, e.g. "options.retry.max_attempts"
	Rule     string // what was expected, e.g. "integer >= 1"
	Received string // what was sent, shortened; may be empty
	Message  string // optional full sentence; built from the rest if empty
	// Semantic marks a value that breaks a rule of what it means rather
	// than of the request's shape: a retry policy out of range (issue 32,
	// ojs-retry.md 11.1). The bindings answer it 422 with error type
	// validation_error instead of 400.
	Semantic bool
}

func (e *ValidationError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Received != "" {
		return fmt.Sprintf("field '%s' must be %s (received %s)", e.Field, e.Rule, e.Received)
	}
	return fmt.Sprintf("field '%s' must be %s", e.Field, e.Rule)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// NotFoundError says which resource is missing. It maps to 404.
type NotFoundError struct {
	Resource string // "job", "queue", "dead_letter_job"
	ID       string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s '%s' not found", e.Resource, e.ID) }

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// StateError is an illegal transition on a job. It maps to 409.
type StateError struct {
	JobID    string
	Current  State
	Expected State // may be empty
	Op       string
	// Reason, when set, says why the job left the expected state, e.g. a
	// timeout the server enforced before a late ack or nack arrived.
	Reason string
}

func (e *StateError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("cannot %s job %s: state is '%s', expected '%s': %s", e.Op, e.JobID, e.Current, e.Expected, e.Reason)
	}
	if e.Expected != "" {
		return fmt.Sprintf("cannot %s job %s: state is '%s', expected '%s'", e.Op, e.JobID, e.Current, e.Expected)
	}
	return fmt.Sprintf("cannot %s job %s in state '%s'", e.Op, e.JobID, e.Current)
}

// Unwrap makes errors.Is(err, ErrInvalidState) true.
func (e *StateError) Unwrap() error { return ErrInvalidState }

// DuplicateError is a job id (or unique key) that already exists. 409.
type DuplicateError struct {
	ExistingID string
	UniqueKey  string
}

func (e *DuplicateError) Error() string {
	if e.UniqueKey != "" {
		return fmt.Sprintf("a job with unique key '%s' already exists (%s)", e.UniqueKey, e.ExistingID)
	}
	return fmt.Sprintf("a job with id '%s' already exists", e.ExistingID)
}

// Unwrap makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// DeduplicatedError answers an enqueue with an existing job instead of a
// new one (a unique job with on_conflict ignore, ojs-unique-jobs.md 5.4):
// nothing was created and Job is the existing job. It is not a failure:
// the HTTP binding answers 200 with Job.
type DeduplicatedError struct {
	Job *Job
}

func (e *DeduplicatedError) Error() string {
	return fmt.Sprintf("deduplicated: job %s already exists", e.Job.ID)
}

// QueuePausedError is an enqueue to a paused queue: 422 queue_paused in
// the binding's vocabulary. jetgate's admission does not return it (a
// paused queue accepts enqueues, spec/README.md decision 7); httpbind maps
// it for any Backend that refuses them.
type QueuePausedError struct {
	Queue    string
	PausedAt *Time
}

func (e *QueuePausedError) Error() string {
	return fmt.Sprintf("queue '%s' is currently paused", e.Queue)
}

// Unwrap makes errors.Is(err, ErrQueuePaused) true.
func (e *QueuePausedError) Unwrap() error { return ErrQueuePaused }
