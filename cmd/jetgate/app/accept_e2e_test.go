package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// Issue 16, "accept what clients send": behaviour that crosses the HTTP
// binding, admission and JetStream, tested through a listening jetgate.

// wantInvalid asserts a 400 invalid_request whose details name field and
// whose message contains rule (a worker or progress body).
func wantInvalid(t *testing.T, r resp, field, rule string) {
	t.Helper()
	wantRefused(t, r, "invalid_request", field, rule)
}

// wantInvalidPayload asserts the 400 invalid_payload of a job envelope that
// fails validation (ojs-errors.md 4.1), naming field and stating rule.
func wantInvalidPayload(t *testing.T, r resp, field, rule string) {
	t.Helper()
	wantRefused(t, r, "invalid_payload", field, rule)
}

func wantRefused(t *testing.T, r resp, code, field, rule string) {
	t.Helper()
	e := obj(r.body["error"])
	if r.status != 400 || e["code"] != code {
		t.Fatalf("status %d, want 400 %s: %s", r.status, code, r.raw)
	}
	if d := obj(e["details"]); d["field"] != field {
		t.Errorf("details %v, want field %q: %s", d, field, r.raw)
	}
	if !strings.Contains(r.raw, rule) {
		t.Errorf("error does not state the rule %q: %s", rule, r.raw)
	}
}

// Job types whose segments hold hyphens and digits after the first letter
// are accepted end to end (ojs-core.md 5.1 widened to what clients send);
// empty segments, whitespace, '*', '>' and types over 255 characters stay
// 400 naming field type and the rule.
func TestHTTPJobTypeHyphens(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	for _, typ := range []string{"retry.test.exponential-backoff", "email.send-v2"} {
		j := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": typ, "args": []any{}, "options": map[string]any{"queue": "types"}})["job"])
		if j["type"] != typ {
			t.Fatalf("enqueued type %v, want %s", j["type"], typ)
		}
		got := waitFetch(c, 10*time.Second, "types")
		if got["type"] != typ || got["id"] != j["id"] {
			t.Fatalf("fetched %v, want %s of type %s", got, j["id"], typ)
		}
		c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": j["id"]})
	}
	for _, typ := range []string{"email..send", "email send", "email.*", "email.>", "email.-x", strings.Repeat("a", 256), ""} {
		r := c.do("POST", "/ojs/v1/jobs", map[string]any{"type": typ, "args": []any{}})
		wantInvalidPayload(t, r, "type", "[a-z][a-z0-9_-]*")
	}
}

// A fetch's count above the server's cap is served up to the cap, never
// refused (spec/README.md: an SDK asks for as many jobs as it has free
// handlers); --max-fetch-count sets the cap for the binding and admission.
func TestHTTPFetchCountAboveCap(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{MaxFetchCount: 3})
	c := client{t: t, base: s.URL()}
	for i := range 5 {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "cap.test", "args": []any{i}, "options": map[string]any{"queue": "cap"}})
	}
	got := list(c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"cap"}, "count": 5000, "worker_id": "w"})["jobs"])
	if len(got) != 3 {
		t.Fatalf("fetch count 5000 with cap 3 returned %d jobs, want 3", len(got))
	}
	wantInvalid(t, c.do("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"cap"}, "count": 0}), "count", "at least 1")
	wantInvalid(t, c.do("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"cap"}, "count": 2.5}), "count", "integer")

	// The default cap (1000) serves a count of 5000 too.
	d := startApp(t, app.Config{})
	dc := client{t: t, base: d.URL()}
	for i := range 2 {
		dc.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "cap.test", "args": []any{i}, "options": map[string]any{"queue": "cap"}})
	}
	if got := list(dc.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"cap"}, "count": 5000})["jobs"]); len(got) != 2 {
		t.Fatalf("fetch count 5000 returned %d jobs, want the 2 enqueued", len(got))
	}
}

// A client-supplied job id must be a lowercase UUIDv7 (ojs-core.md 5.1): an
// uppercase one is 400 naming id, not silently lowercased (the client would
// keep an id under which no job is found). A path id that is no job id still
// names no job: 404.
func TestHTTPUppercaseClientIDRefused(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	upper := "019539A4-B68C-7DEF-8000-1A2B3C4D5E6F"
	wantInvalidPayload(t, c.do("POST", "/ojs/v1/jobs", map[string]any{"id": upper, "type": "id.test", "args": []any{}}), "id", "lowercase UUIDv7")
	r := c.do("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"id": upper, "type": "id.test", "args": []any{}}}})
	wantInvalidPayload(t, r, "jobs[0].id", "lowercase UUIDv7")
	if r := c.do("GET", "/ojs/v1/jobs/"+upper, nil); r.status != 404 {
		t.Errorf("GET of an uppercase path id: %d, want 404: %s", r.status, r.raw)
	}
	if r := c.do("DELETE", "/ojs/v1/jobs/"+upper, nil); r.status != 404 {
		t.Errorf("DELETE of an uppercase path id: %d, want 404: %s", r.status, r.raw)
	}
	lower := strings.ToLower(upper)
	j := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"id": lower, "type": "id.test", "args": []any{}})["job"])
	if j["id"] != lower {
		t.Fatalf("lowercase client id came back as %v", j["id"])
	}
}

// scheduled_at, delay_until and expires_at are echoed exactly as the client
// gave them in every later rendering, also by another jetgate process that
// reads the record from JetStream (issue 16); "+<ISO 8601 duration>" is
// counted from now and shown as the absolute time it resolved to, in
// jetgate's format; a time in the past means now, it is not refused.
func TestHTTPTimestampsEchoedAsGiven(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	a := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	b := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	ca, cb := client{t: t, base: a.URL()}, client{t: t, base: b.URL()}

	far := obj(ca.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "time.test", "args": []any{},
		"options": map[string]any{"queue": "times", "delay_until": "2099-12-31T23:59:59Z", "expires_at": "2100-01-02T03:04:05+02:00"}})["job"])
	off := obj(ca.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "time.test", "args": []any{},
		"queue": "times", "scheduled_at": "2026-01-02T03:04:05+02:00"})["job"])
	for _, c := range []client{ca, cb} {
		j := obj(c.must(200, "GET", "/ojs/v1/jobs/"+far["id"].(string), nil)["job"])
		if j["scheduled_at"] != "2099-12-31T23:59:59Z" || j["expires_at"] != "2100-01-02T03:04:05+02:00" || j["state"] != "scheduled" {
			t.Errorf("GET via %s: scheduled_at %v, expires_at %v, state %v; want as given, scheduled", c.base, j["scheduled_at"], j["expires_at"], j["state"])
		}
	}
	if far["scheduled_at"] != "2099-12-31T23:59:59Z" {
		t.Errorf("enqueue response scheduled_at %v", far["scheduled_at"])
	}
	// A time in the past (2026-01-02 is before this test runs) means now:
	// the job is available at once, and still shows the time as given,
	// also when fetched by a worker of the other process.
	if off["state"] != "available" {
		t.Errorf("job scheduled in the past: state %v, want available", off["state"])
	}
	got := waitFetch(cb, 10*time.Second, "times")
	if got["id"] != off["id"] || got["scheduled_at"] != "2026-01-02T03:04:05+02:00" {
		t.Errorf("fetched %v, want %v with scheduled_at as given", got["id"], off["id"])
	}
	cb.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": off["id"]})
	done := obj(ca.must(200, "GET", "/ojs/v1/jobs/"+off["id"].(string), nil)["job"])
	if done["scheduled_at"] != "2026-01-02T03:04:05+02:00" || done["state"] != "completed" {
		t.Errorf("completed job: scheduled_at %v, state %v", done["scheduled_at"], done["state"])
	}
	// jetgate's own timestamps keep their format.
	if s, _ := done["created_at"].(string); len(s) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(s, "Z") {
		t.Errorf("created_at %q is not in jetgate's format", s)
	}

	// Relative: +PT1S is now + 1 s, shown as that absolute time.
	before := time.Now()
	rel := obj(ca.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "time.test", "args": []any{},
		"options": map[string]any{"queue": "relative", "delay_until": "+PT1S"}})["job"])
	at, err := time.Parse("2006-01-02T15:04:05.000Z", rel["scheduled_at"].(string))
	if err != nil || at.Before(before.Add(time.Second-time.Millisecond)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("+PT1S shown as %v (%v), want now + 1s in jetgate's format", rel["scheduled_at"], err)
	}
	if rel["state"] != "scheduled" {
		t.Errorf("+PT1S job state %v, want scheduled", rel["state"])
	}
	if j := obj(cb.must(200, "GET", "/ojs/v1/jobs/"+rel["id"].(string), nil)["job"]); j["scheduled_at"] != rel["scheduled_at"] {
		t.Errorf("other process shows scheduled_at %v, want %v", j["scheduled_at"], rel["scheduled_at"])
	}
	if j := waitFetch(cb, 15*time.Second, "relative"); j["id"] != rel["id"] {
		t.Errorf("fetched %v, want the +PT1S job", j["id"])
	}
}

// A progress update carries a message beside progress and data (what the
// SDKs send; issue 16): progress out of range is clamped, never refused
// (ojs-progress.md PRG-002), and GET .../progress returns progress, message
// and data, from another jetgate process too (the message is on the record).
func TestHTTPProgressMessage(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	a := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	b := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	ca, cb := client{t: t, base: a.URL()}, client{t: t, base: b.URL()}
	id := obj(ca.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{}, "queue": "msg"})["job"])["id"].(string)
	if p := ca.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); p["message"] != nil || p["progress"] != nil {
		t.Fatalf("progress before any report: %v", p)
	}
	waitFetch(ca, 10*time.Second, "msg")
	p := ca.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 1.7, "message": "rendering page 3 of 9",
		"data": map[string]any{"page": 3}})
	if p["progress"] != 1.0 || p["message"] != "rendering page 3 of 9" || obj(p["data"])["page"] != 3.0 {
		t.Fatalf("PUT progress 1.7 with message: %v", p)
	}
	for _, c := range []client{ca, cb} {
		g := c.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil)
		if g["progress"] != 1.0 || g["message"] != "rendering page 3 of 9" || obj(g["data"])["page"] != 3.0 || g["state"] != "active" {
			t.Errorf("GET progress via %s: %v", c.base, g)
		}
	}
	// An update without a message keeps the last one; -3 clamps to 0 and
	// progress never goes backwards (PRG-003), so it stays 1.
	cb.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": -3})
	if g := ca.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); g["message"] != "rendering page 3 of 9" || g["progress"] != 1.0 {
		t.Errorf("after an update without message: %v", g)
	}
	cb.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"message": "uploading"})
	ca.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id})
	if g := cb.must(200, "GET", "/ojs/v1/jobs/"+id+"/progress", nil); g["message"] != "uploading" || g["state"] != "completed" {
		t.Errorf("message after completion (8.3, kept with the record): %v", g)
	}
	wantInvalid(t, ca.do("PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 0.5, "message": 12}), "message", "a string")
}

// Rate limit shorthand (issue 16): {"rate": N, "period": "minute"} is a
// window of N per period and {"max_per_second": N} a throttle of N per
// second keyed by the queue when no key is given. A key named by an
// enqueued job can be inspected at once (ojs-rate-limiting.md 10.1): GET
// /ojs/v1/rate-limits/{key} answers 200 with its policy before the first
// start, from every jetgate process.
func TestHTTPRateLimitShorthandInspectableAtOnce(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	a := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	b := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	ca, cb := client{t: t, base: a.URL()}, client{t: t, base: b.URL()}
	cb.must(404, "GET", "/ojs/v1/rate-limits/tenant:acme", nil)

	// Scheduled far ahead: no start can happen during the test.
	later := map[string]any{"queue": "mail", "delay_until": "2099-01-01T00:00:00Z"}
	job := func(rl map[string]any) map[string]any {
		opts := map[string]any{"rate_limit": rl}
		for k, v := range later {
			opts[k] = v
		}
		return map[string]any{"type": "mail.send", "args": []any{}, "options": opts}
	}
	ca.must(201, "POST", "/ojs/v1/jobs", job(map[string]any{"key": "tenant:acme", "rate": 100, "period": "minute"}))
	for _, c := range []client{ca, cb} {
		st := c.must(200, "GET", "/ojs/v1/rate-limits/tenant:acme", nil)
		rate := obj(obj(st["policy"])["rate"])
		if st["key"] != "tenant:acme" || rate["limit"] != 100.0 || rate["period"] != "PT1M" {
			t.Fatalf("GET via %s before the first start: %v", c.base, st)
		}
	}
	// max_per_second without a key: a throttle keyed by the queue.
	cb.must(201, "POST", "/ojs/v1/jobs", job(map[string]any{"max_per_second": 5}))
	st := ca.must(200, "GET", "/ojs/v1/rate-limits/mail", nil)
	if th := obj(obj(st["policy"])["throttle"]); st["key"] != "mail" || th["limit"] != 5.0 || th["period"] != "PT1S" {
		t.Fatalf("max_per_second policy: %v", st)
	}
	// A stricter job from the other process tightens the stored policy.
	cb.must(201, "POST", "/ojs/v1/jobs", job(map[string]any{"key": "tenant:acme", "rate": 10, "period": "minute", "concurrency": 3}))
	st = ca.must(200, "GET", "/ojs/v1/rate-limits/tenant:acme", nil)
	if p := obj(st["policy"]); obj(p["rate"])["limit"] != 10.0 || p["concurrency"] != 3.0 {
		t.Fatalf("policy after a stricter job from another process: %v", st)
	}
	// Shorthand and full form setting the same limit: 400 naming both.
	r := ca.do("POST", "/ojs/v1/jobs", job(map[string]any{"max_per_second": 5, "throttle": map[string]any{"limit": 1, "period": "PT1S"}}))
	wantInvalidPayload(t, r, "options.rate_limit.max_per_second", "options.rate_limit.throttle")
	r = ca.do("POST", "/ojs/v1/jobs", job(map[string]any{"key": "k", "rate": 5}))
	wantInvalidPayload(t, r, "options.rate_limit.period", "minute")
}

// Shorthand limits hold like the full form (RL-002/RL-003): with
// max_per_second 2 on the queue, starts of its jobs are at least 500 ms
// apart.
func TestHTTPRateLimitMaxPerSecondThrottles(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	for i := range 3 {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "t.t", "args": []any{i},
			"options": map[string]any{"queue": "thr", "rate_limit": map[string]any{"max_per_second": 2}}})
	}
	var starts []time.Time
	deadline := time.Now().Add(20 * time.Second)
	for len(starts) < 3 && time.Now().Before(deadline) {
		if j := fetchOne(c, "thr"); j != nil {
			at, err := time.Parse(time.RFC3339Nano, j["started_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, at)
			c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": j["id"]})
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(starts) != 3 {
		t.Fatalf("%d of 3 throttled jobs started within 20s", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 490*time.Millisecond {
			t.Errorf("starts %d and %d are %v apart, want >= 500ms (throttle 2/s)", i-1, i, gap)
		}
	}
}
