package metrics

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Priority instruments (ojs-priority.md 11.2).
const (
	NamePriorityChanges        = "ojs.job.priority_changes_total"
	NameAvailableByPriority    = "ojs.queue.available_by_priority"
	NameWaitDurationByPriority = "ojs.job.wait_duration_by_priority"

	LabelPriority = "priority"
)

// PriorityDepthFunc reports available jobs per queue and priority.
type PriorityDepthFunc func(ctx context.Context) map[string]map[int]int64

type priorityInstruments struct {
	changes   metric.Int64Counter
	wait      metric.Float64Histogram
	available metric.Int64ObservableGauge
}

func (in *priorityInstruments) create(m metric.Meter) error {
	var err error
	if in.changes, err = createPriorityChanges(m); err != nil {
		return err
	}
	if in.wait, err = m.Float64Histogram(NameWaitDurationByPriority, metric.WithUnit(unitSeconds),
		metric.WithDescription("Time from enqueue to dispatch, by queue and priority."),
		metric.WithExplicitBucketBoundaries(QueueTimeBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", NameWaitDurationByPriority, err)
	}
	if in.available, err = m.Int64ObservableGauge(NameAvailableByPriority, metric.WithUnit(unitJobs),
		metric.WithDescription("Available jobs per queue and priority level.")); err != nil {
		return fmt.Errorf("create %s: %w", NameAvailableByPriority, err)
	}
	return nil
}

// JobWaitedByPriority records a first start's wait by queue and priority.
func (m *Metrics) JobWaitedByPriority(ctx context.Context, queue string, priority int, wait time.Duration) {
	if m == nil {
		return
	}
	m.prio.wait.Record(ctx, max(wait, 0).Seconds(), m.levels.get(priorityKey{queue, priority})...)
}

// SetPriorityDepthFunc makes ojs.queue.available_by_priority report f's
// counts at every scrape; nil stops reporting.
func (m *Metrics) SetPriorityDepthFunc(f PriorityDepthFunc) {
	if m != nil {
		setFunc(&m.prioFn, f, f == nil)
	}
}

func (m *Metrics) observePriorities(ctx context.Context, o metric.Observer) error {
	f := m.prioFn.Load()
	if f == nil {
		return nil
	}
	for q, levels := range (*f)(ctx) {
		for p, n := range levels {
			o.ObserveInt64(m.prio.available, n, metric.WithAttributeSet(attribute.NewSet(
				attribute.String(LabelQueue, q), attribute.Int(LabelPriority, p))))
		}
	}
	return nil
}

func createPriorityChanges(m metric.Meter) (metric.Int64Counter, error) {
	c, err := m.Int64Counter(NamePriorityChanges, metric.WithUnit(unitJobs),
		metric.WithDescription("Total priority changes after enqueue."))
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", NamePriorityChanges, err)
	}
	return c, nil
}

// PriorityChanged counts a job's priority changed after enqueue.
func (m *Metrics) PriorityChanged(ctx context.Context, queue string) {
	if m == nil {
		return
	}
	m.prio.changes.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue))))
}
