package client

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C trace context (issue 19): a request made with a context that
// carries an OpenTelemetry span sends it as the traceparent header (HTTP
// header or NATS header), an enqueued job carries it in
// meta.traceparent, and a worker's handler context continues the trace
// of the job's producer (a remote span context), so a span the handler
// starts is a child of the producer's.
var traceContext propagation.TraceContext

// injectTrace adds ctx's trace context to header (nil: a new map).
func injectTrace(ctx context.Context, header map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return header
	}
	if header == nil {
		header = map[string]string{}
	}
	traceContext.Inject(ctx, propagation.MapCarrier(header))
	return header
}

// traceMeta puts ctx's trace context in a job's meta, unless the meta
// already carries one.
func traceMeta(ctx context.Context, s *jobSpec) {
	if _, ok := s.Meta["traceparent"]; ok {
		return
	}
	m := injectTrace(ctx, nil)
	if m["traceparent"] == "" {
		return
	}
	if s.Meta == nil {
		s.Meta = map[string]any{}
	}
	for k, v := range m {
		s.Meta[k] = v
	}
}

// jobTrace returns ctx continuing the trace in job j's meta.traceparent.
func jobTrace(ctx context.Context, j *Job) context.Context {
	if len(j.Meta) == 0 {
		return ctx
	}
	var m struct {
		TraceParent string `json:"traceparent"`
		TraceState  string `json:"tracestate"`
	}
	if json.Unmarshal(j.Meta, &m) != nil || m.TraceParent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": m.TraceParent, "tracestate": m.TraceState})
}
