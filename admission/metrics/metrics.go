package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/jetgate/jetgate/admission/ojs"
)

// MeterName is the instrumentation scope of every jetgate instrument.
const MeterName = "github.com/jetgate/jetgate"

// Config configures Metrics.
type Config struct {
	// ServiceName is the service.name resource attribute (default "jetgate").
	ServiceName string
	// InstanceID is service.instance.id (default: the hostname).
	InstanceID string
	// Version is service.version (default: not set).
	Version string
	// RuntimeMetrics adds the Go runtime and process collectors (go_*,
	// process_*) to the registry.
	RuntimeMetrics bool
}

func (c *Config) defaults() {
	c.ServiceName = cmp.Or(c.ServiceName, "jetgate")
	if c.InstanceID == "" {
		c.InstanceID, _ = os.Hostname()
	}
}

func (c *Config) resource() *resource.Resource {
	attrs := []attribute.KeyValue{attribute.String("service.name", c.ServiceName)}
	if c.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.InstanceID))
	}
	if c.Version != "" {
		attrs = append(attrs, attribute.String("service.version", c.Version))
	}
	return resource.NewSchemaless(attrs...)
}

// Metrics owns an OpenTelemetry MeterProvider exported in the Prometheus
// text format from a private registry, and the core OJS job instruments.
// All methods are safe for concurrent use, and on a nil *Metrics they do
// nothing.
type Metrics struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter
	handler  http.Handler
	inst     instruments
	bp       bpInstruments

	depthReg metric.Registration
	depthFn  atomic.Pointer[StateDepthFunc]

	prio    priorityInstruments
	prioReg metric.Registration
	prioFn  atomic.Pointer[PriorityDepthFunc]

	rl    rateLimitInstruments
	rlReg metric.Registration
	rlFn  atomic.Pointer[RateLimitFunc]

	to    timeoutInstruments
	toReg metric.Registration
	ageFn atomic.Pointer[HeartbeatAgeFunc]

	jobs     cache[jobKey, *jobAttrs]
	queues   cache[string, []metric.RecordOption]
	outcomes cache[outcomeKey, []metric.RecordOption]  // ojs.job.execution_time
	levels   cache[priorityKey, []metric.RecordOption] // ojs.job.wait_by_priority

	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds the MeterProvider, its Prometheus exporter on a new registry
// and the job instruments.
func New(cfg Config) (*Metrics, error) {
	cfg.defaults()
	reg := prometheus.NewRegistry()
	if cfg.RuntimeMetrics {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("create prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(cfg.resource()))
	m := &Metrics{
		registry: reg,
		provider: mp,
		meter:    mp.Meter(MeterName),
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}
	m.jobs.build, m.queues.build = newJobAttrs, newQueueAttrs
	m.outcomes.build, m.levels.build = newOutcomeAttrs, newPriorityAttrs
	if err := errors.Join(m.inst.create(m.meter), m.bp.create(m.meter)); err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	m.depthReg, err = m.meter.RegisterCallback(m.observeDepth, m.inst.depth)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("register queue depth callback: %w", err), mp.Shutdown(context.Background()))
	}
	if err := m.prio.create(m.meter); err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	m.prioReg, err = m.meter.RegisterCallback(m.observePriorities, m.prio.available)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("register priority callback: %w", err), mp.Shutdown(context.Background()))
	}
	if err := m.rl.create(m.meter); err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	m.rlReg, err = m.meter.RegisterCallback(m.observeRateLimits, m.rl.active, m.rl.waiting)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("register rate limit callback: %w", err), mp.Shutdown(context.Background()))
	}
	if err := m.to.create(m.meter); err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	m.toReg, err = m.meter.RegisterCallback(m.observeHeartbeatAge, m.to.age)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("register heartbeat age callback: %w", err), mp.Shutdown(context.Background()))
	}
	return m, nil
}

// Handler serves the metrics in the Prometheus text format. On a nil
// *Metrics it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return m.handler
}

// Registry is the private Prometheus registry the exporter writes to, for
// callers that add their own collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.registry
}

// Meter returns the meter to create further instruments with. On a nil
// *Metrics it returns a no-op meter.
func (m *Metrics) Meter() metric.Meter {
	if m == nil {
		return noop.NewMeterProvider().Meter(MeterName)
	}
	return m.meter
}

// Shutdown flushes and stops the MeterProvider. Later calls return the
// first call's result.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	m.shutdownOnce.Do(func() {
		m.shutdownErr = errors.Join(m.depthReg.Unregister(), m.rlReg.Unregister(), m.prioReg.Unregister(), m.toReg.Unregister(),
			m.provider.Shutdown(ctx))
	})
	return m.shutdownErr
}

// QueueDepthFunc reports the number of available jobs per queue.
type QueueDepthFunc func(ctx context.Context) map[string]int64

// StateDepthFunc reports the number of jobs per queue and state.
type StateDepthFunc func(ctx context.Context) map[string]map[ojs.State]int64

// SetQueueDepthFunc makes ojs.queue.depth report f's counts with
// state="available" at every scrape. It replaces any depth function set
// before; nil stops reporting.
func (m *Metrics) SetQueueDepthFunc(f QueueDepthFunc) {
	if f == nil {
		m.SetStateDepthFunc(nil)
		return
	}
	m.SetStateDepthFunc(func(ctx context.Context) map[string]map[ojs.State]int64 {
		out := map[string]map[ojs.State]int64{}
		for q, n := range f(ctx) {
			out[q] = map[ojs.State]int64{ojs.StateAvailable: n}
		}
		return out
	})
}

// SetStateDepthFunc makes ojs.queue.depth report f's counts per queue and
// state at every scrape (ojs-observability.md 8.3). It replaces any depth
// function set before; nil stops reporting.
func (m *Metrics) SetStateDepthFunc(f StateDepthFunc) {
	if m == nil {
		return
	}
	setFunc(&m.depthFn, f, f == nil)
}

// setFunc stores the scrape function f in p, or clears p when f is nil.
func setFunc[F any](p *atomic.Pointer[F], f F, isNil bool) {
	if isNil {
		p.Store(nil)
		return
	}
	p.Store(&f)
}

func (m *Metrics) observeDepth(ctx context.Context, o metric.Observer) error {
	f := m.depthFn.Load()
	if f == nil {
		return nil
	}
	for q, states := range (*f)(ctx) {
		for s, n := range states {
			set := attribute.NewSet(attribute.String(LabelQueue, q), attribute.String(LabelState, string(s)))
			o.ObserveInt64(m.inst.depth, n, metric.WithAttributeSet(set))
		}
	}
	return nil
}
