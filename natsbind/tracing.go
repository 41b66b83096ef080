package natsbind

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/tracing"
)

// tracerName is the instrumentation scope of the binding's spans.
const tracerName = "github.com/jetgate/jetgate/natsbind"

// traceContext returns ctx carrying the trace context of a request's
// traceparent (and tracestate) NATS headers (W3C), and, with a tracer
// provider configured, a server span named after the endpoint's subject,
// a child of it; end finishes the span with the reply's status and OJS
// error code ("" for a success). Without a
// provider no span is recorded, but a request's traceparent still reaches
// the jobs it enqueues (admission/tracing).
func (s *Service) traceContext(ctx context.Context, ep endpoint, hdr nats.Header, requestID string) (context.Context, func(status, code string)) {
	if tp := hdr.Get(HeaderTraceParent); tp != "" {
		ctx = tracing.Propagator.Extract(ctx, propagation.MapCarrier{
			HeaderTraceParent: tp, "tracestate": hdr.Get("tracestate")})
	}
	if s.cfg.TracerProvider == nil {
		return ctx, func(string, string) {}
	}
	ctx, span := s.cfg.TracerProvider.Tracer(tracerName).Start(ctx, s.Subject(ep.subject),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", s.Subject(ep.subject)),
			attribute.String("ojs.request_id", requestID),
		))
	return ctx, func(status, code string) {
		if status != "" {
			span.SetAttributes(attribute.String("nats.service.error_code", status), attribute.String("ojs.error_code", code))
			if n, err := strconv.Atoi(status); err == nil && n >= 500 {
				span.SetStatus(codes.Error, code)
			}
		}
		span.End()
	}
}
