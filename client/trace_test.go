package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// producerSpan is a context carrying a sampled span context, as an
// OpenTelemetry SDK would give a producer.
func producerSpan() (context.Context, trace.SpanContext) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// Issue 19 (tracing): W3C trace context travels from the producer into
// the worker: the enqueued job carries meta.traceparent, and the
// handler's context holds the producer's span context (remote), so the
// handler's spans continue the producer's trace.
func TestTraceContextReachesTheHandler(t *testing.T) {
	t.Parallel()
	bindings(t, func(t *testing.T, kind string) {
		e := setup(t, kind, app.Config{}, client.Config{})
		pctx, sc := producerSpan()
		got := make(chan trace.SpanContext, 1)
		startWorker(t, e, client.WorkerConfig{Queues: []string{"traced"}}, map[string]client.Handler{
			"traced": func(ctx context.Context, j *client.Job) (any, error) {
				got <- trace.SpanContextFromContext(ctx)
				return nil, nil
			},
		})
		j, err := e.c.Enqueue(pctx, "traced", nil, client.Queue("traced"))
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]string
		_ = json.Unmarshal(j.Meta, &meta)
		if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; meta["traceparent"] != want {
			t.Fatalf("meta.traceparent %q, want %q", meta["traceparent"], want)
		}
		select {
		case hc := <-got:
			if hc.TraceID() != sc.TraceID() || hc.SpanID() != sc.SpanID() || !hc.IsRemote() || !hc.IsSampled() {
				t.Fatalf("handler span context %+v, want the producer's %+v as remote", hc, sc)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("job not run")
		}
	})
}

// Requests made with a traced context carry the traceparent header.
func TestTraceparentHeader(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/openjobspec+json")
		_, _ = w.Write([]byte(`{"job":{"id":"j1","type":"t","state":"available"}}`))
	}))
	defer srv.Close()
	c, err := client.New(client.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, sc := producerSpan()
	if _, err := c.Get(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if h := <-seen; h != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
		t.Fatalf("traceparent header %q", h)
	}
}
