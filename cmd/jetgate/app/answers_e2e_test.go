package app_test

import (
	"math"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
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
