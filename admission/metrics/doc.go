// Package metrics owns jetgate's OpenTelemetry metrics: a MeterProvider
// whose only reader is the OpenTelemetry Prometheus exporter, writing to a
// private prometheus.Registry (never the global one, so tests and several
// instances in one process do not collide), served by Handler in the
// Prometheus text format.
//
// It creates the core job instruments of ojs-observability.md section 8
// and records them through small methods (JobEnqueued, JobStarted,
// JobCompleted, JobFailed, JobDiscarded, JobCancelled, JobExpired,
// EnqueueDuration); ojs.queue.depth is an observable gauge that calls the
// function set with SetQueueDepthFunc or SetStateDepthFunc at each scrape.
// Later features add their own instruments through Meter.
//
// Names follow ojs-observability.md (ojs.job.*, labels queue, type and
// state, durations in seconds), not the older ojs.jobs.* names of
// ojs-events.md section 7. In Prometheus they become ojs_job_enqueued_total,
// ojs_job_duration_seconds, ojs_queue_depth and so on: the exporter uses the
// UnderscoreEscapingWithSuffixes translation, set explicitly so the names do
// not depend on the global validation scheme, and scope labels
// (otel_scope_*) are turned off. Counters and the gauge have the unit
// "{job}", a UCUM annotation, so no unit suffix is added (the spec's "jobs"
// would have produced ojs_job_enqueued_jobs_total); durations are in "s".
// ojs.job.started is jetgate's addition.
//
// Recording is cheap: the attribute sets of each (queue, job type) pair are
// built once and kept in a copy-on-write map, so a call costs an atomic
// load, a map lookup and the SDK's own work. Label values must stay
// bounded: never pass job ids or error messages.
//
// Every method is a no-op on a nil *Metrics, so packages can run without
// metrics. This package never reads job state itself: callers report what
// happened, and the depth function is theirs.
package metrics
