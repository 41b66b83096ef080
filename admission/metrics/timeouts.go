package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Timeout instruments (ojs-timeouts.md 11.2).
const (
	NameTimeoutCount      = "ojs.job.timeout.count"
	NameExecutionDuration = "ojs.job.execution.duration"
	NameHeartbeatAge      = "ojs.job.heartbeat.age"
	NameEnqueueWaitTime   = "ojs.job.enqueue.wait_time"

	// Progress instruments (ojs-progress.md 11.2).
	NameProgressUpdates = "ojs.progress.updates_total"
	NameCheckpointSize  = "ojs.progress.checkpoint_size_bytes"
	LabelTimeoutKind    = "timeout_kind"
	LabelOutcome        = "outcome"
)

// HeartbeatAgeFunc reports, per queue, the longest time since the last
// sign of life (heartbeat, progress or start) among the active jobs this
// process knows of.
type HeartbeatAgeFunc func(ctx context.Context) map[string]time.Duration

type timeoutInstruments struct {
	count       metric.Int64Counter
	execution   metric.Float64Histogram
	enqueueWait metric.Float64Histogram
	age         metric.Float64ObservableGauge
	progress    metric.Int64Counter
	checkpoint  metric.Int64Histogram
}

func (in *timeoutInstruments) create(m metric.Meter) error {
	var errs []error
	var err error
	in.count, err = m.Int64Counter(NameTimeoutCount, metric.WithUnit(unitJobs),
		metric.WithDescription("Jobs timed out, by timeout_kind (execution, total, enqueue_ttl, stalled), queue and job type."))
	errs = append(errs, wrapCreate(NameTimeoutCount, err))
	in.execution, err = m.Float64Histogram(NameExecutionDuration, metric.WithUnit(unitSeconds),
		metric.WithDescription("How long attempts ran, by queue, job type and outcome (completed, failed, timeout, stalled)."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	errs = append(errs, wrapCreate(NameExecutionDuration, err))
	in.enqueueWait, err = m.Float64Histogram(NameEnqueueWaitTime, metric.WithUnit(unitSeconds),
		metric.WithDescription("Time from creation to first start, by queue."),
		metric.WithExplicitBucketBoundaries(QueueTimeBuckets...))
	errs = append(errs, wrapCreate(NameEnqueueWaitTime, err))
	in.age, err = m.Float64ObservableGauge(NameHeartbeatAge, metric.WithUnit(unitSeconds),
		metric.WithDescription("Longest time since the last heartbeat among active jobs, by queue (jobs this process handled)."))
	errs = append(errs, wrapCreate(NameHeartbeatAge, err))
	in.progress, err = m.Int64Counter(NameProgressUpdates, metric.WithUnit("{update}"),
		metric.WithDescription("Progress updates stored, by queue and job type."))
	errs = append(errs, wrapCreate(NameProgressUpdates, err))
	in.checkpoint, err = m.Int64Histogram(NameCheckpointSize, metric.WithUnit("By"),
		metric.WithDescription("Size of the checkpoints in progress updates, by job type."),
		metric.WithExplicitBucketBoundaries(64, 256, 1024, 4096, 16384))
	errs = append(errs, wrapCreate(NameCheckpointSize, err))
	return errors.Join(errs...)
}

func wrapCreate(name string, err error) error {
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return nil
}

// JobTimedOut counts a timeout of kind (execution, total, enqueue_ttl or
// stalled).
func (m *Metrics) JobTimedOut(ctx context.Context, queue, jobType, kind string) {
	if m == nil {
		return
	}
	m.to.count.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue),
		attribute.String(LabelType, jobType), attribute.String(LabelTimeoutKind, kind))))
}

// JobExecuted records how long an attempt ran and how it ended.
func (m *Metrics) JobExecuted(ctx context.Context, queue, jobType, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.to.execution.Record(ctx, max(d, 0).Seconds(), m.outcomes.get(outcomeKey{queue, jobType, outcome})...)
}

// JobEnqueueWait records a first start's time since creation.
func (m *Metrics) JobEnqueueWait(ctx context.Context, queue string, wait time.Duration) {
	if m == nil {
		return
	}
	m.to.enqueueWait.Record(ctx, max(wait, 0).Seconds(), m.queues.get(queue)...)
}

// ProgressUpdated counts a stored progress update and records the size of
// its checkpoint, if it carried one (checkpointBytes > 0).
func (m *Metrics) ProgressUpdated(ctx context.Context, queue, jobType string, checkpointBytes int) {
	if m == nil {
		return
	}
	m.to.progress.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue),
		attribute.String(LabelType, jobType))))
	if checkpointBytes > 0 {
		m.to.checkpoint.Record(ctx, int64(checkpointBytes), metric.WithAttributeSet(attribute.NewSet(
			attribute.String(LabelType, jobType))))
	}
}

// SetHeartbeatAgeFunc makes ojs.job.heartbeat.age report f's ages at every
// scrape; nil stops reporting.
func (m *Metrics) SetHeartbeatAgeFunc(f HeartbeatAgeFunc) {
	if m != nil {
		setFunc(&m.ageFn, f, f == nil)
	}
}

func (m *Metrics) observeHeartbeatAge(ctx context.Context, o metric.Observer) error {
	f := m.ageFn.Load()
	if f == nil {
		return nil
	}
	for q, age := range (*f)(ctx) {
		o.ObserveFloat64(m.to.age, age.Seconds(), metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, q))))
	}
	return nil
}
