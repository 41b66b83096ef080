package ojs

import "strings"

// Types of the operator API (ojs-admin-api.md), served under /ojs/v1/admin/.

// JobFilter selects jobs for GET /ojs/v1/admin/jobs and the bulk
// operations (7.1, 8). Empty fields match everything.
type JobFilter struct {
	Queue string `json:"queue,omitempty"`
	State State  `json:"state,omitempty"`
	// Type is an exact job type, or a prefix when it ends with "*".
	Type string `json:"type,omitempty"`
	// Since and Until bound created_at (since inclusive, until exclusive).
	Since *Time `json:"since,omitempty"`
	Until *Time `json:"until,omitempty"`
}

// Match reports whether j passes every field of the filter.
func (f JobFilter) Match(j *Job) bool {
	if f.Queue != "" && j.Queue != f.Queue {
		return false
	}
	if f.State != "" && j.State != f.State {
		return false
	}
	if f.Type != "" {
		if p, ok := strings.CutSuffix(f.Type, "*"); ok {
			if !strings.HasPrefix(j.Type, p) {
				return false
			}
		} else if j.Type != f.Type {
			return false
		}
	}
	if f.Since != nil || f.Until != nil {
		if j.CreatedAt == nil {
			return false
		}
		if f.Since != nil && j.CreatedAt.Before(f.Since.Time) {
			return false
		}
		if f.Until != nil && !j.CreatedAt.Before(f.Until.Time) {
			return false
		}
	}
	return true
}

// Countable reports whether the jobs the filter matches can be counted from
// the per-queue, per-state counters alone (no type or time bound).
func (f JobFilter) Countable() bool { return f.Type == "" && f.Since == nil && f.Until == nil }

// JobListQuery is GET /ojs/v1/admin/jobs: a filter and a page, given by
// number (Page, 1-based) or by a cursor a previous page returned.
type JobListQuery struct {
	Filter  JobFilter
	Page    int
	PerPage int
	Cursor  string
	// Sort, when set, orders the listing by one of the Sort* fields
	// (descending with Desc) instead of stream order.
	Sort string
	Desc bool
}

// Orders of a job listing (7.1): sort fields.
const (
	SortCreatedAt   = "created_at"
	SortScheduledAt = "scheduled_at"
	SortPriority    = "priority"
)

// AdminPagination is the admin API's pagination object (6.1, 7.1): total,
// page and per_page as the spec shows them, plus has_more and next_cursor,
// the cheap way to the next page. Total is absent when it is not known
// without reading every job (a type or time filter).
type AdminPagination struct {
	Total      *int64 `json:"total,omitempty"`
	Page       int    `json:"page"`
	PerPage    int    `json:"per_page"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// JobList is one page of a job listing. Scanned counts the messages read
// to build it (ready messages and job records).
type JobList struct {
	Items      []*Job
	Pagination AdminPagination
	Scanned    int
}

// AdminQueue is one queue of GET /ojs/v1/admin/queues (6.1, 6.2).
type AdminQueue struct {
	Name         string          `json:"name"`
	State        string          `json:"state"`
	Paused       bool            `json:"paused"`
	Counts       map[State]int64 `json:"counts"`
	Backpressure *Backpressure   `json:"backpressure,omitempty"`
	// BoundSource says where the bound comes from: queue, default or none.
	BoundSource string  `json:"backpressure_source,omitempty"`
	RateLimit   *Limits `json:"rate_limit,omitempty"`
	Aging       *Aging  `json:"aging,omitempty"`
	CreatedAt   *Time   `json:"created_at,omitempty"`
	PausedAt    *Time   `json:"paused_at,omitempty"`
	ResumedAt   *Time   `json:"resumed_at,omitempty"`
}

// AdminQueueList is GET /ojs/v1/admin/queues.
type AdminQueueList struct {
	Items      []AdminQueue    `json:"items"`
	Pagination AdminPagination `json:"pagination"`
}

// AdminStats is GET /ojs/v1/admin/stats (10.1).
type AdminStats struct {
	Queues       int `json:"queues"`
	PausedQueues int `json:"paused_queues"`
	// Workers counts the workers the registry knows and has not expired
	// (stale ones included, as GET /ojs/v1/admin/workers lists them).
	Workers       int             `json:"workers"`
	Jobs          map[State]int64 `json:"jobs"`
	Throughput    Throughput      `json:"throughput"`
	UptimeSeconds int64           `json:"uptime_seconds"`
	ComputedAt    *Time           `json:"computed_at"`
}

// Throughput is what every queue did over the last minute (10.1, issue
// 32): attempts ended (processed: completed plus failed, as Sidekiq counts
// processed jobs), completed and failed, per minute.
type Throughput struct {
	ProcessedPerMinute float64 `json:"processed_per_minute"`
	CompletedPerMinute float64 `json:"completed_per_minute"`
	FailedPerMinute    float64 `json:"failed_per_minute"`
}

// Bulk actions (8.1-8.3).
const (
	BulkRetry  = "retry"
	BulkCancel = "cancel"
	BulkDelete = "delete"
)

// BulkRequest is POST /ojs/v1/admin/jobs/bulk/{action}: the jobs the filter
// matches, at most Limit of them, from Cursor on (a previous answer's
// next_cursor) or from the start.
type BulkRequest struct {
	Action string
	Filter JobFilter
	Limit  int
	Cursor string
}

// BulkResult is the answer of a bulk operation (8.1).
type BulkResult struct {
	Action     string      `json:"action"`
	Matched    int         `json:"matched"`
	Succeeded  int         `json:"succeeded"`
	Failed     int         `json:"failed"`
	Errors     []BulkError `json:"errors"`
	HasMore    bool        `json:"has_more"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// BulkError is a job a bulk operation could not change, and why.
type BulkError struct {
	JobID string `json:"job_id"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// DeadLetterStats is GET /ojs/v1/dead-letter/stats (ojs-dead-letter.md
// 10.1), from the counters: the discarded jobs in all and per queue.
type DeadLetterStats struct {
	Total      int64            `json:"total"`
	ByQueue    map[string]int64 `json:"by_queue"`
	Retention  *DeadRetention   `json:"retention,omitempty"`
	ComputedAt *Time            `json:"computed_at"`
}

// DeadRetention is how long discarded jobs are kept.
type DeadRetention struct {
	MaxAge string `json:"max_age"`
}

// Fail records a job the operation could not change.
func (r *BulkResult) Fail(jobID, code string, err error) {
	r.Failed++
	r.Errors = append(r.Errors, BulkError{JobID: jobID, Code: code, Error: err.Error()})
}
