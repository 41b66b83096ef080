package admission

import (
	"context"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// EventSink receives lifecycle events; jetstream/events.Publisher is the
// production sink. Publishing must not block the job path.
type EventSink interface {
	PublishJob(eventType string, job *ojs.Job, extra map[string]any)
	PublishQueue(eventType, queue, actor string)
	// Publish emits an event about subject (a job id, queue or rate
	// limit key) with data, a JSON object.
	Publish(eventType, subject string, data any)
	Recent(ctx context.Context, q ojs.EventQuery) ([]ojs.Event, error)
}

// Recorder receives job metrics; admission/metrics.Metrics is the
// production recorder.
type Recorder interface {
	JobEnqueued(ctx context.Context, queue, jobType string)
	JobStarted(ctx context.Context, queue, jobType string, attempt int, wait time.Duration)
	JobCompleted(ctx context.Context, queue, jobType string, d time.Duration)
	JobFailed(ctx context.Context, queue, jobType string, d time.Duration)
	JobDiscarded(ctx context.Context, queue, jobType string, d time.Duration)
	JobCancelled(ctx context.Context, queue, jobType string, d time.Duration)
	JobExpired(ctx context.Context, queue, jobType string)
	// Rate limiting (ojs-rate-limiting.md 11.2).
	RateLimitExceeded(ctx context.Context, key, strategy string)
	RateLimitWaited(ctx context.Context, key string, d time.Duration)
	// PriorityChanged counts a priority update (ojs.job.priority_changes_total).
	PriorityChanged(ctx context.Context, queue string)
	// JobWaitedByPriority records a first start's wait by priority
	// (ojs.job.wait_duration_by_priority).
	JobWaitedByPriority(ctx context.Context, queue string, priority int, wait time.Duration)
	// Timeouts (ojs-timeouts.md 11.2): a timeout of kind
	// (ojs.job.timeout.count), how long an attempt ran and how it ended
	// (ojs.job.execution.duration), and a first start's time since
	// creation (ojs.job.enqueue.wait_time).
	JobTimedOut(ctx context.Context, queue, jobType, kind string)
	JobExecuted(ctx context.Context, queue, jobType, outcome string, d time.Duration)
	JobEnqueueWait(ctx context.Context, queue string, wait time.Duration)
	// ProgressUpdated counts a stored progress update and the size of its
	// checkpoint (ojs-progress.md 11.2).
	ProgressUpdated(ctx context.Context, queue, jobType string, checkpointBytes int)
}

// Event types of ojs-events.md section 3 that admission emits.
const (
	EventJobEnqueued  = "job.enqueued"
	EventJobScheduled = "job.scheduled"
	EventJobStarted   = "job.started"
	EventJobCompleted = "job.completed"
	EventJobFailed    = "job.failed"
	EventJobRetrying  = "job.retrying"
	EventJobDiscarded = "job.discarded"
	EventJobCancelled = "job.cancelled"
	EventJobExpired   = "job.expired"
	// Progress events (ojs-progress.md 11.1, ojs-events.md job.progress).
	EventJobProgress     = "job.progress"
	EventProgressStalled = "progress.stalled"
	EventQueuePaused     = "queue.paused"
	EventQueueResumed    = "queue.resumed"

	// Rate limiting events (ojs-rate-limiting.md 11.1).
	EventRateLimitExceeded = "rate_limit.exceeded"
	EventRateLimitReleased = "rate_limit.released"
	EventRateLimitDropped  = "rate_limit.dropped"
	EventRateLimitAdjusted = "rate_limit.dynamic_adjusted"
)

type noEvents struct{}

func (noEvents) PublishJob(string, *ojs.Job, map[string]any) {}
func (noEvents) PublishQueue(string, string, string)         {}
func (noEvents) Publish(string, string, any)                 {}
func (noEvents) Recent(context.Context, ojs.EventQuery) ([]ojs.Event, error) {
	return nil, nil
}

type noMetrics struct{}

func (noMetrics) JobEnqueued(context.Context, string, string)                        {}
func (noMetrics) JobStarted(context.Context, string, string, int, time.Duration)     {}
func (noMetrics) JobCompleted(context.Context, string, string, time.Duration)        {}
func (noMetrics) JobFailed(context.Context, string, string, time.Duration)           {}
func (noMetrics) JobDiscarded(context.Context, string, string, time.Duration)        {}
func (noMetrics) JobCancelled(context.Context, string, string, time.Duration)        {}
func (noMetrics) JobExpired(context.Context, string, string)                         {}
func (noMetrics) RateLimitExceeded(context.Context, string, string)                  {}
func (noMetrics) RateLimitWaited(context.Context, string, time.Duration)             {}
func (noMetrics) PriorityChanged(context.Context, string)                            {}
func (noMetrics) JobWaitedByPriority(context.Context, string, int, time.Duration)    {}
func (noMetrics) JobTimedOut(context.Context, string, string, string)                {}
func (noMetrics) JobExecuted(context.Context, string, string, string, time.Duration) {}
func (noMetrics) JobEnqueueWait(context.Context, string, time.Duration)              {}
func (noMetrics) ProgressUpdated(context.Context, string, string, int)               {}
