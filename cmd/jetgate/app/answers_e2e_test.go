package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// isInt reports whether a decoded JSON number is an integer, as the
// official Go SDK decodes it (a fraction fails its json.Unmarshal into int).
func isInt(v any) bool {
	f, ok := v.(float64)
	return ok && f == math.Trunc(f)
}

// ojs-http-binding.md 10.2/10.3 as the official clients read them: ack and
// nack answers carry "id" beside "job_id"; a nack that leaves the job
// retryable carries retry_delay_ms (integer ms until the retry is due); a
// successful ack clears the job's "error" and keeps its "errors" history.
func TestHTTPAckNackAnswers(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1},
		"options": map[string]any{"queue": "answers", "retry": map[string]any{"max_attempts": 3,
			"initial_interval_ms": 1500, "backoff_coefficient": 2, "max_interval_ms": 10000, "jitter": false}}})
	id := obj(r["job"])["id"].(string)
	if j := fetchOne(c, "answers"); j == nil || j["id"] != id {
		t.Fatalf("fetch: %v", j)
	}
	n := c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id,
		"error": map[string]any{"code": "handler_error", "message": "disk full", "retryable": true}})
	if n["id"] != id || n["job_id"] != id || n["state"] != "retryable" {
		t.Fatalf("nack answer: %v", n)
	}
	if d, ok := n["retry_delay_ms"].(float64); !ok || !isInt(d) || d <= 0 || d > 1500 {
		t.Fatalf("nack retry_delay_ms: %v", n)
	}
	if j := waitFetch(c, 15*time.Second, "answers"); j["id"] != id || j["attempt"] != float64(2) {
		t.Fatalf("retry: %v", j)
	}
	a := c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id, "result": map[string]any{"ok": true}})
	if a["id"] != id || a["job_id"] != id || a["state"] != "completed" {
		t.Fatalf("ack answer: %v", a)
	}
	j := obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
	if _, has := j["error"]; has {
		t.Fatalf("completed job keeps error: %v", j)
	}
	if errs := list(j["errors"]); len(errs) != 1 || obj(errs[0])["message"] != "disk full" {
		t.Fatalf("errors history: %v", j["errors"])
	}

	// A nack that discards the job has no retry delay.
	r = c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{2},
		"options": map[string]any{"queue": "answers", "retry": map[string]any{"max_attempts": 1}}})
	id = obj(r["job"])["id"].(string)
	if j := fetchOne(c, "answers"); j == nil || j["id"] != id {
		t.Fatalf("fetch: %v", j)
	}
	n = c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id, "error": map[string]any{"message": "no"}})
	if _, has := n["retry_delay_ms"]; has || n["id"] != id || n["state"] != "discarded" {
		t.Fatalf("discarding nack answer: %v", n)
	}
}

// spec/README.md decision 7 (ojs-admin-api, ojs-queue-config): pause stops
// delivery only. A paused queue accepts single and batch enqueues; the jobs
// wait as available and are fetched after resume. Pause and resume answers
// carry "paused".
func TestHTTPPauseStopsDeliveryOnly(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	p := c.must(200, "POST", "/ojs/v1/queues/held/pause", nil)
	if p["paused"] != true || p["status"] != "paused" || p["queue"] != "held" {
		t.Fatalf("pause answer: %v", p)
	}
	job := map[string]any{"type": "t.x", "args": []any{}, "options": map[string]any{"queue": "held"}}
	one := obj(c.must(201, "POST", "/ojs/v1/jobs", job)["job"])
	if one["state"] != "available" {
		t.Fatalf("enqueued to a paused queue: %v", one)
	}
	b := c.must(201, "POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{job, job}})
	if b["count"] != float64(2) {
		t.Fatalf("batch to a paused queue: %v", b)
	}
	if j := fetchOne(c, "held"); j != nil {
		t.Fatalf("fetched from a paused queue: %v", j)
	}
	if g := obj(c.must(200, "GET", "/ojs/v1/jobs/"+one["id"].(string), nil)["job"]); g["state"] != "available" {
		t.Fatalf("job of a paused queue: %v", g)
	}
	st := c.must(200, "GET", "/ojs/v1/queues/held/stats", nil)
	if st["status"] != "paused" || obj(st["stats"])["available"] != float64(3) {
		t.Fatalf("stats of a paused queue: %v", st)
	}
	rs := c.must(200, "POST", "/ojs/v1/queues/held/resume", nil)
	if rs["paused"] != false || rs["status"] != "active" {
		t.Fatalf("resume answer: %v", rs)
	}
	seen := map[any]bool{}
	for range 3 {
		seen[waitFetch(c, 10*time.Second, "held")["id"]] = true
	}
	if !seen[one["id"]] || len(seen) != 3 {
		t.Fatalf("fetched after resume: %v", seen)
	}
}

// wantErr asserts an error envelope over HTTP: status, code, and a hint
// that is one sentence containing each of mention.
func wantErr(t *testing.T, r resp, status int, code string, mention ...string) map[string]any {
	t.Helper()
	e := obj(r.body["error"])
	if r.status != status || e["code"] != code {
		t.Fatalf("status %d code %v, want %d %s: %s", r.status, e["code"], status, code, r.raw)
	}
	h, _ := e["hint"].(string)
	if h == "" || !strings.HasSuffix(h, ".") {
		t.Fatalf("hint %q is not a sentence: %s", h, r.raw)
	}
	for _, m := range mention {
		if !strings.Contains(h, m) {
			t.Fatalf("hint %q does not mention %q", h, m)
		}
	}
	return e
}

// ojs-errors.md 4.1, 4.4, 5.1 and ojs-backpressure.md 7 in the binding's
// envelope: malformed JSON and a bad envelope are 400 invalid_payload;
// other bad requests 400 invalid_request; a wrong-state transition 409
// conflict; a full queue 429 QUEUE_FULL with its headers; every envelope
// has a hint.
func TestHTTPErrorCodes(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{QueueMaxDepth: 1, QueueOverflow: "reject"})
	c := client{t: t, base: s.URL()}

	r := c.doRaw("POST", "/ojs/v1/jobs", `{"type": "a.b", "args": [}`, nil)
	wantErr(t, r, 400, "invalid_payload")
	r = c.do("POST", "/ojs/v1/jobs", map[string]any{"args": []any{}})
	wantErr(t, r, 400, "invalid_payload", "'type'")
	r = c.do("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"type": "a.b", "args": "x"}}})
	wantErr(t, r, 400, "invalid_payload", "'jobs[0].args'")
	r = c.do("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"q"}, "count": -1})
	wantErr(t, r, 400, "invalid_request", "'count'")
	r = c.do("GET", "/ojs/v1/events?limit=x", nil)
	wantErr(t, r, 400, "invalid_request", "'limit'")
	r = c.do("GET", "/ojs/v1/jobs/019414d4-0000-7000-8000-000000000000", nil)
	wantErr(t, r, 404, "not_found", "job id")

	job := map[string]any{"type": "t.x", "args": []any{}, "options": map[string]any{"queue": "errs"}}
	id := obj(c.must(201, "POST", "/ojs/v1/jobs", job)["job"])["id"].(string)
	// 429 QUEUE_FULL keeps Retry-After and the X-OJS-Queue-* headers.
	r = c.do("POST", "/ojs/v1/jobs", job)
	e := wantErr(t, r, 429, "QUEUE_FULL", "Retry-After", "errs")
	if e["retryable"] != true || e["queue"] != "errs" || e["bound"] != float64(1) || e["depth"] != float64(1) ||
		r.header.Get("Retry-After") == "" || r.header.Get("X-OJS-Queue-Depth") != "1" || r.header.Get("X-OJS-Queue-Bound") != "1" {
		t.Fatalf("queue full: %v %s", r.header, r.raw)
	}
	// 409 conflict: ack of a job that is not active; cancel of a finished job.
	r = c.do("POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id})
	e = wantErr(t, r, 409, "conflict", id, "active")
	if e["retryable"] != false || obj(e["details"])["current_state"] != "available" {
		t.Fatalf("ack of an available job: %s", r.raw)
	}
	if j := fetchOne(c, "errs"); j == nil || j["id"] != id {
		t.Fatalf("fetch: %v", j)
	}
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id})
	r = c.do("DELETE", "/ojs/v1/jobs/"+id, nil)
	wantErr(t, r, 409, "conflict", "completed")
}

// doRaw sends body as it is, with the given extra headers, and decodes the
// JSON answer.
func (c client) doRaw(method, path, body string, header map[string]string) resp {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		c.t.Fatalf("%s %s: body is not a JSON object: %s", method, path, raw)
	}
	return r
}

// ojs-http-binding.md 8.1 as the official Go SDK decodes it: backend.status
// is ok, degraded or unhealthy and backend.latency_ms an integer.
// GET /health (liveness) and GET /ready (readiness) answer JSON with
// "status" and echo the client's X-Request-ID; /ready answers 503 naming
// what is missing once one of jetgate's buckets or streams is deleted.
func TestHTTPHealthAndProbes(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	h := c.do("GET", "/ojs/v1/health", nil)
	if h.status != 200 || h.body["status"] != "ok" || obj(h.body["backend"])["status"] != "ok" ||
		!regexp.MustCompile(`"latency_ms":\d+[,}]`).MatchString(h.raw) {
		t.Fatalf("health: %d %s", h.status, h.raw)
	}
	probe := map[string]string{"X-Request-ID": "probe-7"}
	for _, path := range []string{"/health", "/ready"} {
		r := c.doRaw("GET", path, "", probe)
		if r.status != 200 || r.body["status"] != "ok" || r.header.Get("X-Request-Id") != "probe-7" {
			t.Fatalf("%s: %d %v %s", path, r.status, r.header, r.raw)
		}
	}

	_, js := natstest.ConnectURL(t, s.NatsURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := js.DeleteKeyValue(ctx, topology.GroupsBucket); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, topology.StatStream); err != nil {
		t.Fatal(err)
	}
	var r resp
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r = c.doRaw("GET", "/ready", "", probe); r.status != 200 {
			break
		}
	}
	missing := fmt.Sprint(r.body["missing"])
	if r.status != 503 || r.body["status"] != "unavailable" || r.header.Get("X-Request-Id") != "probe-7" ||
		!strings.Contains(missing, "KV_"+topology.GroupsBucket) || !strings.Contains(missing, topology.StatStream) ||
		!strings.Contains(r.body["reason"].(string), "KV_"+topology.GroupsBucket) {
		t.Fatalf("ready after deleting assets: %d %s", r.status, r.raw)
	}
	// Liveness does not depend on the backend's assets.
	if r := c.doRaw("GET", "/health", "", nil); r.status != 200 || r.body["status"] != "ok" {
		t.Fatalf("/health: %d %s", r.status, r.raw)
	}
}

// Queue stats keep the shape the official SDK decodes ({"queue", "status",
// "stats": {...}}); a bounded queue's stats add depth and bound
// (ojs-backpressure.md 3: the non-terminal jobs counted against the bound,
// and the bound); an unbounded queue's stats have neither.
func TestHTTPQueueStatsDepth(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	c.must(200, "PUT", "/ojs/v1/admin/queues/deep/config", map[string]any{"backpressure": map[string]any{"max_depth": 5}})
	for i := range 3 {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.x", "args": []any{i}, "options": map[string]any{"queue": "deep"}})
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.x", "args": []any{i}, "options": map[string]any{"queue": "flat"}})
	}
	if j := fetchOne(c, "deep"); j == nil {
		t.Fatal("nothing fetched")
	}
	// The claimed job gives its unit back (admission/doc.go): depth 2.
	var st, sts map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		st = c.must(200, "GET", "/ojs/v1/queues/deep/stats", nil)
		if sts = obj(st["stats"]); sts["depth"] == float64(2) {
			break
		}
	}
	if st["queue"] != "deep" || st["status"] != "active" || sts["available"] != float64(2) ||
		sts["depth"] != float64(2) || sts["bound"] != float64(5) || sts["queue"] != "deep" {
		t.Fatalf("bounded stats: %v", st)
	}
	st = c.must(200, "GET", "/ojs/v1/queues/flat/stats", nil)
	sts = obj(st["stats"])
	if _, has := sts["depth"]; has || sts["available"] != float64(3) || st["queue"] != "flat" {
		t.Fatalf("unbounded stats: %v", st)
	}
	if _, has := sts["bound"]; has {
		t.Fatalf("unbounded stats: %v", st)
	}
	if _, has := sts["queue"]; has {
		t.Fatalf("unbounded stats: %v", st)
	}
}

// pollEvents asks GET /ojs/v1/events with query until it answers want
// events (events are published without blocking the request that caused
// them) and returns them.
func pollEvents(c client, query string, want int) []map[string]any {
	c.t.Helper()
	var evs []any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if evs = list(c.must(200, "GET", "/ojs/v1/events?"+query, nil)["events"]); len(evs) >= want {
			break
		}
	}
	if len(evs) != want {
		c.t.Fatalf("events?%s: %d events, want %d: %v", query, len(evs), want, evs)
	}
	out := make([]map[string]any, len(evs))
	for i, e := range evs {
		out[i] = obj(e)
	}
	return out
}

// ojs-events.md 6.4: GET /ojs/v1/events filters by types, queues and
// job_types (comma-separated, combined) and limit; 4.1: job.enqueued data
// carries job_type and queue, job.completed data job_type, queue, attempt
// and duration_ms (integers). Pause and resume still emit queue.paused and
// queue.resumed. Issue 17: alike from the in-memory capture (the default,
// started by a first read before the jobs, as a dashboard would) and from
// the events stream (--events-stream, which keeps events with no read).
func TestHTTPEventFilters(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		cfg  app.Config
	}{{"capture", app.Config{}}, {"stream", app.Config{EventsStream: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			s := startApp(t, mode.cfg)
			c := client{t: t, base: s.URL()}
			if !mode.cfg.EventsStream {
				pollEvents(c, "", 0)
			}
			checkEventFilters(t, c)
		})
	}
}

func checkEventFilters(t *testing.T, c client) {
	enq := func(queue, typ string) string {
		r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": typ, "args": []any{}, "options": map[string]any{"queue": queue}})
		return obj(r["job"])["id"].(string)
	}
	done := enq("ev-a", "mail.send")
	enq("ev-a", "mail.send")
	enq("ev-b", "report.build")
	enq("ev-b", "report.build")
	enq("ev-c", "mail.send")
	if j := fetchOne(c, "ev-a"); j == nil || j["id"] != done {
		t.Fatalf("fetch: %v", j)
	}
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": done})
	c.must(200, "POST", "/ojs/v1/queues/ev-a/pause", nil)
	c.must(200, "POST", "/ojs/v1/queues/ev-a/resume", nil)

	ev := pollEvents(c, "types=job.completed", 1)[0]
	d := obj(ev["data"])
	if ev["subject"] != done || d["job_type"] != "mail.send" || d["queue"] != "ev-a" || d["attempt"] != float64(1) ||
		!isInt(d["duration_ms"]) || d["duration_ms"].(float64) < 0 {
		t.Fatalf("job.completed: %v", ev)
	}
	for _, e := range pollEvents(c, "types=job.enqueued", 5) {
		if d := obj(e["data"]); d["job_type"] == nil || d["queue"] == nil {
			t.Fatalf("job.enqueued: %v", e)
		}
	}
	for _, e := range pollEvents(c, "queues=ev-b", 2) {
		if e["type"] != "job.enqueued" || obj(e["data"])["queue"] != "ev-b" || obj(e["data"])["job_type"] != "report.build" {
			t.Fatalf("queues=ev-b: %v", e)
		}
	}
	for _, e := range pollEvents(c, "types=job.enqueued,job.completed&queues=ev-a,ev-c&job_types=mail.send&limit=3", 3) {
		q := obj(e["data"])["queue"]
		if (q != "ev-a" && q != "ev-c") || (e["type"] != "job.enqueued" && e["type"] != "job.completed") {
			t.Fatalf("combined filters: %v", e)
		}
	}
	pollEvents(c, "types=job.enqueued,job.completed&queues=ev-a,ev-c&job_types=mail.send", 4)
	pollEvents(c, "job_types=report.build&types=job.*", 2)
	qe := pollEvents(c, "types=queue.paused,queue.resumed&queues=ev-a", 2)
	if qe[0]["type"] != "queue.resumed" || qe[1]["type"] != "queue.paused" {
		t.Fatalf("queue events, newest first: %v", qe)
	}
	pollEvents(c, "queues=ev-z", 0)
	wantErr(t, c.do("GET", "/ojs/v1/events?queues=Bad_Queue", nil), 400, "invalid_request", "'queues'")
	wantErr(t, c.do("GET", "/ojs/v1/events?after=evt_1", nil), 422, "unsupported")
}
