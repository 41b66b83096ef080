package metrics

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Rate limiting instruments (ojs-rate-limiting.md 11.2) and their labels.
const (
	NameRateLimitActive       = "ojs.rate_limit.active"
	NameRateLimitWaiting      = "ojs.rate_limit.waiting"
	NameRateLimitExceeded     = "ojs.rate_limit.exceeded_total"
	NameRateLimitWaitDuration = "ojs.rate_limit.wait_duration"

	LabelKey      = "key"
	LabelStrategy = "strategy"
)

// RateLimitUsage is what one rate limit key holds: active jobs (concurrency
// slots) and waiting jobs.
type RateLimitUsage struct {
	Active, Waiting int64
}

// RateLimitFunc reports the usage of the rate limit keys a process knows.
type RateLimitFunc func(ctx context.Context) map[string]RateLimitUsage

type rateLimitInstruments struct {
	exceeded        metric.Int64Counter
	wait            metric.Float64Histogram
	active, waiting metric.Int64ObservableGauge
}

func (in *rateLimitInstruments) create(m metric.Meter) error {
	var err error
	if in.exceeded, err = m.Int64Counter(NameRateLimitExceeded, metric.WithUnit(unitJobs),
		metric.WithDescription("Total times a job could not start because a rate limit was reached.")); err != nil {
		return fmt.Errorf("create %s: %w", NameRateLimitExceeded, err)
	}
	if in.wait, err = m.Float64Histogram(NameRateLimitWaitDuration, metric.WithUnit(unitSeconds),
		metric.WithDescription("Time jobs waited because of rate limits, from first refusal to start."),
		metric.WithExplicitBucketBoundaries(QueueTimeBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", NameRateLimitWaitDuration, err)
	}
	if in.active, err = m.Int64ObservableGauge(NameRateLimitActive, metric.WithUnit(unitJobs),
		metric.WithDescription("Current active jobs holding a concurrency slot of a rate limit key.")); err != nil {
		return fmt.Errorf("create %s: %w", NameRateLimitActive, err)
	}
	if in.waiting, err = m.Int64ObservableGauge(NameRateLimitWaiting, metric.WithUnit(unitJobs),
		metric.WithDescription("Jobs waiting because of a rate limit key.")); err != nil {
		return fmt.Errorf("create %s: %w", NameRateLimitWaiting, err)
	}
	return nil
}

// RateLimitExceeded counts a start refused by a rate limit.
func (m *Metrics) RateLimitExceeded(ctx context.Context, key, strategy string) {
	if m == nil {
		return
	}
	m.rl.exceeded.Add(ctx, 1, metric.WithAttributes(attribute.String(LabelKey, key), attribute.String(LabelStrategy, strategy)))
}

// RateLimitWaited records how long a job waited on a rate limit key.
func (m *Metrics) RateLimitWaited(ctx context.Context, key string, d time.Duration) {
	if m == nil {
		return
	}
	m.rl.wait.Record(ctx, max(d, 0).Seconds(), metric.WithAttributes(attribute.String(LabelKey, key)))
}

// SetRateLimitFunc makes the active and waiting gauges report f's usage at
// every scrape; nil stops reporting.
func (m *Metrics) SetRateLimitFunc(f RateLimitFunc) {
	if m != nil {
		setFunc(&m.rlFn, f, f == nil)
	}
}

func (m *Metrics) observeRateLimits(ctx context.Context, o metric.Observer) error {
	f := m.rlFn.Load()
	if f == nil {
		return nil
	}
	for key, u := range (*f)(ctx) {
		set := metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelKey, key)))
		o.ObserveInt64(m.rl.active, u.Active, set)
		o.ObserveInt64(m.rl.waiting, u.Waiting, set)
	}
	return nil
}
