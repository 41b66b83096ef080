package app_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/tracing"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// TestTraceContinuesFromProducerToWorker (issue 19, "Tracing": spans across
// enqueue -> fetch -> ack with W3C trace context carried in the job's
// meta.traceparent, so a producer's trace continues into the worker): the
// producer's traceparent parents jetgate's enqueue span, whose context the
// job carries in meta.traceparent; the fetch span links to it; the
// worker's ack, sent with a span of that trace, is a child of it.
func TestTraceContinuesFromProducerToWorker(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := startApp(t, app.Config{TracerProvider: tp})
	c := client{t: t, base: s.URL()}

	const traceID, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	enq := c.doRaw("POST", "/ojs/v1/jobs", `{"type":"trace.me","queue":"traced","args":[1]}`,
		map[string]string{"traceparent": "00-" + traceID + "-" + producerSpan + "-01"})
	if enq.status != 201 {
		t.Fatalf("enqueue: %d %s", enq.status, enq.raw)
	}
	job := enq.body["job"].(map[string]any)
	meta, _ := job["meta"].(map[string]any)
	stamped, _ := meta["traceparent"].(string)
	sc, ok := tracing.Parse(stamped)
	if !ok || sc.TraceID().String() != traceID {
		t.Fatalf("meta.traceparent = %q, want a context of trace %s", stamped, traceID)
	}

	f := c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"traced"}, "worker_id": "w1"})
	jobs := f["jobs"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["meta"].(map[string]any)["traceparent"] != stamped {
		t.Fatalf("fetched jobs = %v, want the job with meta.traceparent %s", jobs, stamped)
	}
	const workerSpan = "b7ad6b7169203331"
	ack := c.doRaw("POST", "/ojs/v1/workers/ack", fmt.Sprintf(`{"job_id":%q}`, job["id"]),
		map[string]string{"traceparent": "00-" + traceID + "-" + workerSpan + "-01"})
	if ack.status != 200 {
		t.Fatalf("ack: %d %s", ack.status, ack.raw)
	}

	spans := endedSpans(t, rec, "POST /ojs/v1/jobs", "POST /ojs/v1/workers/fetch", "POST /ojs/v1/workers/ack")
	enqSpan, fetchSpan, ackSpan := spans["POST /ojs/v1/jobs"], spans["POST /ojs/v1/workers/fetch"], spans["POST /ojs/v1/workers/ack"]
	if enqSpan == nil || fetchSpan == nil || ackSpan == nil {
		t.Fatalf("spans recorded: %v", names(rec.Ended()))
	}
	if enqSpan.SpanContext().TraceID().String() != traceID || enqSpan.Parent().SpanID().String() != producerSpan ||
		enqSpan.SpanKind() != trace.SpanKindServer {
		t.Fatalf("enqueue span %v parent %v: want trace %s, parent %s", enqSpan.SpanContext(), enqSpan.Parent(), traceID, producerSpan)
	}
	if sc.SpanID() != enqSpan.SpanContext().SpanID() {
		t.Fatalf("meta.traceparent names span %s, the enqueue span is %s", sc.SpanID(), enqSpan.SpanContext().SpanID())
	}
	linked := false
	for _, l := range fetchSpan.Links() {
		linked = linked || l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID()
	}
	if !linked {
		t.Fatalf("fetch span links %v, want one to the job's %s", fetchSpan.Links(), stamped)
	}
	if ackSpan.SpanContext().TraceID().String() != traceID || ackSpan.Parent().SpanID().String() != workerSpan {
		t.Fatalf("ack span %v parent %v: want trace %s, parent %s", ackSpan.SpanContext(), ackSpan.Parent(), traceID, workerSpan)
	}
}

// Without a tracer provider nothing is recorded, but the producer's own
// context still reaches meta.traceparent, so its workers continue its
// trace; a job enqueued without one gets none.
func TestTraceparentReachesMetaWithoutTracing(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	enq := c.doRaw("POST", "/ojs/v1/jobs", `{"type":"trace.me","args":[1],"meta":{"tenant_id":"t1"}}`,
		map[string]string{"traceparent": tp})
	meta := enq.body["job"].(map[string]any)["meta"].(map[string]any)
	if meta["traceparent"] != tp || meta["tenant_id"] != "t1" {
		t.Fatalf("meta = %v, want tenant_id kept and traceparent %s", meta, tp)
	}
	plain := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "trace.me", "args": []int{2}})
	if m, ok := plain["job"].(map[string]any)["meta"].(map[string]any); ok && m["traceparent"] != nil {
		t.Fatalf("a job enqueued without a trace context got meta %v", m)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// The same over the NATS binding (issue 19: W3C trace context in NATS
// headers): a traceparent NATS header parents the enqueue span, reaches
// meta.traceparent, the fetch span links to it and the ack span is a child
// of the worker's traceparent header.
func TestTraceOverNATSBinding(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := startApp(t, app.Config{TracerProvider: tp})
	nc, err := nats.Connect(s.NatsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := func(subject, body, traceparent string) map[string]any {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Data = []byte(body)
		m.Header.Set("traceparent", traceparent)
		r, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		if code := r.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("%s: %s %s", subject, code, r.Data)
		}
		var out map[string]any
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatalf("%s: %s", subject, r.Data)
		}
		return out
	}
	enq := req("ojs.v1.jobs.enqueue", `{"type":"trace.me","queue":"traced-nats","args":[1]}`, "00-"+traceID+"-00f067aa0ba902b7-01")
	job := enq["job"].(map[string]any)
	stamped := job["meta"].(map[string]any)["traceparent"].(string)
	sc, ok := tracing.Parse(stamped)
	if !ok || sc.TraceID().String() != traceID {
		t.Fatalf("meta.traceparent = %q", stamped)
	}
	req("ojs.v1.workers.fetch", `{"queues":["traced-nats"],"worker_id":"w1"}`, "")
	req("ojs.v1.workers.ack", fmt.Sprintf(`{"job_id":%q}`, job["id"]), "00-"+traceID+"-b7ad6b7169203331-01")

	spans := endedSpans(t, rec, "ojs.v1.jobs.enqueue", "ojs.v1.workers.fetch", "ojs.v1.workers.ack")
	enqSpan, fetchSpan, ackSpan := spans["ojs.v1.jobs.enqueue"], spans["ojs.v1.workers.fetch"], spans["ojs.v1.workers.ack"]
	if enqSpan == nil || fetchSpan == nil || ackSpan == nil {
		t.Fatalf("spans recorded: %v", names(rec.Ended()))
	}
	if enqSpan.SpanContext().SpanID() != sc.SpanID() || enqSpan.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("enqueue span %v parent %v, meta names %s", enqSpan.SpanContext(), enqSpan.Parent(), stamped)
	}
	if len(fetchSpan.Links()) != 1 || fetchSpan.Links()[0].SpanContext.SpanID() != sc.SpanID() {
		t.Fatalf("fetch span links %v", fetchSpan.Links())
	}
	if ackSpan.Parent().SpanID().String() != "b7ad6b7169203331" || ackSpan.SpanContext().TraceID().String() != traceID {
		t.Fatalf("ack span %v parent %v", ackSpan.SpanContext(), ackSpan.Parent())
	}
}

// endedSpans waits (generous bound) until spans of every name have ended:
// a request's span ends just after its answer is sent, so the answer can
// reach the test first.
func endedSpans(t *testing.T, rec *tracetest.SpanRecorder, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := map[string]sdktrace.ReadOnlySpan{}
		for _, sp := range rec.Ended() {
			spans[sp.Name()] = sp
		}
		all := true
		for _, n := range names {
			all = all && spans[n] != nil
		}
		if all || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(10 * time.Millisecond)
	}
}
