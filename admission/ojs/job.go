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
	// TotalTimeout bounds the job's life from created_at to its end,
	// across attempts and backoffs (ojs-timeouts.md 5.2), in seconds
	// rounded up from TotalTimeoutMs; 0: none.
	TotalTimeout   int   `json:"total_timeout,omitempty"`
	TotalTimeoutMs int64 `json:"total_timeout_ms,omitempty"`
	// EnqueueTTL bounds the time from created_at to the first start
	// (ojs-timeouts.md 5.3), in seconds rounded up from EnqueueTTLMs; 0:
	// none.
	EnqueueTTL   int   `json:"enqueue_ttl,omitempty"`
	EnqueueTTLMs int64 `json:"enqueue_ttl_ms,omitempty"`
	// GracePeriod is the time between the cancel signal at the execution
	// timeout and the end of the attempt (ojs-timeouts.md 5.4); nil: the
	// server default, 0: none.
	GracePeriod   *int   `json:"grace_period,omitempty"`
	GracePeriodMs *int64 `json:"grace_period_ms,omitempty"`
	// HeartbeatTimeout is the longest silence of an active job's worker
	// before the job is stalled (ojs-timeouts.md 5.5); the binding's
	// visibility_timeout(_ms) sets it too. 0: the server default.
	HeartbeatTimeout   int          `json:"heartbeat_timeout,omitempty"`
	HeartbeatTimeoutMs int64        `json:"heartbeat_timeout_ms,omitempty"`
	ScheduledAt        *Time        `json:"scheduled_at,omitempty"`
	ExpiresAt          *Time        `json:"expires_at,omitempty"`
	Retry              *RetryPolicy `json:"retry,omitempty"`
	// RateLimit is the job's rate limit policy (ojs-rate-limiting.md 6),
	// from rate_limit or options.rate_limit.
	RateLimit *RateLimitPolicy `json:"rate_limit,omitempty"`
	// Pending asks for the job to be staged until activated
	// (options.pending). It is an enqueue instruction, not stored: the
	// state says pending afterwards.
	Pending bool `json:"-"`

	// System-managed. RetryDelayMs is the backoff that preceded the job's
	// current (or next) attempt in milliseconds, set when a failed attempt
	// schedules a retry, so a fetched retry carries it (issue 32); absent
	// on a job that never waited for a retry.
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
	RetryDelayMs  *int64          `json:"retry_delay_ms,omitempty"`
	WorkerID      string          `json:"worker_id,omitempty"`
	Error         *JobError       `json:"error,omitempty"`
	Errors        []JobError      `json:"errors,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`

	// Progress of the current or last attempt (ojs-progress.md): the
	// fraction done, the worker's structured data and message, and when it was last
	// reported. A new attempt starts without.
	Progress          *float64        `json:"progress,omitempty"`
	ProgressData      json.RawMessage `json:"progress_data,omitempty"`
	ProgressMessage   string          `json:"progress_message,omitempty"`
	ProgressUpdatedAt *Time           `json:"progress_updated_at,omitempty"`
	// LastCheckpoint is the checkpoint of the latest progress update that
	// carried one, in this attempt or an earlier one (ojs-progress.md 6.4).
	LastCheckpoint json.RawMessage `json:"last_checkpoint,omitempty"`

	// Extra holds unknown top-level fields, written back verbatim.
	Extra map[string]json.RawMessage `json:"-"`

	// Internal is server bookkeeping stored with the record under
	// "x_jetgate" and never shown to clients (see Public).
	Internal Internal `json:"x_jetgate,omitzero"`

	// Rev is the revision of the record this copy was read at (0: not
	// read from the store). A transition's new record carries the
	// revision it replaces. Not stored.
	Rev uint64 `json:"-"`
	// Seed marks a copy read from the job's ready message because the job
	// has no record yet (an available job keeps none until it leaves
	// available, jetstream/jobstore/doc.go): the next write creates the
	// record, expecting Rev (0, or the deletion marker the enqueue met).
	// Not stored.
	Seed bool `json:"-"`
	// ServerID marks an id ParseJob made because the request had none: a
	// fresh UUIDv7 that no other job can hold, so an enqueue need not
	// check it (jobstore.PublishSeed). Not stored.
	ServerID bool `json:"-"`
}

// Internal is the server's bookkeeping on a job record.
type Internal struct {
	// Token changes on every transition. Messages that act on a job later
	// (ready messages, timers) carry the token of the transition that
	// created them and are ignored once the record's token has moved on.
	Token string `json:"token,omitempty"`
	// LeaseUntil is the first deadline of an active job's attempt, as of
	// its start: its heartbeat timeout or execution timeout (lease.go).
	LeaseUntil *Time `json:"lease_until,omitempty"`
	// BeatMs is the heartbeat timeout of the current attempt in
	// milliseconds: the fetch's visibility timeout, the job's, or the
	// server default.
	BeatMs int64 `json:"beat_ms,omitempty"`
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
	// OverSeq is the sequence of the job's overdraft unit: a job that came
	// back from active to retry while its queue was full counts over the
	// bound, in the overdraft stream, until it is claimed or finishes.
	OverSeq uint64 `json:"over_seq,omitempty"`
	// Origin is the token of a job stored at enqueue as its ready message
	// alone (jetstream/jobstore/seed.go), kept by every record written
	// after: an enqueue that meets a record of its id tells its own job,
	// claimed meanwhile, from another one.
	Origin string `json:"origin,omitempty"`
}

// IsZero reports whether i holds nothing (for omitzero).
func (i Internal) IsZero() bool {
	return i.Token == "" && i.LeaseUntil == nil && i.BeatMs == 0 && i.HeldAck == "" && i.HeldToken == "" && len(i.Limits) == 0 &&
		i.DepthSeq == 0 && i.OverSeq == 0 && i.Origin == ""
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
	// TimeoutKind, LimitSeconds and ElapsedSeconds describe an error the
	// server set because a timeout fired (ojs-timeouts.md 8): kind
	// execution, total, enqueue_ttl or stalled, the limit, and how long it
	// had been, in seconds rounded up; LimitMs and ElapsedMs are the same in
	// milliseconds.
	TimeoutKind    string `json:"timeout_kind,omitempty"`
	LimitSeconds   int64  `json:"limit_seconds,omitempty"`
	ElapsedSeconds int64  `json:"elapsed_seconds,omitempty"`
	LimitMs        int64  `json:"limit_ms,omitempty"`
	ElapsedMs      int64  `json:"elapsed_ms,omitempty"`
}

// Classify fills in Type when the worker sent none (issue 32): a stored
// error always has the type that classifies it (ojs-core.md 8 makes it
// required), the worker's type, else its code, else ErrorTypeHandler.
func (e *JobError) Classify() {
	if e.Type == "" {
		e.Type = e.Code
	}
	if e.Type == "" {
		e.Type = ErrorTypeHandler
	}
}

// ErrorTypeHandler is the type of a failure the worker reported with a
// message alone: an error of its handler (ojs-http-binding.md 16.3
// handler_error).
const ErrorTypeHandler = "handler_error"

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
	c.GracePeriod = clonePtr(j.GracePeriod)
	c.GracePeriodMs = clonePtr(j.GracePeriodMs)
	c.Progress = clonePtr(j.Progress)
	if j.Extra != nil {
		c.Extra = make(map[string]json.RawMessage, len(j.Extra))
		for k, v := range j.Extra {
			c.Extra[k] = v
		}
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Public returns a copy of j without server bookkeeping, for responses.
func (j *Job) Public() *Job {
	c := *j
	c.Internal = Internal{}
	return &c
}

// HeartbeatTimeoutOr returns the job's heartbeat timeout or def.
func (j *Job) HeartbeatTimeoutOr(def time.Duration) time.Duration {
	if j.HeartbeatTimeoutMs > 0 {
		return time.Duration(j.HeartbeatTimeoutMs) * time.Millisecond
	}
	return def
}

// GraceOr returns the job's grace period or def.
func (j *Job) GraceOr(def time.Duration) time.Duration {
	if j.GracePeriodMs != nil {
		return time.Duration(*j.GracePeriodMs) * time.Millisecond
	}
	return def
}

// TotalDeadline is when the job's total timeout ends, if it has one.
func (j *Job) TotalDeadline() (time.Time, bool) {
	if j.TotalTimeoutMs <= 0 || j.CreatedAt == nil {
		return time.Time{}, false
	}
	return j.CreatedAt.Add(time.Duration(j.TotalTimeoutMs) * time.Millisecond), true
}

// TTLDeadline is when the job's enqueue TTL ends, if it has one and has
// never started. A job handed back by a requeue (issue 32) started once
// even though its attempt count went back to 0: its started_at says so.
func (j *Job) TTLDeadline() (time.Time, bool) {
	if j.EnqueueTTLMs <= 0 || j.CreatedAt == nil || j.Attempt > 0 || j.StartedAt != nil {
		return time.Time{}, false
	}
	return j.CreatedAt.Add(time.Duration(j.EnqueueTTLMs) * time.Millisecond), true
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
		j.upgrade()
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
	j.upgrade()
	return nil
}

// upgrade brings a record stored before issue 32 to today's shape, so it
// reads as a new one: a discarded job has completed_at (the time of its
// terminal state, its discarded_at), and every stored error its type.
func (j *Job) upgrade() {
	if j.State == StateDiscarded && j.CompletedAt == nil {
		j.CompletedAt = j.DiscardedAt
	}
	if j.Error != nil && j.Error.Type == "" {
		j.Error.Classify()
	}
	for i := range j.Errors {
		if j.Errors[i].Type == "" {
			j.Errors[i].Classify()
		}
	}
}
