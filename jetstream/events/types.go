package events

import "github.com/jetgate/jetgate/jetstream/topology"

// Event types of the OJS catalog (ojs-events.md section 3). The job and
// queue types are the ones jetgate emits; the others are listed so that
// filters and other emitters (workers publishing on ojs.events.>) share the
// same spelling.
const (
	// Core job events (section 3.1), emitted at every conformance level.
	TypeJobEnqueued  = "job.enqueued"
	TypeJobStarted   = "job.started"
	TypeJobCompleted = "job.completed"
	TypeJobFailed    = "job.failed"
	TypeJobDiscarded = "job.discarded"

	// Extended job events (section 3.2).
	TypeJobRetrying  = "job.retrying"
	TypeJobCancelled = "job.cancelled"
	TypeJobHeartbeat = "job.heartbeat"
	TypeJobScheduled = "job.scheduled"
	TypeJobExpired   = "job.expired"
	TypeJobProgress  = "job.progress"

	// Queue events (section 3.3).
	TypeQueuePaused  = "queue.paused"
	TypeQueueResumed = "queue.resumed"

	// Rate limiting events (ojs-rate-limiting.md 11.1).
	TypeRateLimitExceeded = "rate_limit.exceeded"
	TypeRateLimitReleased = "rate_limit.released"
	TypeRateLimitDropped  = "rate_limit.dropped"
	TypeRateLimitAdjusted = "rate_limit.dynamic_adjusted"

	// Backpressure events (ojs-backpressure.txt, and the core spec's names
	// of ojs-backpressure.md 10.1).
	TypeQueuePressureWarning  = "queue.pressure_warning"
	TypeQueuePressureCritical = "queue.pressure_critical"
	TypeQueueOverflow         = "queue.overflow"
	TypeBackpressureWarning   = "backpressure.warning"
	TypeBackpressureRejected  = "backpressure.rejected"
	TypeBackpressureDropped   = "backpressure.dropped"
	TypeBackpressureCleared   = "backpressure.cleared"

	// Priority events (ojs-priority.md 11.1).
	TypePriorityChanged = "priority.changed"

	// Worker events (section 3.4).
	TypeWorkerStarted   = "worker.started"
	TypeWorkerStopped   = "worker.stopped"
	TypeWorkerQuiet     = "worker.quiet"
	TypeWorkerHeartbeat = "worker.heartbeat"

	// Workflow events (section 3.5).
	TypeWorkflowStarted       = "workflow.started"
	TypeWorkflowStepCompleted = "workflow.step_completed"
	TypeWorkflowCompleted     = "workflow.completed"
	TypeWorkflowFailed        = "workflow.failed"

	// Cron events (section 3.6).
	TypeCronTriggered = "cron.triggered"
	TypeCronSkipped   = "cron.skipped"
)

// Catalog lists every event type of ojs-events.md section 3, and the
// rate limiting and backpressure extensions'.
var Catalog = []string{
	TypeJobEnqueued, TypeJobStarted, TypeJobCompleted, TypeJobFailed, TypeJobDiscarded,
	TypeJobRetrying, TypeJobCancelled, TypeJobHeartbeat, TypeJobScheduled, TypeJobExpired,
	TypeJobProgress,
	TypeQueuePaused, TypeQueueResumed,
	TypeRateLimitExceeded, TypeRateLimitReleased, TypeRateLimitDropped, TypeRateLimitAdjusted,
	TypePriorityChanged,
	TypeQueuePressureWarning, TypeQueuePressureCritical, TypeQueueOverflow,
	TypeBackpressureWarning, TypeBackpressureRejected, TypeBackpressureDropped, TypeBackpressureCleared,
	TypeWorkerStarted, TypeWorkerStopped, TypeWorkerQuiet, TypeWorkerHeartbeat,
	TypeWorkflowStarted, TypeWorkflowStepCompleted, TypeWorkflowCompleted, TypeWorkflowFailed,
	TypeCronTriggered, TypeCronSkipped,
}

// Envelope constants (ojs-events.md section 2).
const (
	// SpecVersion is the events specification version of every envelope.
	SpecVersion = "1.0"
	// ContentType is the datacontenttype of every envelope.
	ContentType = "application/json"
	// IDPrefix prefixes every event id (followed by a UUIDv7).
	IDPrefix = "evt_"
)

// catalogSubjects caches topology.EventSubject of every catalog type.
var catalogSubjects = func() map[string]string {
	m := make(map[string]string, len(Catalog))
	for _, t := range Catalog {
		m[t] = topology.EventSubject(t)
	}
	return m
}()

// subjectOf returns the NATS subject of an event type.
func subjectOf(eventType string) string {
	if s, ok := catalogSubjects[eventType]; ok {
		return s
	}
	return topology.EventSubject(eventType)
}
