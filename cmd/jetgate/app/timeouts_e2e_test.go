package app_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// ojs-timeouts.md over HTTP: the timeout fields read back, the heartbeat
// answer names the job to cancel at its execution timeout, the job ends at
// the end of its grace period with the spec's error object, and the
// worker's late ack is a 409 that names the timeout.
func TestHTTPExecutionTimeout(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	c.must(200, "GET", "/ojs/v1/events", nil) // start the event capture (issue 17), as a dashboard would
	job := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.http", "args": []any{}, "queue": "to",
		"timeout_ms": 400, "grace_period_ms": 600, "total_timeout": 3600, "enqueue_ttl": 60, "heartbeat_timeout": 30,
		"retry": map[string]any{"max_attempts": 1}})["job"])
	id := job["id"].(string)
	if job["total_timeout"] != 3600.0 || job["enqueue_ttl"] != 60.0 || job["grace_period_ms"] != 600.0 ||
		job["heartbeat_timeout"] != 30.0 || job["timeout"] != 1.0 || job["timeout_ms"] != 400.0 {
		t.Fatalf("timeout fields of the enqueued job: %v", job)
	}
	if j := waitFetch(c, 10*time.Second, "to"); j["id"] != id {
		t.Fatalf("fetched %v", j)
	}
	time.Sleep(450 * time.Millisecond)
	hb := c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "py-worker-1", "active_jobs": []string{id}})
	if l := list(hb["jobs_to_cancel"]); len(l) != 1 || l[0] != id {
		t.Fatalf("heartbeat after the execution timeout: %v", hb)
	}
	deadline := time.Now().Add(15 * time.Second)
	var got map[string]any
	for time.Now().Before(deadline) {
		got = obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
		if got["state"] == "discarded" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e := obj(got["error"])
	if got["state"] != "discarded" || e["type"] != "timeout" || e["timeout_kind"] != "execution" ||
		e["limit_seconds"] != 1.0 || e["elapsed_seconds"].(float64) < 1 || !strings.Contains(e["message"].(string), "timeout") {
		t.Fatalf("timed out job: %v", got)
	}
	r := c.do("POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id})
	if r.status != 409 || !strings.Contains(r.raw, "execution timeout") {
		t.Fatalf("late ack: %d %s", r.status, r.raw)
	}
	// 11.1: job.timeout with the spec's data (events are published
	// asynchronously: poll).
	var data map[string]any
	for end := time.Now().Add(10 * time.Second); data == nil && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, ev := range list(c.must(200, "GET", "/ojs/v1/events?type=job.timeout", nil)["events"]) {
			if obj(ev)["subject"] == id {
				data = obj(obj(ev)["data"])
			}
		}
	}
	if data["job_id"] != id || data["job_type"] != "t.http" || data["queue"] != "to" || data["timeout_kind"] != "execution" ||
		data["limit_seconds"] != 1.0 || data["elapsed_seconds"].(float64) < 1 || data["attempt"] != 1.0 {
		t.Fatalf("job.timeout event data: %v", data)
	}
	for body, field := range map[string]string{
		`{"type":"a.b","args":[],"timeout":0}`:                       "timeout",
		`{"type":"a.b","args":[],"timeout":60,"total_timeout":30}`:   "total_timeout",
		`{"type":"a.b","args":[],"grace_period":-1}`:                 "grace_period",
		`{"type":"a.b","args":[],"heartbeat_timeout":0}`:             "heartbeat_timeout",
		`{"type":"a.b","args":[],"enqueue_ttl":"PT1M"}`:              "enqueue_ttl",
		`{"type":"a.b","args":[],"options":{"total_timeout_ms":-5}}`: "options.total_timeout_ms",
	} {
		r := c.do("POST", "/ojs/v1/jobs", rawJSON(body))
		if r.status != 400 || !strings.Contains(r.raw, `"`+field+`"`) {
			t.Errorf("%s: %d %s", body, r.status, r.raw)
		}
	}
	m := c.must(200, "GET", "/ojs/manifest", nil)
	if !strings.Contains(strings.Join(toStrings(list(m["extensions"])), " "), "urn:ojs:ext:timeouts") ||
		obj(m["defaults"])["timeout"] != 1800.0 || obj(m["defaults"])["heartbeat_timeout"] != 60.0 {
		t.Fatalf("manifest: %v", m)
	}
}

// PATCH /ojs/v1/jobs/{id} changes the timeouts of a waiting job (12.3):
// a shorter enqueue TTL discards it on its new deadline.
func TestHTTPPatchTimeouts(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	job := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.http", "args": []any{}, "queue": "patcht",
		"enqueue_ttl": 3600, "options": map[string]any{"pending": true}})["job"])
	id := job["id"].(string)
	if r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"timeout": 90, "priority": 1}); r.status != 409 ||
		!strings.Contains(r.raw, "pending") {
		t.Fatalf("priority of a pending job: %d %s", r.status, r.raw) // nothing changes, timeout included
	}
	if j := obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"]); j["timeout"] != nil {
		t.Fatalf("a refused PATCH changed the job: %v", j)
	}
	res := c.must(200, "PATCH", "/ojs/v1/jobs/"+id, map[string]any{"enqueue_ttl_ms": 300, "timeout": 90})
	if j := obj(res["job"]); j["enqueue_ttl_ms"] != 300.0 || j["enqueue_ttl"] != 1.0 || j["timeout"] != 90.0 || res["previous_priority"] != 2.0 {
		t.Fatalf("PATCH answer %v", res)
	}
	if r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"total_timeout": 10, "timeout": 60}); r.status != 400 ||
		!strings.Contains(r.raw, "total_timeout") {
		t.Fatalf("total shorter than timeout: %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
		if got["state"] == "discarded" {
			if e := obj(got["error"]); e["type"] != "enqueue_ttl_expired" || e["timeout_kind"] != "enqueue_ttl" {
				t.Fatalf("error %v", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending job with enqueue_ttl_ms 300 still %s", got["state"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"timeout": 10}); r.status != 409 || !strings.Contains(r.raw, "discarded") {
		t.Fatalf("PATCH of a discarded job: %d %s", r.status, r.raw)
	}
}

// ojs-progress.md over HTTP: PUT/GET (PRG-001..PRG-007), the SSE stream
// (PRG-R003), progress as heartbeat (PRG-008), checkpoint to the next
// attempt (PRG-R002, timeouts 9.3) and 1.0 on completion (PRG-005).
func TestHTTPProgress(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	job := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.http", "args": []any{}, "queue": "prog",
		"heartbeat_timeout_ms": 2500, "retry": map[string]any{"max_attempts": 3, "initial_interval_ms": 10, "jitter": false}})["job"])
	id := job["id"].(string)
	empty := c.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil)
	if empty["progress"] != nil || empty["data"] != nil || empty["state"] != "available" {
		t.Fatalf("progress before any report: %v", empty)
	}
	// PRG-007: ignored (200) while not active.
	c.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 0.5})
	if p := c.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); p["progress"] != nil {
		t.Fatalf("progress stored for an available job: %v", p)
	}
	waitFetch(c, 10*time.Second, "prog")

	stream, err := http.Get(s.URL() + "/ojs/v1/jobs/" + id + "/progress/stream")
	if err != nil || stream.StatusCode != 200 || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- ev
			}
		}
	}()

	// Progress every 500 ms keeps a job with a 2.5 s heartbeat timeout
	// alive for 4 s without a heartbeat (PRG-008).
	for i := range 8 {
		p := c.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": float64(i+1) / 10,
			"data": map[string]any{"rows": i}, "checkpoint": map[string]any{"offset": i}})
		if p["state"] != "active" {
			t.Fatalf("progress %d: %v", i, p)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// PRG-002 clamping, PRG-003 never backwards.
	c.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 0.2})
	r := c.do("GET", "/ojs/v1/jobs/"+id+"/progress", nil)
	if r.body["progress"] != 0.8 || r.header.Get("X-OJS-Progress") != "0.8" || r.header.Get("Cache-Control") != "no-cache" ||
		obj(r.body["data"])["rows"] != 7.0 {
		t.Fatalf("progress after going backwards: %v %v", r.body, r.header)
	}
	if bad := c.do("PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"checkpoint": map[string]any{}}); bad.status != 400 {
		t.Fatalf("update with neither progress nor data: %d %s", bad.status, bad.raw)
	}
	// A failed attempt keeps its progress (PRG-006); the next one starts
	// without it and with the last checkpoint.
	c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id, "error": map[string]any{"message": "x"}})
	if p := c.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); p["progress"] != 0.8 {
		t.Fatalf("progress after a failure: %v", p)
	}
	next := waitFetch(c, 10*time.Second, "prog")
	if next["id"] != id || next["attempt"] != 2.0 || obj(next["last_checkpoint"])["offset"] != 7.0 || next["progress"] != nil {
		t.Fatalf("retry attempt: %v", next)
	}
	c.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 3.0})
	if p := c.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); p["progress"] != 1.0 {
		t.Fatalf("progress 3.0 must clamp to 1.0: %v", p)
	}
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id})
	var seen []string
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-events:
			if !ok {
				done = true
				break
			}
			seen = append(seen, ev)
		case <-timeout:
			t.Fatalf("stream did not end after completion; events %v", seen)
		}
	}
	if len(seen) < 3 || seen[0] != "progress" || seen[len(seen)-1] != "completed" {
		t.Fatalf("stream events %v", seen)
	}
}

// Graceful shutdown does not wait for open progress streams: they end,
// in-flight requests finish, and the active job keeps its lease in
// JetStream (issue 7).
func TestShutdownEndsProgressStreams(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{ShutdownTimeout: 30 * time.Second})
	c := client{t: t, base: s.URL()}
	id := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.http", "args": []any{}, "queue": "sd"})["job"])["id"].(string)
	waitFetch(c, 10*time.Second, "sd")
	stream, err := http.Get(s.URL() + "/ojs/v1/jobs/" + id + "/progress/stream")
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("stream: %v", err)
	}
	defer stream.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open progress stream: %v", err)
	}
}
