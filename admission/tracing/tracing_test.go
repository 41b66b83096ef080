package tracing

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/ojs"
)

const producerTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func remoteCtx(t *testing.T, tp string) context.Context {
	t.Helper()
	sc, ok := Parse(tp)
	if !ok {
		t.Fatalf("Parse(%q) not ok", tp)
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// StampMeta carries the request's trace context into meta.traceparent
// (issue 19, tracing: W3C trace context carried in the job's
// meta.traceparent), keeps the producer's own value, and leaves the rest
// of meta byte for byte.
func TestStampMeta(t *testing.T) {
	ctx := remoteCtx(t, producerTP)
	own := "00-11111111111111111111111111111111-2222222222222222-01"
	jobs := []*ojs.Job{
		{ID: "a"},
		{ID: "b", Meta: json.RawMessage(`{}`)},
		{ID: "c", Meta: json.RawMessage(` {"tenant_id": "t1", "n": [1, 2]} `)},
		{ID: "d", Meta: json.RawMessage(`{"traceparent":"` + own + `"}`)},
	}
	StampMeta(ctx, jobs)
	want := map[string]string{
		"a": `{"traceparent":"` + producerTP + `"}`,
		"b": `{"traceparent":"` + producerTP + `"}`,
		"c": `{"tenant_id": "t1", "n": [1, 2],"traceparent":"` + producerTP + `"}`,
		"d": `{"traceparent":"` + own + `"}`,
	}
	for _, j := range jobs {
		if string(j.Meta) != want[j.ID] {
			t.Errorf("job %s meta = %s, want %s", j.ID, j.Meta, want[j.ID])
		}
		if !json.Valid(j.Meta) {
			t.Errorf("job %s meta is not valid JSON: %s", j.ID, j.Meta)
		}
	}
	sc, ok := FromMeta(jobs[2].Meta)
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() {
		t.Fatalf("FromMeta = %v %v", sc, ok)
	}
}

// Without a trace context nothing is written: jobs of producers that do
// not trace cost nothing more.
func TestStampMetaWithoutContext(t *testing.T) {
	j := &ojs.Job{ID: "a", Meta: json.RawMessage(`{"x":1}`)}
	StampMeta(context.Background(), []*ojs.Job{j})
	if string(j.Meta) != `{"x":1}` {
		t.Fatalf("meta changed: %s", j.Meta)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, tp := range []string{"", "00-abc-def-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", producerTP + "x"} {
		if _, ok := Parse(tp); ok {
			t.Errorf("Parse(%q) ok", tp)
		}
	}
	if got := Traceparent(trace.SpanContextFromContext(remoteCtx(t, producerTP))); got != producerTP {
		t.Fatalf("Traceparent round trip = %s", got)
	}
}
