package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/tracing"
)

// tracerProvider returns the provider the bindings record spans with:
// Config.TracerProvider when given (tests, embedding), an OTLP/HTTP
// exporter to Config.TracesEndpoint when set, else nil (no spans; trace
// context still reaches meta.traceparent). stop flushes and stops it.
func (s *Server) tracerProvider() (trace.TracerProvider, func(context.Context) error, error) {
	if s.cfg.TracerProvider != nil {
		return s.cfg.TracerProvider, func(context.Context) error { return nil }, nil
	}
	if s.cfg.TracesEndpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(s.cfg.TracesEndpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter for %s: %w", s.cfg.TracesEndpoint, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "jetgate"),
		attribute.String("service.version", Version),
		attribute.String("service.instance.id", s.cfg.InstanceName),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.cfg.TracesSampleRatio))),
	)
	s.log.Info("tracing on", "otlp_endpoint", s.cfg.TracesEndpoint, "sample_ratio", s.cfg.TracesSampleRatio)
	return tp, tp.Shutdown, nil
}

// traceHook stamps each new job with the enqueue request's trace context
// (meta.traceparent), through the job life cycle's Admit.
type traceHook struct{}

func (traceHook) Admit(ctx context.Context, _ admission.Jobs, batch []*ojs.Job) (admission.Admission, error) {
	tracing.StampMeta(ctx, batch)
	return admission.Admission{}, nil
}

func (traceHook) JobChanged(context.Context, *ojs.Job, ojs.State) {}
