package ojs

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// SpecVersion is the OJS core version of every envelope jetgate writes.
const SpecVersion = "1.0"

// DefaultQueue is used when a job names no queue.
const DefaultQueue = "default"

// DefaultPriority is the priority of a job that sets none (ojs-priority.md:
// lower value runs first, default 2).
const DefaultPriority = 2

// MaxPriority is the largest priority accepted (PRI-006 asks for >= 255).
// Each priority in use is one subject and one consumer, so the range is
// bounded; 0..999 keeps the ready subjects three digits wide.
const MaxPriority = 999

// Job is the OJS job envelope plus the fields the server manages. Client
// fields are set by ParseJob / ParseBatch; system fields only by the server.
//
// Unknown top-level fields are kept in Extra and written back unchanged, so
// envelopes from newer clients round-trip (ojs-json-format.md). ParseJob
// keeps unknown keys of the request's "options" object under
// Extra["options"].
type Job struct {
	// Client-provided.
	SpecVersion string          `json:"specversion"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Meta        json.RawMessage `json:"meta,omitempty"`
	Priority    int             `json:"priority"`
	Tags        []string        `json:"tags,omitempty"`
	Schema      string          `json:"schema,omitempty"`
	Unique      json.RawMessage `json:"unique,omitempty"`
	// Timeout is the execution timeout in seconds (0: server default),
	// rounded up from TimeoutMs when that is not whole seconds.
	Timeout int `json:"timeout,omitempty"`
	// TimeoutMs is the execution timeout in milliseconds (0: server
	// default); Parse sets it with Timeout. Prefer ExecutionTimeout.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// VisibilityTimeoutMs is the reservation period of a fetched job.
	VisibilityTimeoutMs int64        `json:"visibility_timeout_ms,omitempty"`
	ScheduledAt         *Time        `json:"scheduled_at,omitempty"`
	ExpiresAt           *Time        `json:"expires_at,omitempty"`
	Retry               *RetryPolicy `json:"retry,omitempty"`
	// RateLimit is the job's rate limit policy (ojs-rate-limiting.md 6),
	// from rate_limit or options.rate_limit.
	RateLimit *RateLimitPolicy `json:"rate_limit,omitempty"`
	// Pending asks for the job to be staged until activated
	// (options.pending). It is an enqueue instruction, not stored: the
	// state says pending afterwards.
	Pending bool `json:"-"`

	// System-managed.
	State         State           `json:"state"`
	Attempt       int             `json:"attempt"`
	MaxAttempts   int             `json:"max_attempts"`
	CreatedAt     *Time           `json:"created_at,omitempty"`
	EnqueuedAt    *Time           `json:"enqueued_at,omitempty"`
	StartedAt     *Time           `json:"started_at,omitempty"`
	CompletedAt   *Time           `json:"completed_at,omitempty"`
	CancelledAt   *Time           `json:"cancelled_at,omitempty"`
	DiscardedAt   *Time           `json:"discarded_at,omitempty"`
	ActivatedAt   *Time           `json:"activated_at,omitempty"`
	NextAttemptAt *Time           `json:"next_attempt_at,omitempty"`
	WorkerID      string          `json:"worker_id,omitempty"`
	Error         *JobError       `json:"error,omitempty"`
	Errors        []JobError      `json:"errors,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`

	// Extra holds unknown top-level fields, written back verbatim.
	Extra map[string]json.RawMessage `json:"-"`

	// Internal is server bookkeeping stored with the record under
	// "x_jetgate" and never shown to clients (see Public).
	Internal Internal `json:"x_jetgate,omitzero"`

	// Rev is the revision of the record this copy was read at (0: not
	// read from the store). A transition's new record carries the
	// revision it replaces. Not stored.
	Rev uint64 `json:"-"`
}

// Internal is the server's bookkeeping on a job record.
type Internal struct {
	// Token changes on every transition. Messages that act on a job later
	// (ready messages, timers) carry the token of the transition that
	// created them and are ignored once the record's token has moved on.
	Token string `json:"token,omitempty"`
	// LeaseUntil is when an active job's visibility timeout expires.
	LeaseUntil *Time `json:"lease_until,omitempty"`
	// HeldAck is the ack subject of the ready message an active job was
	// claimed from, while that message is still held unacknowledged as the
	// backstop of a lease timer not written yet; HeldToken is that
	// message's token.
	HeldAck   string `json:"held_ack,omitempty"`
	HeldToken string `json:"held_token,omitempty"`
	// Limits are the rate limit entries (kvlimits keys) an active job
	// holds a start in, released when it leaves active.
	Limits []string `json:"limits,omitempty"`
	// DepthSeq is the sequence of the job's unit in its queue's depth
	// stream (admission/backpressure.go), 0 when its queue was unbounded.
	DepthSeq uint64 `json:"depth_seq,omitempty"`
}

// IsZero reports whether i holds nothing (for omitzero).
func (i Internal) IsZero() bool {
	return i.Token == "" && i.LeaseUntil == nil && i.HeldAck == "" && i.HeldToken == "" && len(i.Limits) == 0 &&
		i.DepthSeq == 0
}

// JobError is the error object of a failed attempt (ojs-core.md section 8,
// with the binding's code/message/retryable/details shape).
type JobError struct {
	Code      string          `json:"code,omitempty"`
	Type      string          `json:"type,omitempty"`
	Message   string          `json:"message"`
	Retryable *bool           `json:"retryable,omitempty"`
	Details   json.RawMessage `json:"details,omitempty"`
	Backtrace json.RawMessage `json:"backtrace,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	At        *Time           `json:"occurred_at,omitempty"`
	// RateLimitUntil, sent by a handler that hit a downstream limit, holds
	// every job of the job's rate limit key until then (RL-R003).
	RateLimitUntil *Time `json:"rate_limit_until,omitempty"`
}

// Kind is the error's type for non-retryable matching: Type if set, else Code.
func (e *JobError) Kind() string {
	if e.Type != "" {
		return e.Type
	}
	return e.Code
}

// Clone returns a deep enough copy of j for a transition: slices and maps
// that transitions append to are copied, raw JSON is shared (never mutated).
func (j *Job) Clone() *Job {
	c := *j
	c.Tags = append([]string(nil), j.Tags...)
	c.Errors = append([]JobError(nil), j.Errors...)
	c.Internal.Limits = slices.Clone(j.Internal.Limits)
	if j.Extra != nil {
		c.Extra = make(map[string]json.RawMessage, len(j.Extra))
		for k, v := range j.Extra {
			c.Extra[k] = v
		}
	}
	return &c
}

// Public returns a copy of j without server bookkeeping, for responses.
func (j *Job) Public() *Job {
	c := *j
	c.Internal = Internal{}
	return &c
}

// VisibilityTimeout returns the job's reservation period or def.
func (j *Job) VisibilityTimeout(def time.Duration) time.Duration {
	if j.VisibilityTimeoutMs > 0 {
		return time.Duration(j.VisibilityTimeoutMs) * time.Millisecond
	}
	return def
}

// ExecutionTimeout returns the job's execution timeout or def.
func (j *Job) ExecutionTimeout(def time.Duration) time.Duration {
	switch {
	case j.TimeoutMs > 0:
		return time.Duration(j.TimeoutMs) * time.Millisecond
	case j.Timeout > 0:
		return time.Duration(j.Timeout) * time.Second
	}
	return def
}

type jobAlias Job

// MarshalJSON writes the envelope, then Internal as x_jetgate, then Extra
// (see AppendJSON). Callers that hold a *Job and only need the bytes
// should call AppendJSON: encoding/json validates and compacts whatever a
// MarshalJSON returns, a second pass over the record.
func (j Job) MarshalJSON() ([]byte, error) {
	return j.AppendJSON(make([]byte, 0, 768))
}

const internalKey = "x_jetgate"

// UnmarshalJSON reads a stored record: known fields, Internal and Extra.
// It does not validate; client input goes through Parse.
func (j *Job) UnmarshalJSON(b []byte) error {
	var a jobAlias
	// Most records have no unknown fields: one strict pass reads them. A
	// record with unknown fields takes a second pass that collects them.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err == nil {
		*j = Job(a)
		return nil
	}
	a = jobAlias{}
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	*j = Job(a)
	for k, v := range all {
		if !knownField(k) {
			if j.Extra == nil {
				j.Extra = map[string]json.RawMessage{}
			}
			j.Extra[k] = v
		}
	}
	return nil
}
