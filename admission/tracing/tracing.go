// Package tracing carries W3C trace context (traceparent) through a job's
// life, so a producer's trace continues into the worker that runs the job
// (issue 19, "Tracing"):
//
//   - A binding starts a server span for each request, as a child of the
//     trace context the request carries (HTTP header or NATS header
//     traceparent), and puts it in the request's context.
//   - At enqueue, StampMeta writes that context into each new job's
//     meta.traceparent unless the producer set one itself (the
//     ojs-core.md meta field SDKs already read). The job record and ready
//     message carry it; no write is added.
//   - A fetch's span links to every handed-out job's trace (LinkJobs), and
//     a worker starts its handler's span from meta.traceparent (the Go
//     client does) and sends its own context with the ack, so ack and
//     nack spans join the producer's trace.
//   - Lifecycle events published on NATS carry the job's traceparent as a
//     header (jetstream/events).
//
// Without a configured exporter the bindings use OpenTelemetry's no-op
// tracer: no span is recorded, yet a producer's trace context still
// reaches meta.traceparent, so workers continue the producer's trace.
//
// The package is a leaf: it imports ojs and the OpenTelemetry API only.
package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/ojs"
)

// MetaKey is the meta field that carries a job's trace context.
const MetaKey = "traceparent"

// Propagator reads and writes traceparent (and tracestate) headers.
var Propagator = propagation.TraceContext{}

// Traceparent formats a span context as a W3C traceparent value.
func Traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// Parse reads a W3C traceparent value; ok is false when it is not one.
func Parse(tp string) (sc trace.SpanContext, ok bool) {
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc = trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// FromMeta returns the trace context in a job's meta.traceparent.
func FromMeta(meta json.RawMessage) (trace.SpanContext, bool) {
	tp, ok := metaTraceparent(meta)
	if !ok {
		return trace.SpanContext{}, false
	}
	return Parse(tp)
}

// metaTraceparent returns meta.traceparent when meta has the field.
func metaTraceparent(meta json.RawMessage) (string, bool) {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(`"`+MetaKey+`"`)) {
		return "", false
	}
	var m struct {
		TP *string `json:"traceparent"`
	}
	if json.Unmarshal(meta, &m) != nil || m.TP == nil {
		return "", false
	}
	return *m.TP, true
}

// StampMeta writes the trace context of ctx into the meta.traceparent of
// every job that has none (a producer's own value wins). Jobs keep their
// meta otherwise byte for byte: the field is appended to the object.
func StampMeta(ctx context.Context, jobs []*ojs.Job) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	field := []byte(`"` + MetaKey + `":"` + Traceparent(sc) + `"`)
	for _, j := range jobs {
		if j == nil {
			continue
		}
		if _, ok := metaTraceparent(j.Meta); ok {
			continue
		}
		j.Meta = withField(j.Meta, field)
	}
}

// withField appends a "key":value member to a JSON object (meta is
// validated as an object at parse; anything else is left as it is).
func withField(meta json.RawMessage, field []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(meta)
	if len(trimmed) == 0 {
		return json.RawMessage(append(append([]byte{'{'}, field...), '}'))
	}
	if trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		return meta
	}
	body := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
	out := make([]byte, 0, len(trimmed)+len(field)+2)
	out = append(out, '{')
	out = append(out, body...)
	if len(body) > 0 {
		out = append(out, ',')
	}
	out = append(out, field...)
	out = append(out, '}')
	return out
}

// LinkJobs adds to the span of ctx a link to the trace of each job that
// carries one: a fetch span points at the producers' traces it serves.
func LinkJobs(ctx context.Context, jobs []*ojs.Job) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	for _, j := range jobs {
		if sc, ok := FromMeta(j.Meta); ok {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: nil})
		}
	}
}
