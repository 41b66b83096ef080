package metrics

import (
	"context"
	"strings"
	"testing"
)

// ojs-backpressure.txt metrics and their ojs-backpressure.md 10.2 aliases.
func TestBackpressureInstruments(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{InstanceID: "i1"})
	ctx := context.Background()
	m.QueuePressure(ctx, "email", 0.5)
	m.QueuePressure(ctx, "email", 0.75)
	m.QueueRejected(ctx, "email", "reject")
	m.QueueRejected(ctx, "email", "reject")
	m.QueueDropped(ctx, "email")
	text := scrape(t, m)
	requireLines(t, text,
		`ojs_queue_pressure_ratio{queue="email"} 0.75`,
		`ojs_backpressure_pressure_ratio{queue="email"} 0.75`,
		`ojs_queue_rejected_total{queue="email",strategy="reject"} 2`,
		`ojs_backpressure_rejected_total{queue="email",strategy="reject"} 2`,
		`ojs_queue_dropped_total{queue="email"} 1`,
		`ojs_backpressure_dropped_total{queue="email"} 1`,
	)
	var nilM *Metrics
	nilM.QueuePressure(ctx, "q", 1)
	nilM.QueueRejected(ctx, "q", "reject")
	nilM.QueueDropped(ctx, "q")
	if strings.Contains(text, "ojs_queue_pressure_ratio{queue=\"q\"}") {
		t.Fatal("nil Metrics recorded")
	}
}
