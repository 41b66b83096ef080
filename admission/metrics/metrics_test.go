package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

func setup(t *testing.T, cfg Config) *Metrics {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// scrape GETs the handler and returns the exposition text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

func requireLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("missing line %q", l)
		}
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", text)
	}
}

func TestJobInstruments(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{InstanceID: "i-1", Version: "v0.1.0"})
	ctx := context.Background()
	const q, typ = "email", "email.send"
	m.JobEnqueued(ctx, q, typ)
	m.JobEnqueued(ctx, q, typ)
	m.JobEnqueued(ctx, "default", "report.generate")
	m.EnqueueDuration(ctx, q, 2*time.Millisecond)
	m.JobStarted(ctx, q, typ, 1, 40*time.Millisecond)
	m.JobStarted(ctx, q, typ, 2, time.Hour) // a retry: no queue time
	m.JobCompleted(ctx, q, typ, 300*time.Millisecond)
	m.JobFailed(ctx, q, typ, 20*time.Millisecond)
	m.JobDiscarded(ctx, q, typ, 3*time.Second)
	m.JobDiscarded(ctx, q, typ, 0) // discarded without running: no duration
	m.JobCancelled(ctx, q, typ, 0)
	m.JobExpired(ctx, q, typ)

	requireLines(t, scrape(t, m),
		"# TYPE ojs_job_enqueued_total counter",
		`ojs_job_enqueued_total{queue="email",type="email.send"} 2`,
		`ojs_job_enqueued_total{queue="default",type="report.generate"} 1`,
		`ojs_job_started_total{queue="email",type="email.send"} 2`,
		`ojs_job_completed_total{queue="email",type="email.send"} 1`,
		`ojs_job_retried_total{queue="email",type="email.send"} 1`,
		`ojs_job_failed_total{queue="email",type="email.send"} 2`,
		`ojs_job_cancelled_total{queue="email",type="email.send"} 1`,
		`ojs_job_expired_total{queue="email",type="email.send"} 1`,
		"# TYPE ojs_job_duration_seconds histogram",
		`ojs_job_duration_seconds_bucket{queue="email",state="completed",type="email.send",le="0.25"} 0`,
		`ojs_job_duration_seconds_bucket{queue="email",state="completed",type="email.send",le="0.5"} 1`,
		`ojs_job_duration_seconds_sum{queue="email",state="completed",type="email.send"} 0.3`,
		`ojs_job_duration_seconds_count{queue="email",state="retryable",type="email.send"} 1`,
		`ojs_job_duration_seconds_count{queue="email",state="discarded",type="email.send"} 1`,
		`ojs_job_duration_seconds_bucket{queue="email",state="completed",type="email.send",le="300"} 1`,
		"# TYPE ojs_job_queue_time_seconds histogram",
		`ojs_job_queue_time_seconds_count{queue="email",type="email.send"} 1`,
		`ojs_job_queue_time_seconds_sum{queue="email",type="email.send"} 0.04`,
		`ojs_job_queue_time_seconds_bucket{queue="email",type="email.send",le="3600"} 1`,
		`ojs_job_enqueue_duration_seconds_count{queue="email"} 1`,
		`target_info{service_instance_id="i-1",service_name="jetgate",service_version="v0.1.0"} 1`,
	)
}

func TestQueueDepth(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{})
	if strings.Contains(scrape(t, m), "ojs_queue_depth{") {
		t.Error("depth reported before a function was set")
	}
	m.SetQueueDepthFunc(func(context.Context) map[string]int64 { return map[string]int64{"email": 4, "a.b": 0} })
	requireLines(t, scrape(t, m),
		"# TYPE ojs_queue_depth gauge",
		`ojs_queue_depth{queue="email",state="available"} 4`,
		`ojs_queue_depth{queue="a.b",state="available"} 0`,
	)

	m.SetStateDepthFunc(func(context.Context) map[string]map[ojs.State]int64 {
		return map[string]map[ojs.State]int64{"email": {ojs.StateAvailable: 42, ojs.StateActive: 8, ojs.StateScheduled: 15}}
	})
	text := scrape(t, m)
	requireLines(t, text,
		`ojs_queue_depth{queue="email",state="available"} 42`,
		`ojs_queue_depth{queue="email",state="active"} 8`,
		`ojs_queue_depth{queue="email",state="scheduled"} 15`,
	)
	if strings.Contains(text, `queue="a.b"`) {
		t.Error("replaced depth function still reported")
	}

	m.SetQueueDepthFunc(nil)
	if strings.Contains(scrape(t, m), "ojs_queue_depth{") {
		t.Error("depth reported after the function was removed")
	}
}

func TestInstancesDoNotCollide(t *testing.T) {
	t.Parallel()
	a, b := setup(t, Config{}), setup(t, Config{RuntimeMetrics: true})
	ctx := context.Background()
	a.JobEnqueued(ctx, "q", "t")
	if strings.Contains(scrape(t, b), "ojs_job_enqueued_total{") {
		t.Error("b sees a's measurement")
	}
	if !strings.Contains(scrape(t, b), "go_goroutines") || strings.Contains(scrape(t, a), "go_goroutines") {
		t.Error("runtime metrics not where configured")
	}
}

func TestMeterAddsInstruments(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{})
	c, err := m.Meter().Int64Counter("ojs.workers.started")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3)
	requireLines(t, scrape(t, m), "ojs_workers_started_total 3")
}

func TestNilMetrics(t *testing.T) {
	t.Parallel()
	var m *Metrics
	ctx := context.Background()
	m.JobEnqueued(ctx, "q", "t")
	m.EnqueueDuration(ctx, "q", time.Second)
	m.JobStarted(ctx, "q", "t", 1, time.Second)
	m.JobCompleted(ctx, "q", "t", time.Second)
	m.JobFailed(ctx, "q", "t", time.Second)
	m.JobDiscarded(ctx, "q", "t", time.Second)
	m.JobCancelled(ctx, "q", "t", time.Second)
	m.JobExpired(ctx, "q", "t")
	m.SetQueueDepthFunc(func(context.Context) map[string]int64 { return nil })
	m.SetStateDepthFunc(nil)
	if _, err := m.Meter().Int64Counter("x"); err != nil {
		t.Error(err)
	}
	if m.Registry() != nil || m.Shutdown(ctx) != nil {
		t.Error("nil metrics has a registry or fails to shut down")
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil handler status %d", rec.Code)
	}
}

func TestShutdownTwice(t *testing.T) {
	t.Parallel()
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	m.JobEnqueued(ctx, "q", "t") // recording after shutdown is dropped, not a panic
}

func TestConcurrentRecording(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				q := []string{"a", "b", "c"}[(g+i)%3]
				m.JobEnqueued(ctx, q, "t")
				m.JobCompleted(ctx, q, "t", time.Millisecond)
			}
		})
	}
	wg.Wait()
	text := scrape(t, m)
	for _, q := range []string{"a", "b", "c"} {
		if !strings.Contains(text, `ojs_job_enqueued_total{queue="`+q+`",type="t"}`) {
			t.Errorf("queue %s missing", q)
		}
	}
}

func TestCacheBound(t *testing.T) {
	t.Parallel()
	c := cache[string, int]{build: func(k string) int { return len(k) }, limit: 16}
	for i := range 20 {
		if v := c.get(strings.Repeat("x", i)); v != i {
			t.Fatalf("get = %d, want %d", v, i)
		}
	}
	if n := len(*c.m.Load()); n != 16 {
		t.Errorf("cache holds %d entries, want 16", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	ctx := context.Background()
	tests := []struct {
		name string
		fn   func()
	}{
		{"JobEnqueued", func() { m.JobEnqueued(ctx, "email", "email.send") }},
		{"JobCompleted", func() { m.JobCompleted(ctx, "email", "email.send", time.Millisecond) }},
		{"JobExecuted", func() { m.JobExecuted(ctx, "email", "email.send", "completed", time.Millisecond) }},
		{"JobWaitedByPriority", func() { m.JobWaitedByPriority(ctx, "email", 7, time.Millisecond) }},
		{"JobEnqueueWait", func() { m.JobEnqueueWait(ctx, "email", time.Millisecond) }},
		{"nil", func() { (*Metrics)(nil).JobEnqueued(ctx, "email", "email.send") }},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				tt.fn()
			}
		})
	}
}
