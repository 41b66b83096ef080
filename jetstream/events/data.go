package events

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// jobData is the data object of every job event (ojs-events.md section
// 4.1). Pointer fields are set only for the event types whose schema has
// them, so required zero values (attempt 0, duration_ms 0) still appear.
type jobData struct {
	JobType       string          `json:"job_type"`
	Queue         string          `json:"queue"`
	Priority      *int            `json:"priority,omitempty"`
	WorkerID      *string         `json:"worker_id,omitempty"`
	Attempt       *int            `json:"attempt,omitempty"`
	MaxAttempts   *int            `json:"max_attempts,omitempty"`
	TotalAttempts *int            `json:"total_attempts,omitempty"`
	DurationMs    *int64          `json:"duration_ms,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	// ResultOmitted says a result was left out to fit a bound (NATS
	// max_payload, Config.OwnEventBytes); ResultBytes is its size.
	ResultOmitted bool       `json:"result_omitted,omitempty"`
	ResultBytes   int        `json:"result_bytes,omitempty"`
	Error         *errorData `json:"error,omitempty"`
	LastError     *errorData `json:"last_error,omitempty"`
	NextRetryAt   *ojs.Time  `json:"next_retry_at,omitempty"`
	ScheduledAt   *ojs.Time  `json:"scheduled_at,omitempty"`
	VisibleUntil  *ojs.Time  `json:"visible_until,omitempty"`
	CreatedAt     *ojs.Time  `json:"created_at,omitempty"`
	ExpiredAt     *ojs.Time  `json:"expired_at,omitempty"`
	TTLMs         *int64     `json:"ttl_ms,omitempty"`
	TraceID       string     `json:"trace_id,omitempty"`
	// DataTruncated says the data was cut down to its small fields to fit
	// a bound (error messages, stack trace, result and extra fields left
	// out; codes kept); EventBytes is the size of the event in full.
	DataTruncated bool `json:"data_truncated,omitempty"`
	EventBytes    int  `json:"event_bytes,omitempty"`
}

// errorData is the error object of job.failed, job.retrying and (as
// last_error) job.discarded.
type errorData struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Retryable  *bool  `json:"retryable,omitempty"`
	StackTrace string `json:"stack_trace,omitempty"`
}

// PublishJob emits a job event about job, its data filled from the job
// record as section 4.1 requires for eventType:
//
//   - job.enqueued: priority, scheduled_at
//   - job.started: worker_id, attempt
//   - job.completed: attempt, duration_ms (completed_at - started_at), result
//   - job.failed: attempt, error {code, message, retryable, stack_trace},
//     duration_ms (now - started_at) when started_at is known
//   - job.discarded: total_attempts, last_error {code, message}
//   - job.retrying: attempt, max_attempts, next_retry_at, error
//   - job.heartbeat: worker_id, attempt, visible_until (the lease)
//   - job.scheduled: scheduled_at
//   - job.expired: created_at, expired_at (now), ttl_ms
//   - job.cancelled: nothing beyond job_type and queue; pass cancelled_by
//     and reason in extra
//
// Every job event carries job_type, queue and, when the job's meta has a
// trace_id or traceparent, trace_id (section 8.1); the NATS message of a
// job whose meta.traceparent is a W3C traceparent carries it as the
// traceparent header, so NATS subscribers continue the job's trace. extra adds or overrides
// data fields (unique_key, cancelled_by, progress_percent ...). Like
// Publish it never blocks on the server and never fails the caller.
func (p *Publisher) PublishJob(eventType string, job *ojs.Job, extra map[string]any) {
	if job == nil {
		return
	}
	to, heard, ok := p.wanted(eventType)
	if !ok {
		return
	}
	var d jobData
	p.fillJobData(&d, eventType, job)
	_, tp := traceMeta(job.Meta)
	if len(extra) == 0 {
		p.send(to, heard, eventType, job.ID, &d, nil, tp)
		return
	}
	merged, err := mergeData(&d, extra)
	if err != nil {
		p.drop(eventType, job.ID, "encode extra", err)
		return
	}
	p.send(to, heard, eventType, job.ID, &d, merged, tp)
}

// fillJobData fills d, a zero jobData, with the data of eventType about
// job.
func (p *Publisher) fillJobData(d *jobData, eventType string, job *ojs.Job) {
	d.JobType, d.Queue, d.TraceID = job.Type, job.Queue, traceID(job.Meta)
	if d.Queue == "" {
		d.Queue = ojs.DefaultQueue
	}
	switch eventType {
	case TypeJobEnqueued:
		d.Priority = &job.Priority
		d.ScheduledAt = job.ScheduledAt
	case TypeJobStarted:
		d.WorkerID, d.Attempt = &job.WorkerID, &job.Attempt
	case TypeJobCompleted:
		d.Attempt = &job.Attempt
		d.DurationMs = ptr(p.runMs(job, job.CompletedAt))
		d.Result = job.Result
	case TypeJobFailed:
		d.Attempt = &job.Attempt
		d.Error = jobError(job, true)
		if job.StartedAt != nil {
			d.DurationMs = ptr(p.runMs(job, nil))
		}
	case TypeJobDiscarded:
		d.TotalAttempts = &job.Attempt
		d.LastError = jobError(job, false)
	case TypeJobRetrying:
		d.Attempt, d.MaxAttempts = &job.Attempt, &job.MaxAttempts
		d.NextRetryAt = job.NextAttemptAt
		d.Error = jobError(job, false)
	case TypeJobHeartbeat:
		d.WorkerID, d.Attempt = &job.WorkerID, &job.Attempt
		d.VisibleUntil = job.Internal.LeaseUntil
	case TypeJobScheduled:
		d.ScheduledAt = job.ScheduledAt
	case TypeJobExpired:
		p.expiredData(d, job)
	}
}

// runMs is the run time of job's attempt in milliseconds: from started_at to
// end, or to now when end is nil; 0 when the job never started.
func (p *Publisher) runMs(job *ojs.Job, end *ojs.Time) int64 {
	if job.StartedAt == nil {
		return 0
	}
	var stop time.Time
	if end != nil {
		stop = end.Time
	} else {
		stop = p.cfg.Now() // only when needed: a clock read is slow on some VMs
	}
	return max(stop.Sub(job.StartedAt.Time).Milliseconds(), 0)
}

func (p *Publisher) expiredData(d *jobData, job *ojs.Job) {
	now := ojs.NewTime(p.cfg.Now().Truncate(time.Millisecond))
	created := job.CreatedAt
	if created == nil {
		created = job.EnqueuedAt
	}
	if created == nil {
		created = now
	}
	d.CreatedAt, d.ExpiredAt = created, now
	var ttl int64
	if job.ExpiresAt != nil {
		ttl = max(job.ExpiresAt.Sub(created.Time).Milliseconds(), 0)
	}
	d.TTLMs = &ttl
}

// jobError returns the error of the job's last failed attempt. withRetry
// adds retryable (the job's own flag, else whether the job is retryable
// now) and the stack trace, as job.failed requires.
func jobError(job *ojs.Job, withRetry bool) *errorData {
	e := job.Error
	if e == nil && len(job.Errors) > 0 {
		e = &job.Errors[len(job.Errors)-1]
	}
	out := &errorData{Code: "handler_error"}
	if e != nil {
		out.Code = cmp.Or(e.Code, e.Type, out.Code)
		out.Message = e.Message
	}
	if !withRetry {
		return out
	}
	retryable := job.State == ojs.StateRetryable
	if e != nil && e.Retryable != nil {
		retryable = *e.Retryable
	}
	out.Retryable = &retryable
	if e != nil {
		out.StackTrace = stackTrace(e.Backtrace)
	}
	return out
}

// stackTrace renders a backtrace given as a JSON string or array of strings.
func stackTrace(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	if json.Unmarshal(raw, &lines) == nil {
		return strings.Join(lines, "\n")
	}
	return ""
}

// traceID extracts the trace id of a job's meta: meta.trace_id, else the
// trace-id field of meta.traceparent (version-traceid-parentid-flags).
func traceID(meta json.RawMessage) string {
	id, _ := traceMeta(meta)
	return id
}

// traceMeta reads a job's trace id (traceID) and its meta.traceparent
// when that is a well-formed W3C value (else "").
func traceMeta(meta json.RawMessage) (id, traceparent string) {
	if len(meta) == 0 || !bytes.Contains(meta, []byte("trace")) {
		return "", ""
	}
	var m struct {
		TraceID     string `json:"trace_id"`
		TraceParent string `json:"traceparent"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return "", ""
	}
	parts := strings.Split(m.TraceParent, "-")
	if len(parts) == 4 && len(parts[0]) == 2 && len(parts[1]) == 32 && len(parts[2]) == 16 && len(parts[3]) == 2 {
		traceparent = m.TraceParent
	}
	switch {
	case m.TraceID != "":
		return m.TraceID, traceparent
	case traceparent != "":
		return parts[1], traceparent
	}
	return "", ""
}

// mergeData returns d as a JSON object with the keys of extra added or
// replaced. It is rare enough to go through encoding/json.
func mergeData(d *jobData, extra map[string]any) (map[string]json.RawMessage, error) {
	b, err := d.appendJSON(nil)
	if err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, 8+len(extra))
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = vb
	}
	return m, nil
}

// queueData is the data object of queue.paused and queue.resumed.
type queueData struct {
	Queue     string `json:"queue"`
	PausedBy  string `json:"paused_by,omitempty"`
	ResumedBy string `json:"resumed_by,omitempty"`
}

// PublishQueue emits a queue event (queue.paused or queue.resumed) about
// queue; actor, when not empty, becomes paused_by or resumed_by.
func (p *Publisher) PublishQueue(eventType, queue, actor string) {
	if p == nil {
		return
	}
	d := queueData{Queue: queue}
	switch eventType {
	case TypeQueuePaused:
		d.PausedBy = actor
	case TypeQueueResumed:
		d.ResumedBy = actor
	}
	p.Publish(eventType, queue, d)
}

func ptr[T any](v T) *T { return &v }
