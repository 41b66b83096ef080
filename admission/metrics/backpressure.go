package metrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Backpressure instrument names: the extension's (ojs-backpressure.txt)
// and the core spec's aliases (ojs-backpressure.md 10.2), both recorded.
// Rejections are labelled by queue and LabelStrategy.
const (
	NameQueuePressure        = "ojs.queue.pressure"
	NameQueueRejected        = "ojs.queue.rejected"
	NameQueueDropped         = "ojs.queue.dropped"
	NameBackpressurePressure = "ojs.backpressure.pressure"
	NameBackpressureRejected = "ojs.backpressure.rejected"
	NameBackpressureDropped  = "ojs.backpressure.dropped"
)

// bpInstruments are the backpressure instruments; each pair is a name of
// the extension and its core-spec alias.
type bpInstruments struct {
	pressure [2]metric.Float64Gauge
	rejected [2]metric.Int64Counter
	dropped  [2]metric.Int64Counter
}

func (in *bpInstruments) create(m metric.Meter) error {
	var err error
	for i, name := range []string{NameQueuePressure, NameBackpressurePressure} {
		if in.pressure[i], err = m.Float64Gauge(name, metric.WithUnit("1"),
			metric.WithDescription("Queue fullness: depth over bound, 0.0 to 1.0.")); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	for i, name := range []string{NameQueueRejected, NameBackpressureRejected} {
		if in.rejected[i], err = m.Int64Counter(name, metric.WithUnit("{request}"),
			metric.WithDescription("Enqueue requests refused because the queue was full.")); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	for i, name := range []string{NameQueueDropped, NameBackpressureDropped} {
		if in.dropped[i], err = m.Int64Counter(name, metric.WithUnit(unitJobs),
			metric.WithDescription("Jobs discarded by the drop_oldest strategy to make room.")); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return nil
}

// QueuePressure records a bounded queue's pressure (ojs.queue.pressure).
func (m *Metrics) QueuePressure(ctx context.Context, queue string, ratio float64) {
	if m == nil {
		return
	}
	opts := m.queues.get(queue)
	for _, g := range m.bp.pressure {
		g.Record(ctx, ratio, opts...)
	}
}

// QueueRejected counts an enqueue refused by a full queue
// (ojs.queue.rejected), labelled by queue and strategy.
func (m *Metrics) QueueRejected(ctx context.Context, queue, strategy string) {
	if m == nil {
		return
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue), attribute.String(LabelStrategy, strategy)))
	for _, c := range m.bp.rejected {
		c.Add(ctx, 1, set)
	}
}

// QueueDropped counts a job dropped by drop_oldest (ojs.queue.dropped).
func (m *Metrics) QueueDropped(ctx context.Context, queue string) {
	if m == nil {
		return
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue)))
	for _, c := range m.bp.dropped {
		c.Add(ctx, 1, set)
	}
}
