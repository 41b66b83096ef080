package httpbind

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// fakeBackend is a hand-written Backend: it records each call's request and
// answers canned results, or err, or panics with panicWith.
type fakeBackend struct {
	mu        sync.Mutex
	calls     []string
	err       error
	panicWith any

	// Requests received.
	enqueued []*ojs.Job
	id       string
	fetchReq ojs.FetchRequest
	ackReq   ojs.AckRequest
	nackReq  ojs.NackRequest
	beatReq  ojs.HeartbeatRequest
	dlQuery  ojs.DeadLetterQuery
	evQuery  ojs.EventQuery
	queue    string

	// Canned answers.
	job     *ojs.Job
	prev    ojs.State
	fetched []*ojs.Job
	ackRes  *ojs.AckResult
	nackRes *ojs.NackResult
	beatRes *ojs.HeartbeatResult
	queues  []ojs.QueueInfo
	stats   *ojs.QueueStats
	dlPage  *ojs.JobPage
	events  []ojs.Event
	health  ojs.Health
	// readiness is what Ready answers.
	readiness ojs.Readiness
}

var _ Backend = (*fakeBackend)(nil)

// testNow is the fixed instant of canned timestamps.
var testNow = time.Date(2026, 2, 12, 10, 30, 0, 123_000_000, time.UTC)

func (f *fakeBackend) record(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	if f.panicWith != nil {
		panic(f.panicWith)
	}
	return f.err
}

func (f *fakeBackend) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// stored returns j as the backend would after enqueue: state, timestamps and
// server bookkeeping that must never reach a client.
func stored(j *ojs.Job) *ojs.Job {
	c := j.Clone()
	c.State = ojs.StateAvailable
	c.CreatedAt = ojs.NewTime(testNow)
	c.EnqueuedAt = ojs.NewTime(testNow)
	c.Internal = ojs.Internal{Token: "secret-token", HeldAck: "$JS.ACK.secret"}
	return c
}

func (f *fakeBackend) Enqueue(_ context.Context, job *ojs.Job) (*ojs.Job, error) {
	if err := f.record("Enqueue"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enqueued = append(f.enqueued, job)
	return stored(job), nil
}

func (f *fakeBackend) EnqueueBatch(_ context.Context, jobs []*ojs.Job) ([]*ojs.Job, error) {
	if err := f.record("EnqueueBatch"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*ojs.Job, len(jobs))
	for i, j := range jobs {
		f.enqueued = append(f.enqueued, j)
		out[i] = stored(j)
	}
	return out, nil
}

func (f *fakeBackend) withID(name, id string) error {
	err := f.record(name)
	f.mu.Lock()
	f.id = id
	f.mu.Unlock()
	return err
}

func (f *fakeBackend) Get(_ context.Context, id string) (*ojs.Job, error) {
	if err := f.withID("Get", id); err != nil {
		return nil, err
	}
	return f.job, nil
}

func (f *fakeBackend) Cancel(_ context.Context, id string) (*ojs.Job, ojs.State, error) {
	if err := f.withID("Cancel", id); err != nil {
		return nil, "", err
	}
	return f.job, f.prev, nil
}

func (f *fakeBackend) Activate(_ context.Context, id string) (*ojs.Job, error) {
	if err := f.withID("Activate", id); err != nil {
		return nil, err
	}
	return f.job, nil
}

func (f *fakeBackend) Fetch(_ context.Context, req ojs.FetchRequest) ([]*ojs.Job, error) {
	err := f.record("Fetch")
	f.mu.Lock()
	f.fetchReq = req
	f.mu.Unlock()
	return f.fetched, err
}

func (f *fakeBackend) Ack(_ context.Context, req ojs.AckRequest) (*ojs.AckResult, error) {
	err := f.record("Ack")
	f.mu.Lock()
	f.ackReq = req
	f.mu.Unlock()
	return f.ackRes, err
}

func (f *fakeBackend) Nack(_ context.Context, req ojs.NackRequest) (*ojs.NackResult, error) {
	err := f.record("Nack")
	f.mu.Lock()
	f.nackReq = req
	f.mu.Unlock()
	return f.nackRes, err
}

func (f *fakeBackend) Heartbeat(_ context.Context, req ojs.HeartbeatRequest) (*ojs.HeartbeatResult, error) {
	err := f.record("Heartbeat")
	f.mu.Lock()
	f.beatReq = req
	f.mu.Unlock()
	return f.beatRes, err
}

func (f *fakeBackend) ListQueues(context.Context) ([]ojs.QueueInfo, error) {
	return f.queues, f.record("ListQueues")
}

func (f *fakeBackend) withQueue(name, q string) error {
	err := f.record(name)
	f.mu.Lock()
	f.queue = q
	f.mu.Unlock()
	return err
}

func (f *fakeBackend) QueueStats(_ context.Context, name string) (*ojs.QueueStats, error) {
	return f.stats, f.withQueue("QueueStats", name)
}

func (f *fakeBackend) PauseQueue(_ context.Context, name string) (*ojs.QueueInfo, error) {
	if err := f.withQueue("PauseQueue", name); err != nil {
		return nil, err
	}
	return &ojs.QueueInfo{Name: name, Status: ojs.QueuePaused, PausedAt: ojs.NewTime(testNow)}, nil
}

func (f *fakeBackend) ResumeQueue(_ context.Context, name string) (*ojs.QueueInfo, error) {
	if err := f.withQueue("ResumeQueue", name); err != nil {
		return nil, err
	}
	return &ojs.QueueInfo{Name: name, Status: ojs.QueueActive, PausedAt: ojs.NewTime(testNow),
		ResumedAt: ojs.NewTime(testNow)}, nil
}

func (f *fakeBackend) ListDeadLetter(_ context.Context, q ojs.DeadLetterQuery) (*ojs.JobPage, error) {
	err := f.record("ListDeadLetter")
	f.mu.Lock()
	f.dlQuery = q
	f.mu.Unlock()
	return f.dlPage, err
}

func (f *fakeBackend) RetryDeadLetter(_ context.Context, id string) (*ojs.Job, error) {
	if err := f.withID("RetryDeadLetter", id); err != nil {
		return nil, err
	}
	return f.job, nil
}

func (f *fakeBackend) DeleteDeadLetter(_ context.Context, id string) error {
	return f.withID("DeleteDeadLetter", id)
}

func (f *fakeBackend) RecentEvents(_ context.Context, q ojs.EventQuery) ([]ojs.Event, error) {
	err := f.record("RecentEvents")
	f.mu.Lock()
	f.evQuery = q
	f.mu.Unlock()
	return f.events, err
}

func (f *fakeBackend) Health(context.Context) ojs.Health {
	_ = f.record("Health")
	return f.health
}

func (f *fakeBackend) Ready(context.Context) ojs.Readiness {
	_ = f.record("Ready")
	return f.readiness
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bundle is what setup returns besides the server.
type bundle struct {
	srv  *httptest.Server
	fake *fakeBackend
	logs *syncBuffer
}

// setup starts a real listening server around New with a fresh fake.
func setup(t *testing.T, cfg Config) bundle {
	t.Helper()
	fake := &fakeBackend{health: ojs.Health{Status: "ok"}}
	logs := &syncBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := New(fake, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return bundle{srv: srv, fake: fake, logs: logs}
}

// response is a decoded answer.
type response struct {
	*http.Response
	raw  []byte
	body map[string]any
}

// sdkHeaders are the headers the official Go SDK sends (spec/README.md).
var sdkHeaders = map[string]string{
	"Content-Type":  MediaType,
	"Accept":        MediaType,
	"OJS-Version":   "1.0.0-rc.1",
	"Authorization": "Bearer token",
}

// do sends one request; body "" sends none. headers may override
// Content-Type (set to MediaType when a body is sent).
func (b bundle) do(t *testing.T, method, path, body string, headers map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", MediaType)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	return sendWith(t, b.srv.Client(), req)
}

func send(t *testing.T, req *http.Request) response {
	t.Helper()
	return sendWith(t, http.DefaultClient, req)
}

// sendWith sends req with c. A bundle's requests go through its server's
// own client: the default transport is shared by parallel tests, and a
// server's Close closes its idle connections under another test's
// request (TestHead failed once so under -race).
func sendWith(t *testing.T, c *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := response{Response: resp, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v\n%s", req.Method, req.URL.Path, err, raw)
		}
	}
	return out
}

// wantStatus fails unless the status is want.
func (r response) wantStatus(t *testing.T, want int) response {
	t.Helper()
	if r.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, want, r.raw)
	}
	return r
}

// wantError checks the envelope of ojs-http-binding.md 16.1 and returns its
// details.
func (r response) wantError(t *testing.T, status int, code string, retryable bool) map[string]any {
	t.Helper()
	r.wantStatus(t, status)
	e, ok := r.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error envelope: %s", r.raw)
	}
	if e["code"] != code {
		t.Errorf("error.code = %v, want %s (%s)", e["code"], code, r.raw)
	}
	if e["retryable"] != retryable {
		t.Errorf("error.retryable = %v, want %v", e["retryable"], retryable)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error.message is empty")
	}
	// Every envelope says what to do: one sentence in "hint".
	if h, _ := e["hint"].(string); h == "" || !strings.HasSuffix(h, ".") {
		t.Errorf("error.hint = %q, want one sentence (%s)", e["hint"], r.raw)
	}
	if id := r.Header.Get("X-Request-Id"); id == "" || e["request_id"] != id {
		t.Errorf("error.request_id = %v, header X-Request-Id = %q", e["request_id"], id)
	}
	d, ok := e["details"].(map[string]any)
	if !ok {
		t.Fatalf("error.details is not an object: %s", r.raw)
	}
	return d
}

// obj returns body[key] as an object.
func (r response) obj(t *testing.T, key string) map[string]any {
	t.Helper()
	m, ok := r.body[key].(map[string]any)
	if !ok {
		t.Fatalf("%q is not an object: %s", key, r.raw)
	}
	return m
}

// list returns body[key] as an array (non-null).
func (r response) list(t *testing.T, key string) []any {
	t.Helper()
	l, ok := r.body[key].([]any)
	if !ok {
		t.Fatalf("%q is not an array: %s", key, r.raw)
	}
	return l
}

// wantHeaders checks the headers every response carries (6.5).
func wantHeaders(t *testing.T, r response) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != MediaType {
		t.Errorf("Content-Type = %q, want exactly %q", ct, MediaType)
	}
	if v := r.Header.Get("OJS-Version"); v != "1.0" {
		t.Errorf("OJS-Version = %q, want 1.0", v)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("X-Request-Id missing")
	}
}

// newJob returns a stored job with a valid id.
func newJob(state ojs.State) *ojs.Job {
	j := &ojs.Job{SpecVersion: "1.0", ID: ojs.NewID(), Type: "email.send", Queue: "email",
		Args: json.RawMessage(`["a@example.com"]`), Priority: 2, State: state, Attempt: 1, MaxAttempts: 3,
		CreatedAt: ojs.NewTime(testNow)}
	j.Internal = ojs.Internal{Token: "secret-token"}
	return j
}
