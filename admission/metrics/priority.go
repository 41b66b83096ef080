package metrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// NamePriorityChanges counts priority updates (ojs-priority.md 11.2).
const NamePriorityChanges = "ojs.job.priority_changes_total"

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
	m.priorityChanges.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue))))
}
