package ojs

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// FetchRequest is a worker's FETCH (ojs-http-binding.md 10.1).
type FetchRequest struct {
	Queues   []string
	Count    int // 1 when zero
	WorkerID string
	// VisibilityTimeout overrides the job's reservation period when > 0.
	VisibilityTimeout time.Duration
	// Strategy is how Queues are consumed (ojs-priority.md 7): strict
	// ("" or StrategyStrict: in the order listed) or weighted (each fetch
	// tries the queues in a random order drawn by Weights).
	Strategy string
	// Weights of the queues under the weighted strategy; a queue without
	// a weight has weight 1, a weight of 0 leaves the queue out.
	Weights map[string]int
	// Group names a worker group whose stored defaults (WorkerGroup) fill
	// in what the fetch leaves out: its queues when Queues is empty, its
	// strategy when Strategy is empty, and the weights of queues the
	// fetch gives none for.
	Group string
	// Pool is the pool the worker declared in its heartbeat
	// (ojs-fair-scheduling.md 6.2), set by the worker registry: applied
	// like Group when the fetch names none, and ignored while no such
	// group exists.
	Pool string
	// Budget, when set, bounds the bytes of the jobs answered (a NATS
	// reply must fit max_payload): no job is claimed past it, and the
	// jobs that did not fit stay available, given back at once.
	Budget *FetchBudget
}

// Queue consumption strategies (ojs-priority.md 7).
const (
	StrategyStrict   = "strict"
	StrategyWeighted = "weighted"
)

// AckRequest is a worker's ACK. WorkerID is optional: the official clients
// do not send it, so ownership is not checked against it.
type AckRequest struct {
	JobID    string
	Result   json.RawMessage
	WorkerID string
	// Attempt, when set, is the attempt the result is for: a result for
	// another attempt is late (409).
	Attempt int
}

// AckResult is the answer to an ACK. ID repeats JobID: the official
// clients read "id", the binding's example shows "job_id".
type AckResult struct {
	ID          string `json:"id"`
	JobID       string `json:"job_id"`
	State       State  `json:"state"`
	CompletedAt *Time  `json:"completed_at"`
}

// NackRequest is a worker's FAIL.
type NackRequest struct {
	JobID    string
	Error    JobError
	WorkerID string
	Attempt  int // as in AckRequest
	// Requeue hands the job back without failing it (a worker shutting
	// down, issue 32): it is available again at once, its attempt is not
	// counted, and Error (optional then) is not recorded.
	Requeue bool
}

// NackResult is the answer to a FAIL. ID repeats JobID as in AckResult.
// RetryDelayMs, set when the job is retryable, is how many milliseconds
// remain until the retry is due (NextAttemptAt - now, at least 0).
// CompletedAt, set when the job is discarded, is when it reached that
// terminal state, as for a completed job (issue 32). Requeued answers a
// requeue: the job is available, Attempt the attempts it has used.
type NackResult struct {
	ID            string `json:"id"`
	JobID         string `json:"job_id"`
	State         State  `json:"state"`
	Attempt       int    `json:"attempt"`
	MaxAttempts   int    `json:"max_attempts"`
	NextAttemptAt *Time  `json:"next_attempt_at,omitempty"`
	RetryDelayMs  *int64 `json:"retry_delay_ms,omitempty"`
	DiscardedAt   *Time  `json:"discarded_at,omitempty"`
	CompletedAt   *Time  `json:"completed_at,omitempty"`
	Requeued      bool   `json:"requeued,omitempty"`
}

// Worker lifecycle directives answered to a heartbeat.
const (
	WorkerRunning   = "running"
	WorkerQuiet     = "quiet"
	WorkerTerminate = "terminate"
)

// HeartbeatRequest is a worker's BEAT. JobIDs merges active_jobs (array
// form) and active_job_ids.
type HeartbeatRequest struct {
	WorkerID          string
	JobIDs            []string
	VisibilityTimeout time.Duration // 0: each job's own reservation period
	// Worker is what the worker says about itself (state, hostname ...).
	Worker WorkerInfo
}

// HeartbeatResult is the answer to a BEAT.
type HeartbeatResult struct {
	State    string   `json:"state"`
	Extended []string `json:"jobs_extended"`
	// Cancel lists the jobs whose execution timeout passed: the worker
	// should cancel them and report within their grace period
	// (ojs-timeouts.md 5.4).
	Cancel     []string  `json:"jobs_to_cancel"`
	ServerTime time.Time `json:"-"`
	// WorkerState is the registry's state of the worker, which may be
	// drain (State then says terminate); empty without a registry.
	WorkerState string `json:"-"`
}

// QueueInfo is one queue as listed by GET /ojs/v1/queues.
type QueueInfo struct {
	Name      string `json:"name"`
	Status    string `json:"status"` // "active" or "paused"
	CreatedAt *Time  `json:"created_at,omitempty"`
	PausedAt  *Time  `json:"paused_at,omitempty"`
	ResumedAt *Time  `json:"resumed_at,omitempty"`
	// RateLimit is the queue-level rate limit (ojs-rate-limiting.md 7.2):
	// it holds for every job of the queue, with the job's own limits.
	RateLimit *Limits `json:"rate_limit,omitempty"`

	// Backpressure is the queue's own bound (PUT .../config), nil when it
	// follows the server-wide default.
	Backpressure *Backpressure `json:"backpressure,omitempty"`

	// Aging is the queue's priority aging (ojs-priority.md 8.2), nil when
	// the queue has none.
	Aging *Aging `json:"aging,omitempty"`
}

// Queue statuses.
const (
	QueueActive = "active"
	QueuePaused = "paused"
)

// QueueStats is GET /ojs/v1/queues/{name}/stats.
type QueueStats struct {
	Queue      string           `json:"queue"`
	Status     string           `json:"status"`
	Stats      QueueStatsCounts `json:"stats"`
	ComputedAt *Time            `json:"computed_at"`

	// Backpressure is the depth, bound and pressure of a bounded queue.
	Backpressure *Pressure `json:"backpressure,omitempty"`
}

// QueueStatsCounts are the per-state counts of a queue.
type QueueStatsCounts struct {
	Available           int64   `json:"available"`
	Active              int64   `json:"active"`
	Scheduled           int64   `json:"scheduled"`
	Retryable           int64   `json:"retryable"`
	Pending             int64   `json:"pending"`
	Discarded           int64   `json:"discarded"`
	Completed           int64   `json:"completed"`
	Cancelled           int64   `json:"cancelled"`
	CompletedLastHour   int64   `json:"completed_last_hour"`
	FailedLastHour      int64   `json:"failed_last_hour"`
	AvgDurationMs       float64 `json:"avg_duration_ms"`
	AvgWaitMs           float64 `json:"avg_wait_ms"`
	ThroughputPerSecond float64 `json:"throughput_per_second"`

	// Queue, Depth and Bound are set on a bounded queue only
	// (ojs-backpressure.md 3), named as a QUEUE_FULL refusal names them
	// (7.1): the queue, its depth (the non-terminal jobs counted against
	// its bound) and the bound on depth (max_depth; absent for a queue
	// bounded by size alone).
	Queue string `json:"queue,omitempty"`
	Depth *int64 `json:"depth,omitempty"`
	Bound *int64 `json:"bound,omitempty"`
	// Starts (dispatches) in the last minute and their summed wait, for
	// the scheduling statistics (ojs-fair-scheduling.md 10.2).
	StartedLastMinute int64 `json:"-"`
	WaitMsLastMinute  int64 `json:"-"`
}

// PageRequest selects a page of a list: Offset, or an opaque Cursor from a
// previous page (the cursor wins when both are given).
type PageRequest struct {
	Limit  int
	Offset int
	Cursor string
}

// Pagination is the binding's pagination object (section 17.2).
type Pagination struct {
	Total      int    `json:"total"`
	Limit      int    `json:"limit"`
	Offset     int    `json:"offset"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// DeadLetterQuery filters GET /ojs/v1/dead-letter.
type DeadLetterQuery struct {
	Queue string
	Page  PageRequest
}

// JobPage is one page of jobs.
type JobPage struct {
	Jobs       []*Job     `json:"jobs"`
	Pagination Pagination `json:"pagination"`
}

// Health is GET /ojs/v1/health.
type Health struct {
	Status        string        `json:"status"` // "ok" or "degraded"
	Version       string        `json:"version"`
	UptimeSeconds int64         `json:"uptime_seconds"`
	Backend       HealthBackend `json:"backend"`
}

// Backend health statuses (HealthBackend.Status).
const (
	BackendOK        = "ok"        // JetStream answered promptly
	BackendDegraded  = "degraded"  // JetStream answered, slowly
	BackendUnhealthy = "unhealthy" // JetStream did not answer
)

// HealthBackend describes the NATS connection. LatencyMs is an integer:
// the official Go SDK decodes it into an int.
type HealthBackend struct {
	Type      string `json:"type"`
	Status    string `json:"status"`
	LatencyMs int64  `json:"latency_ms"`
	Error     string `json:"error,omitempty"`
	Server    string `json:"server,omitempty"`
}

// Readiness is GET /ready: whether this process can serve requests.
type Readiness struct {
	Ready bool `json:"-"`
	// Status is "ok" when ready, else "unavailable".
	Status string `json:"status"`
	// Reason says why the process is not ready.
	Reason string `json:"reason,omitempty"`
	// Missing names the JetStream streams (a bucket B as "KV_B") that
	// should exist and do not.
	Missing []string `json:"missing,omitempty"`
}

// Event is an OJS event envelope (ojs-events.md 2.1).
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Source          string          `json:"source"`
	Time            Time            `json:"time"`
	Subject         string          `json:"subject,omitempty"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Data            json.RawMessage `json:"data"`
}

// EventQuery filters GET /ojs/v1/events (ojs-events.md 6.4). Every
// filter that is set must hold; a list holds when any of its items does.
// Match applies them to one event, so any source of events filters alike.
type EventQuery struct {
	Types []string // empty: all; "job.*" every job event, "*" all
	Limit int
	Since time.Time
	// Queues keeps events whose data.queue is one of them.
	Queues []string
	// JobTypes keeps events whose data.job_type is one of them.
	JobTypes []string
}

// Match reports whether ev passes every filter of q (Limit aside).
func (q EventQuery) Match(ev Event) bool {
	if !q.Since.IsZero() && ev.Time.Before(q.Since) {
		return false
	}
	if len(q.Types) > 0 && !slices.ContainsFunc(q.Types, func(t string) bool { return typeMatches(t, ev.Type) }) {
		return false
	}
	if len(q.Queues) == 0 && len(q.JobTypes) == 0 {
		return true
	}
	var d struct {
		Queue   string `json:"queue"`
		JobType string `json:"job_type"`
	}
	if json.Unmarshal(ev.Data, &d) != nil {
		return false
	}
	return (len(q.Queues) == 0 || slices.Contains(q.Queues, d.Queue)) &&
		(len(q.JobTypes) == 0 || slices.Contains(q.JobTypes, d.JobType))
}

// typeMatches matches an event type against a filter: the type itself,
// "prefix.*" (every type under prefix) or "*".
func typeMatches(filter, typ string) bool {
	switch {
	case filter == "*" || filter == typ:
		return true
	case strings.HasSuffix(filter, ".*"):
		return strings.HasPrefix(typ, strings.TrimSuffix(filter, "*"))
	}
	return false
}

// PriorityChange answers PATCH /ojs/v1/jobs/{id} {"priority"}
// (ojs-priority.md 10.2).
type PriorityChange struct {
	ID               string `json:"id"`
	Priority         int    `json:"priority"`
	PreviousPriority int    `json:"previous_priority"`
}

// PriorityStats is GET /ojs/v1/queues/{queue}/priority-stats
// (ojs-priority.md 10.3): available jobs per priority.
type PriorityStats struct {
	Queue            string           `json:"queue"`
	CountsByPriority map[string]int64 `json:"counts_by_priority"`
	Total            int64            `json:"total"`
}
