package httpbind

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/tracing"
)

// tracerName is the instrumentation scope of the binding's spans.
const tracerName = "github.com/jetgate/jetgate/httpbind"

// traced wraps a route's handler in a server span named after the route
// ("POST /ojs/v1/workers/fetch"), a child of the trace context the request
// carries (traceparent header, W3C). The handler's context holds the span,
// so an enqueue stamps it into each new job's meta.traceparent
// (admission/tracing). With no tracer provider configured and no
// traceparent header the route runs as it is.
func (s *server) traced(method, path string, h http.Handler) http.Handler {
	if s.cfg.TracerProvider == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(keyTraceparent) == "" {
				h.ServeHTTP(w, r)
				return
			}
			// No spans are recorded, but the producer's context still
			// reaches the jobs it enqueues.
			ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			h.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	tracer := s.cfg.TracerProvider.Tracer(tracerName)
	name := method + " " + path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", method),
				attribute.String("http.route", path),
				attribute.String("ojs.request_id", requestID(r.Context())),
			))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
		if rec, ok := w.(*recorder); ok {
			status := rec.statusCode()
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
	})
}
