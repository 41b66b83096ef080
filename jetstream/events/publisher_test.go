package events

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

const testSource = "ojs://jetgate/test-1"

type bundle struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// testCtx bounds a test's calls generously: on a loaded machine the
// server may take seconds where it usually takes microseconds.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup starts a server, creates a Publisher and ensures the event stream.
func setup(t *testing.T, cfg Config) (*Publisher, bundle) {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	cfg.Source = testSource
	p, err := New(nc, js, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := p.Ensure(testCtx(t)); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return p, bundle{nc: nc, js: js}
}

// subscribe returns a channel of every message on ojs.events.>.
func subscribe(t *testing.T, nc *nats.Conn) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(topology.EventSubjects, ch)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return ch
}

func receive(t *testing.T, ch chan *nats.Msg) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no event received")
		return nil
	}
}

// decodeEnvelope checks the envelope of ojs-events.md section 2 and
// returns it with its data as a map.
func decodeEnvelope(t *testing.T, b []byte) (ojs.Event, map[string]any) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("envelope is not a JSON object: %v: %s", err, b)
	}
	for _, k := range []string{"specversion", "id", "type", "source", "time", "datacontenttype", "data"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, b)
		}
	}
	var ev ojs.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode envelope: %v", err)
	}
	if ev.SpecVersion != "1.0" || ev.Source != testSource || ev.DataContentType != "application/json" {
		t.Errorf("envelope = %+v", ev)
	}
	id, ok := strings.CutPrefix(ev.ID, "evt_")
	if u, err := uuid.Parse(id); !ok || err != nil || u.Version() != 7 {
		t.Errorf("id %q is not evt_<UUIDv7>", ev.ID)
	}
	var ts string
	_ = json.Unmarshal(raw["time"], &ts)
	if _, err := time.Parse(ojs.TimeFormat, ts); err != nil {
		t.Errorf("time %q is not UTC with milliseconds: %v", ts, err)
	}
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatalf("data is not an object: %v", err)
	}
	return ev, data
}

func TestPublishEnvelope(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{})
	ch := subscribe(t, b.nc)

	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := &ojs.Job{
		ID: "job-1", Type: "email.send", Queue: "email", Attempt: 1, State: ojs.StateCompleted,
		StartedAt: ojs.NewTime(started), CompletedAt: ojs.NewTime(started.Add(1333 * time.Millisecond)),
		Result: json.RawMessage(`{"message_id":"msg_abc123"}`),
	}
	p.PublishJob(TypeJobCompleted, job, nil)

	m := receive(t, ch)
	if m.Subject != "ojs.events.job.completed" {
		t.Errorf("subject = %q", m.Subject)
	}
	ev, data := decodeEnvelope(t, m.Data)
	if ev.Type != TypeJobCompleted || ev.Subject != "job-1" {
		t.Errorf("type %q subject %q", ev.Type, ev.Subject)
	}
	want := map[string]any{"job_type": "email.send", "queue": "email", "attempt": 1.0, "duration_ms": 1333.0}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("data[%s] = %v, want %v", k, data[k], v)
		}
	}
	if r, _ := data["result"].(map[string]any); r["message_id"] != "msg_abc123" {
		t.Errorf("result = %v", data["result"])
	}
	if st := p.Stats(); st.Published != 1 || st.Dropped != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestPublishJobData(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{})
	ch := subscribe(t, b.nc)
	now := time.Now().UTC()
	retryable := false
	job := &ojs.Job{
		ID: "job-2", Type: "report.generate", Priority: 2, Attempt: 0, MaxAttempts: 3,
		WorkerID: "w-1", State: ojs.StateRetryable,
		CreatedAt: ojs.NewTime(now.Add(-time.Minute)), ExpiresAt: ojs.NewTime(now),
		ScheduledAt: ojs.NewTime(now.Add(time.Hour)), StartedAt: ojs.NewTime(now.Add(-time.Second)),
		NextAttemptAt: ojs.NewTime(now.Add(2 * time.Second)),
		Error:         &ojs.JobError{Code: "boom", Message: "it broke", Backtrace: json.RawMessage(`["a","b"]`)},
		Meta:          json.RawMessage(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`),
		Internal:      ojs.Internal{LeaseUntil: ojs.NewTime(now.Add(30 * time.Second))},
	}
	tests := []struct {
		typ  string
		want []string // required data fields of section 4.1
	}{
		{TypeJobEnqueued, []string{"priority", "scheduled_at"}},
		{TypeJobStarted, []string{"worker_id", "attempt"}},
		{TypeJobCompleted, []string{"duration_ms", "attempt"}},
		{TypeJobFailed, []string{"attempt", "error", "duration_ms"}},
		{TypeJobDiscarded, []string{"total_attempts", "last_error"}},
		{TypeJobRetrying, []string{"attempt", "max_attempts", "next_retry_at", "error"}},
		{TypeJobCancelled, nil},
		{TypeJobHeartbeat, []string{"worker_id", "attempt", "visible_until"}},
		{TypeJobScheduled, []string{"scheduled_at"}},
		{TypeJobExpired, []string{"created_at", "expired_at", "ttl_ms"}},
	}
	for _, tt := range tests {
		p.PublishJob(tt.typ, job, nil)
		m := receive(t, ch)
		if m.Subject != topology.EventSubject(tt.typ) {
			t.Errorf("%s: subject %q", tt.typ, m.Subject)
		}
		ev, data := decodeEnvelope(t, m.Data)
		if ev.Type != tt.typ || ev.Subject != job.ID {
			t.Errorf("%s: envelope type %q subject %q", tt.typ, ev.Type, ev.Subject)
		}
		for _, k := range append([]string{"job_type", "queue", "trace_id"}, tt.want...) {
			if _, ok := data[k]; !ok {
				t.Errorf("%s: data lacks %q: %v", tt.typ, k, data)
			}
		}
		if data["queue"] != ojs.DefaultQueue || data["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: queue %v trace_id %v", tt.typ, data["queue"], data["trace_id"])
		}
		switch tt.typ {
		case TypeJobFailed:
			e := data["error"].(map[string]any)
			if e["code"] != "boom" || e["message"] != "it broke" || e["retryable"] != true || e["stack_trace"] != "a\nb" {
				t.Errorf("failed error = %v", e)
			}
		case TypeJobDiscarded:
			if e := data["last_error"].(map[string]any); e["code"] != "boom" || e["retryable"] != nil {
				t.Errorf("discarded last_error = %v", e)
			}
		case TypeJobExpired:
			if data["ttl_ms"] != 60000.0 {
				t.Errorf("ttl_ms = %v", data["ttl_ms"])
			}
		}
	}

	// The job's own retryable flag wins over its state; extra adds fields.
	job.Error.Retryable = &retryable
	p.PublishJob(TypeJobFailed, job, map[string]any{"attempt": 7, "note": "x"})
	_, data := decodeEnvelope(t, receive(t, ch).Data)
	if data["error"].(map[string]any)["retryable"] != false || data["attempt"] != 7.0 || data["note"] != "x" {
		t.Errorf("failed with extra = %v", data)
	}
}

func TestPublishQueue(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{})
	ch := subscribe(t, b.nc)
	p.PublishQueue(TypeQueuePaused, "email", "user:ops")
	p.PublishQueue(TypeQueueResumed, "a.b", "")

	m := receive(t, ch)
	ev, data := decodeEnvelope(t, m.Data)
	if m.Subject != "ojs.events.queue.paused" || ev.Subject != "email" || data["queue"] != "email" || data["paused_by"] != "user:ops" {
		t.Errorf("paused: %s %s %v", m.Subject, ev.Subject, data)
	}
	m = receive(t, ch)
	ev, data = decodeEnvelope(t, m.Data)
	if m.Subject != "ojs.events.queue.resumed" || ev.Subject != "a.b" || data["queue"] != "a.b" {
		t.Errorf("resumed: %s %s %v", m.Subject, ev.Subject, data)
	}
	if _, ok := data["resumed_by"]; ok {
		t.Errorf("empty actor published: %v", data)
	}
}

func TestPublishDrops(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{})
	p.Publish(TypeJobProgress, "job-1", func() {}) // not encodable
	if st := p.Stats(); st.Dropped != 1 || st.Published != 0 {
		t.Errorf("stats after bad data = %+v", st)
	}
	p.nc.Close()
	p.Publish(TypeJobProgress, "job-1", map[string]any{})
	if st := p.Stats(); st.Dropped != 2 {
		t.Errorf("stats after close = %+v", st)
	}
}

func TestNilPublisher(t *testing.T) {
	t.Parallel()
	var p *Publisher
	p.Publish(TypeJobEnqueued, "x", nil)
	p.PublishJob(TypeJobEnqueued, &ojs.Job{}, nil)
	p.PublishQueue(TypeQueuePaused, "q", "")
	if p.Stats() != (Stats{}) {
		t.Error("nil publisher has stats")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	if _, err := New(nil, js, Config{}); err == nil {
		t.Error("nil conn accepted")
	}
	if _, err := New(nc, nil, Config{Stream: true}); err == nil {
		t.Error("stream without a JetStream context accepted")
	}
	if _, err := New(nc, nil, Config{}); err != nil {
		t.Errorf("capture without a JetStream context: %v", err)
	}
	for _, cfg := range []Config{
		{Source: "not a uri"},
		{Replicas: 7},
		{MaxAge: -time.Second},
		{MaxMsgs: -2},
		{MaxBytes: 100},
		{BufferEvents: -1},
		{BufferBytes: 100},
		{BufferIdle: -time.Second},
	} {
		if _, err := New(nc, js, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	p, err := New(nc, js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.cfg.Source, "ojs://jetgate") || p.cfg.MaxAge != DefaultMaxAge || p.cfg.MaxMsgs != DefaultMaxMsgs ||
		p.cfg.MaxBytes != DefaultMaxBytes || p.cfg.BufferEvents != DefaultBufferEvents || p.cfg.BufferBytes != DefaultBufferBytes ||
		p.cfg.BufferIdle != DefaultBufferIdle || p.cfg.Stream {
		t.Errorf("defaults = %+v", p.cfg)
	}
}

func TestEnsureIdempotent(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true, MaxAge: time.Hour})
	ctx := testCtx(t)
	if err := p.Ensure(ctx); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	s, err := b.js.Stream(ctx, topology.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if !c.NoAck || c.MaxAge != time.Hour || c.MaxMsgs != DefaultMaxMsgs || c.Discard != jetstream.DiscardOld ||
		c.Retention != jetstream.LimitsPolicy || c.Storage != jetstream.MemoryStorage ||
		len(c.Subjects) != 1 || c.Subjects[0] != topology.EventSubjects {
		t.Errorf("stream config = %+v", c)
	}

	// A publisher with other limits updates the stream in place.
	p2, err := New(b.nc, b.js, Config{Stream: true, MaxMsgs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Ensure(ctx); err != nil {
		t.Fatalf("Ensure with new limits: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxMsgs != 10 || info.Config.MaxAge != DefaultMaxAge {
		t.Errorf("updated config = %+v", info.Config)
	}
}

// BenchmarkPublishJob publishes the three events every job has, with
// the encoder ("appender") and as before it ("reference": uuid.NewV7 and
// json.Marshal of the envelope, referencePublishJob).
func BenchmarkPublishJob(b *testing.B) {
	s := natstest.RunServer(b)
	nc, js := natstest.Connect(b, s)
	p, err := New(nc, js, Config{Source: testSource})
	if err != nil {
		b.Fatal(err)
	}
	now := ojs.NewTime(time.Now())
	job := &ojs.Job{ID: "job-1", Type: "email.send", Queue: "email", Attempt: 1, StartedAt: now, CompletedAt: now,
		WorkerID: "worker-1", Result: json.RawMessage(`{"message_id":"msg_abc123"}`)}
	paths := []struct {
		name    string
		publish func(eventType string)
	}{
		{"reference", func(typ string) { referencePublishJob(p, typ, job) }},
		{"appender", func(typ string) { p.PublishJob(typ, job, nil) }},
	}
	for _, path := range paths {
		for _, typ := range []string{TypeJobEnqueued, TypeJobStarted, TypeJobCompleted} {
			b.Run(path.name+"/"+typ, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					path.publish(typ)
				}
			})
		}
	}
	if st := p.Stats(); st.Dropped != 0 {
		b.Errorf("stats = %+v", st)
	}
}

// A job event's NATS message carries the job's meta.traceparent as the
// W3C traceparent header (issue 19, tracing: trace context in NATS
// headers), so a NATS subscriber continues the job's trace; a job without
// one, or with a malformed one, sends no header.
func TestPublishJobTraceparentHeader(t *testing.T) {
	p, b := setup(t, Config{})
	ch := subscribe(t, b.nc)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "j1", Type: "t", Queue: "q", Meta: json.RawMessage(`{"traceparent":"` + tp + `"}`)}, nil)
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "j2", Type: "t", Queue: "q", Meta: json.RawMessage(`{"traceparent":"not-one"}`)}, nil)
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "j3", Type: "t", Queue: "q"}, nil)
	for _, want := range []string{tp, "", ""} {
		m := receive(t, ch)
		if got := m.Header.Get("traceparent"); got != want {
			t.Fatalf("event %s: traceparent header %q, want %q", m.Data, got, want)
		}
	}
}

// An event that Config.Listening says nobody would receive is neither
// built nor sent, and is counted; one it says somebody would receive is
// published as usual (ojs-events.md section 2: every subscriber still gets
// every event).
func TestListeningSkipsUnheardEvents(t *testing.T) {
	t.Parallel()
	var heard atomic.Bool
	var asked atomic.Value
	p, b := setup(t, Config{Listening: func(subject string) bool {
		asked.Store(subject)
		return heard.Load()
	}})
	ch := subscribe(t, b.nc)
	job := &ojs.Job{ID: "job-1", Type: "t", Queue: "q", State: ojs.StateActive, Attempt: 1}

	p.PublishJob(TypeJobStarted, job, nil)
	p.PublishQueue(TypeQueuePaused, "q", "")
	if got := asked.Load(); got != "ojs.events.queue.paused" {
		t.Errorf("Listening asked about %v, want the event's subject", got)
	}
	heard.Store(true)
	p.PublishJob(TypeJobCompleted, job, nil)

	if m := receive(t, ch); m.Subject != "ojs.events.job.completed" {
		t.Fatalf("first event received is on %q: an unheard event was sent", m.Subject)
	}
	if st := p.Stats(); st.Unheard != 2 || st.Published != 1 || st.Dropped != 0 {
		t.Errorf("stats = %+v, want 2 unheard and 1 published", st)
	}
}
