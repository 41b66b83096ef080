package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// client speaks the HTTP binding the way a worker in another language
// would: JSON over HTTP, nothing from jetgate's Go packages.
type client struct {
	t    *testing.T
	base string
}

type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// ojsHTTP sends body (JSON, nil for none) to url as the OJS clients do,
// with their content type, Accept and OJS-Version, on hc (nil: the
// default client), and returns the answer with its body read whole. A
// request that gets no answer fails the test.
func ojsHTTP(t testing.TB, hc *http.Client, method, url string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	req.Header.Set("Accept", "application/openjobspec+json")
	req.Header.Set("OJS-Version", "1.0.0-rc.1")
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return res, raw
}

func (c client) do(method, path string, body any) resp {
	c.t.Helper()
	res, raw := ojsHTTP(c.t, nil, method, c.base+path, body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			c.t.Fatalf("%s %s: body is not a JSON object: %s", method, path, raw)
		}
	}
	if ct := res.Header.Get("Content-Type"); len(raw) > 0 && ct != "application/openjobspec+json" {
		c.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	if res.Header.Get("OJS-Version") == "" || res.Header.Get("X-Request-Id") == "" {
		c.t.Fatalf("%s %s: missing OJS-Version or X-Request-Id", method, path)
	}
	return r
}

func (c client) must(status int, method, path string, body any) map[string]any {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != status {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.raw)
	}
	return r.body
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

// connectApp connects to s's NATS server as an operator's tool would,
// closed when the test ends.
func connectApp(t testing.TB, s *app.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.NatsURL(), s.NatsAuth())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func startApp(t testing.TB, cfg app.Config) *app.Server {
	t.Helper()
	lw := natstest.NewLogWriter(t)
	s := startLogged(t, cfg, slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelError})))
	t.Cleanup(lw.Stop) // registered last, runs first: no logging after the test ends
	return s
}

// startLogged starts jetgate with cfg on free ports (in a temp data dir
// unless cfg names one), logging to log, and shuts it down when the test
// ends.
func startLogged(t testing.TB, cfg app.Config, log *slog.Logger) *app.Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.HTTPAddr = "127.0.0.1:0"
	if cfg.NatsURL == "" {
		cfg.NatsAddr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.Start(ctx, cfg, log)
	if err != nil {
		t.Fatalf("start jetgate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

func fetchOne(c client, queues ...string) map[string]any {
	c.t.Helper()
	body := c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": queues, "count": 1, "worker_id": "py-worker-1"})
	jobs := list(body["jobs"])
	if len(jobs) == 0 {
		return nil
	}
	return obj(jobs[0])
}

func waitFetch(c client, within time.Duration, queues ...string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if j := fetchOne(c, queues...); j != nil {
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no job on %v within %s", queues, within)
	return nil
}

// A full worker session over HTTP: enqueue with mixed priorities, fetch in
// priority order, heartbeat, ack, nack -> retry -> dead letter, cancel,
// batch, queue stats, manifest, events.
func TestHTTPWorkerSession(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	exerciseSession(t, c)
}

func exerciseSession(t *testing.T, c client) {
	t.Helper()
	man := c.must(200, "GET", "/ojs/manifest", nil)
	if man["ojs_version"] == nil {
		t.Fatalf("manifest without ojs_version: %v", man)
	}
	if h := c.must(200, "GET", "/ojs/v1/health", nil); h["status"] != "ok" {
		t.Fatalf("health: %v", h)
	}
	// A dashboard watches events from the start: its first read starts
	// the capture that GET /ojs/v1/events reads without an events stream
	// (issue 17), and lists nothing yet.
	if ev := c.must(200, "GET", "/ojs/v1/events", nil); ev["events"] == nil {
		t.Fatalf("first events read: %v", ev)
	}

	// PRI-003/PRI-004: mixed priorities come out lowest value first, FIFO among equals.
	ids := map[string]string{}
	for _, p := range []struct {
		name string
		prio any
	}{{"p5", 5}, {"pdef1", nil}, {"p0", 0}, {"pdef2", nil}} {
		opts := map[string]any{"queue": "mail"}
		if p.prio != nil {
			opts["priority"] = p.prio
		}
		r := c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "email.send", "args": []any{p.name}, "options": opts})
		if r.status != 201 || r.header.Get("Location") == "" {
			t.Fatalf("enqueue: %d %s", r.status, r.raw)
		}
		ids[p.name] = obj(r.body["job"])["id"].(string)
	}
	for _, want := range []string{"p0", "pdef1", "pdef2", "p5"} {
		j := fetchOne(c, "mail")
		if j == nil || j["id"] != ids[want] {
			t.Fatalf("fetch: got %v, want %s", j, want)
		}
		if j["attempt"] != float64(1) || j["state"] != "active" {
			t.Fatalf("fetched job: %v", j)
		}
		hb := c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "py-worker-1", "state": "running", "active_jobs": 1, "active_job_ids": []string{ids[want]}})
		if hb["state"] != "running" {
			t.Fatalf("heartbeat: %v", hb)
		}
		ack := c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": ids[want], "result": map[string]any{"sent": true}})
		if ack["state"] != "completed" {
			t.Fatalf("ack: %v", ack)
		}
	}
	c.must(409, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": ids["p0"]})

	// nack -> retry -> nack -> dead letter -> retry from dead letter.
	r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1},
		"options": map[string]any{"queue": "reports", "retry": map[string]any{"max_attempts": 2, "initial_interval_ms": 200, "backoff_coefficient": 2, "max_interval_ms": 1000, "jitter": false, "non_retryable_errors": []string{}}}})
	rid := obj(r["job"])["id"].(string)
	if j := fetchOne(c, "reports"); j == nil || j["id"] != rid {
		t.Fatalf("fetch report: %v", j)
	}
	n := c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": rid, "error": map[string]any{"code": "handler_error", "message": "disk full", "retryable": true}})
	if n["state"] != "retryable" || n["next_attempt_at"] == nil {
		t.Fatalf("nack: %v", n)
	}
	if j := waitFetch(c, 10*time.Second, "reports"); j["id"] != rid || j["attempt"] != float64(2) {
		t.Fatalf("retry: %v", j)
	}
	n = c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": rid, "error": map[string]any{"code": "handler_error", "message": "disk full again"}})
	if n["state"] != "discarded" {
		t.Fatalf("nack 2: %v", n)
	}
	dl := c.must(200, "GET", "/ojs/v1/dead-letter?queue=reports", nil)
	if jobs := list(dl["jobs"]); len(jobs) != 1 || obj(jobs[0])["id"] != rid {
		t.Fatalf("dead letter: %v", dl)
	}
	c.must(200, "POST", "/ojs/v1/dead-letter/"+rid+"/retry", nil)
	if j := fetchOne(c, "reports"); j == nil || j["id"] != rid {
		t.Fatalf("fetch after dead-letter retry: %v", j)
	}

	// cancel
	r = c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "email.send", "args": []any{}, "options": map[string]any{"queue": "mail"}})
	cid := obj(r["job"])["id"].(string)
	cj := obj(c.must(200, "DELETE", "/ojs/v1/jobs/"+cid, nil)["job"])
	if cj["state"] != "cancelled" || cj["previous_state"] != "available" {
		t.Fatalf("cancel: %v", cj)
	}
	c.must(409, "DELETE", "/ojs/v1/jobs/"+cid, nil)
	if j := fetchOne(c, "mail"); j != nil {
		t.Fatalf("cancelled job fetched: %v", j)
	}
	if g := obj(c.must(200, "GET", "/ojs/v1/jobs/"+cid, nil)["job"]); g["state"] != "cancelled" {
		t.Fatalf("get: %v", g)
	}
	c.must(404, "GET", "/ojs/v1/jobs/019414d4-0000-7000-8000-000000000000", nil)

	// batch, all or nothing
	b := c.must(201, "POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{
		map[string]any{"type": "a.b", "args": []any{1}, "options": map[string]any{"queue": "batch"}},
		map[string]any{"type": "a.b", "args": []any{2}, "options": map[string]any{"queue": "batch"}},
	}})
	if b["count"] != float64(2) {
		t.Fatalf("batch: %v", b)
	}
	c.must(400, "POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{
		map[string]any{"type": "a.b", "args": []any{1}, "options": map[string]any{"queue": "batch"}},
		map[string]any{"type": "a.b", "args": "not an array"},
	}})
	st := c.must(200, "GET", "/ojs/v1/queues/batch/stats", nil)
	if obj(st["stats"])["available"] != float64(2) {
		t.Fatalf("stats: %v", st)
	}
	q := c.must(200, "GET", "/ojs/v1/queues", nil)
	names := ""
	for _, x := range list(q["queues"]) {
		names += obj(x)["name"].(string) + ","
	}
	if !strings.Contains(names, "batch,") || !strings.Contains(names, "mail,") {
		t.Fatalf("queues: %v", q)
	}
	// spec/README.md decision 7: a paused queue accepts enqueues.
	c.must(200, "POST", "/ojs/v1/queues/batch/pause", nil)
	if r := c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "a.b", "args": []any{}, "options": map[string]any{"queue": "batch"}}); r.status != 201 {
		t.Fatalf("enqueue to paused queue: %d %s", r.status, r.raw)
	}
	c.must(200, "POST", "/ojs/v1/queues/batch/resume", nil)

	// events of the session are listed
	ev := c.must(200, "GET", "/ojs/v1/events?type=job.completed", nil)
	if len(list(ev["events"])) < 4 {
		t.Fatalf("events: %v", ev)
	}
	// 400 names the field
	bad := c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "Bad Type", "args": []any{}})
	if bad.status != 400 || !strings.Contains(bad.raw, "type") {
		t.Fatalf("bad type: %d %s", bad.status, bad.raw)
	}
	m, err := http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Body.Close()
	text, _ := io.ReadAll(m.Body)
	if m.StatusCode != 200 || !strings.Contains(string(text), "ojs_job_completed_total") ||
		!strings.Contains(string(text), `ojs_queue_depth{queue="batch",state="available"} 3`) {
		t.Fatalf("metrics: %d %s", m.StatusCode, text)
	}
}

// The same server works against an external nats-server (--nats-url).
func TestExternalNATS(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	s := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	exerciseSession(t, client{t: t, base: s.URL()})
}

// Against a 3-node JetStream cluster with R3 streams and buckets.
func TestClusterR3(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	s := startApp(t, app.Config{NatsURL: cl.URLs(), Replicas: 3})
	exerciseSession(t, client{t: t, base: s.URL()})
}

// Restart: jobs enqueued, jetgate and its embedded server stopped hard,
// restarted on the same data dir: every job is still there in its state,
// and an active job comes back after its visibility timeout.
func TestRestartKeepsJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := startApp(t, app.Config{DataDir: dir})
	c := client{t: t, base: s1.URL()}
	var ids []string
	for i := range 5 {
		r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.x", "args": []any{i}, "options": map[string]any{"queue": "r"}})
		ids = append(ids, obj(r["job"])["id"].(string))
	}
	sched := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.x", "args": []any{}, "scheduled_at": time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano), "queue": "r2"})
	schedID := obj(sched["job"])["id"].(string)
	active := c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"r"}, "visibility_timeout_ms": 5000})
	activeID := obj(list(active["jobs"])[0])["id"].(string)
	s1.Kill()

	s2 := startApp(t, app.Config{DataDir: dir})
	c = client{t: t, base: s2.URL()}
	for _, id := range ids {
		j := obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
		want := "available"
		if id == activeID {
			want = "active"
		}
		if j["state"] != want {
			t.Fatalf("job %s after restart: state %v, want %s", id, j["state"], want)
		}
	}
	got := map[string]bool{}
	for range 4 {
		j := fetchOne(c, "r")
		if j == nil {
			t.Fatal("available jobs missing after restart")
		}
		got[j["id"].(string)] = true
	}
	back := waitFetch(c, 25*time.Second, "r")
	if back["id"] != activeID || back["attempt"] != float64(2) {
		t.Fatalf("active job after its visibility timeout: %v", back)
	}
	if j := waitFetch(c, 15*time.Second, "r2"); j["id"] != schedID {
		t.Fatalf("scheduled job after restart: %v", j)
	}
	_ = fmt.Sprint(got)
}
