package metrics

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Instrument names (ojs-observability.md section 8) and their labels.
const (
	NameJobEnqueued        = "ojs.job.enqueued"
	NameJobStarted         = "ojs.job.started" // jetgate's; not in the spec
	NameJobCompleted       = "ojs.job.completed"
	NameJobFailed          = "ojs.job.failed" // reached discarded
	NameJobRetried         = "ojs.job.retried"
	NameJobCancelled       = "ojs.job.cancelled"
	NameJobExpired         = "ojs.job.expired"
	NameJobDuration        = "ojs.job.duration"
	NameJobQueueTime       = "ojs.job.queue_time"
	NameJobEnqueueDuration = "ojs.job.enqueue_duration"
	NameQueueDepth         = "ojs.queue.depth"

	LabelQueue = "queue"
	LabelType  = "type"
	LabelState = "state"

	unitJobs    = "{job}" // a UCUM annotation: no suffix in Prometheus names
	unitSeconds = "s"
)

// Histogram buckets of ojs-observability.md section 8.2, in seconds.
var (
	DurationBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	QueueTimeBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
)

// instruments are the core job instruments.
type instruments struct {
	enqueued, started, completed, failed, retried, cancelled, expired metric.Int64Counter
	duration, queueTime, enqueueDuration                              metric.Float64Histogram
	depth                                                             metric.Int64ObservableGauge
}

func (in *instruments) create(m metric.Meter) error {
	counters := []struct {
		c    *metric.Int64Counter
		name string
		desc string
	}{
		{&in.enqueued, NameJobEnqueued, "Total jobs enqueued."},
		{&in.started, NameJobStarted, "Total attempts started (jobs moved to active)."},
		{&in.completed, NameJobCompleted, "Total jobs that reached the completed state."},
		{&in.failed, NameJobFailed, "Total jobs that reached the discarded state."},
		{&in.retried, NameJobRetried, "Total failed attempts that were scheduled for retry."},
		{&in.cancelled, NameJobCancelled, "Total jobs cancelled."},
		{&in.expired, NameJobExpired, "Total jobs expired before they ran."},
	}
	var err error
	for _, c := range counters {
		if *c.c, err = m.Int64Counter(c.name, metric.WithUnit(unitJobs), metric.WithDescription(c.desc)); err != nil {
			return fmt.Errorf("create %s: %w", c.name, err)
		}
	}
	if in.duration, err = m.Float64Histogram(NameJobDuration, metric.WithUnit(unitSeconds),
		metric.WithDescription("Job processing duration (active to the next state)."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", NameJobDuration, err)
	}
	if in.queueTime, err = m.Float64Histogram(NameJobQueueTime, metric.WithUnit(unitSeconds),
		metric.WithDescription("Time from enqueue to first execution start."),
		metric.WithExplicitBucketBoundaries(QueueTimeBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", NameJobQueueTime, err)
	}
	if in.enqueueDuration, err = m.Float64Histogram(NameJobEnqueueDuration, metric.WithUnit(unitSeconds),
		metric.WithDescription("Time to complete an enqueue operation."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", NameJobEnqueueDuration, err)
	}
	if in.depth, err = m.Int64ObservableGauge(NameQueueDepth, metric.WithUnit(unitJobs),
		metric.WithDescription("Current number of jobs per queue per state.")); err != nil {
		return fmt.Errorf("create %s: %w", NameQueueDepth, err)
	}
	return nil
}

// JobEnqueued counts a job enqueued (ojs.job.enqueued).
func (m *Metrics) JobEnqueued(ctx context.Context, queue, jobType string) {
	if m == nil {
		return
	}
	m.inst.enqueued.Add(ctx, 1, m.jobs.get(jobKey{queue, jobType}).add...)
}

// EnqueueDuration records how long an enqueue operation took
// (ojs.job.enqueue_duration, labelled by queue only).
func (m *Metrics) EnqueueDuration(ctx context.Context, queue string, d time.Duration) {
	if m == nil {
		return
	}
	m.inst.enqueueDuration.Record(ctx, d.Seconds(), m.queues.get(queue)...)
}

// JobStarted counts an attempt started (ojs.job.started). For the first
// attempt (attempt <= 1) it records wait, the time from enqueue to start,
// in ojs.job.queue_time.
func (m *Metrics) JobStarted(ctx context.Context, queue, jobType string, attempt int, wait time.Duration) {
	if m == nil {
		return
	}
	a := m.jobs.get(jobKey{queue, jobType})
	m.inst.started.Add(ctx, 1, a.add...)
	if attempt <= 1 {
		m.inst.queueTime.Record(ctx, max(wait, 0).Seconds(), a.rec...)
	}
}

// JobCompleted counts a job completed (ojs.job.completed) and records its
// run time d in ojs.job.duration with state="completed".
func (m *Metrics) JobCompleted(ctx context.Context, queue, jobType string, d time.Duration) {
	if m == nil {
		return
	}
	a := m.jobs.get(jobKey{queue, jobType})
	m.inst.completed.Add(ctx, 1, a.add...)
	m.inst.duration.Record(ctx, max(d, 0).Seconds(), a.completed...)
}

// JobFailed counts a failed attempt that will be retried (ojs.job.retried)
// and records its run time d with state="retryable". A failure that
// discards the job is reported with JobDiscarded instead.
func (m *Metrics) JobFailed(ctx context.Context, queue, jobType string, d time.Duration) {
	if m == nil {
		return
	}
	a := m.jobs.get(jobKey{queue, jobType})
	m.inst.retried.Add(ctx, 1, a.add...)
	m.inst.duration.Record(ctx, max(d, 0).Seconds(), a.retryable...)
}

// JobDiscarded counts a job that reached the discarded state
// (ojs.job.failed, the spec's terminal failure count). d is the run time of
// the last attempt, recorded with state="discarded"; pass 0 when the job
// was discarded without running (expired, discarded by an operator).
func (m *Metrics) JobDiscarded(ctx context.Context, queue, jobType string, d time.Duration) {
	if m == nil {
		return
	}
	a := m.jobs.get(jobKey{queue, jobType})
	m.inst.failed.Add(ctx, 1, a.add...)
	if d > 0 {
		m.inst.duration.Record(ctx, d.Seconds(), a.discarded...)
	}
}

// JobCancelled counts a job cancelled (ojs.job.cancelled). d is how long
// it had been active, recorded with state="cancelled"; pass 0 when it was
// not running.
func (m *Metrics) JobCancelled(ctx context.Context, queue, jobType string, d time.Duration) {
	if m == nil {
		return
	}
	a := m.jobs.get(jobKey{queue, jobType})
	m.inst.cancelled.Add(ctx, 1, a.add...)
	if d > 0 {
		m.inst.duration.Record(ctx, d.Seconds(), a.cancelled...)
	}
}

// JobExpired counts a job whose expires_at passed before it ran
// (ojs.job.expired).
func (m *Metrics) JobExpired(ctx context.Context, queue, jobType string) {
	if m == nil {
		return
	}
	m.inst.expired.Add(ctx, 1, m.jobs.get(jobKey{queue, jobType}).add...)
}
