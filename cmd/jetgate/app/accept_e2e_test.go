package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 16, "accept what clients send": behaviour that crosses the HTTP
// binding, admission and JetStream, tested through a listening jetgate.

// wantInvalid asserts a 400 invalid_request whose details name field and
// whose message contains rule.
func wantInvalid(t *testing.T, r resp, field, rule string) {
	t.Helper()
	e := obj(r.body["error"])
	if r.status != 400 || e["code"] != "invalid_request" {
		t.Fatalf("status %d, want 400 invalid_request: %s", r.status, r.raw)
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
		wantInvalid(t, r, "type", "[a-z][a-z0-9_-]*")
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
	wantInvalid(t, c.do("POST", "/ojs/v1/jobs", map[string]any{"id": upper, "type": "id.test", "args": []any{}}), "id", "lowercase UUIDv7")
	r := c.do("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"id": upper, "type": "id.test", "args": []any{}}}})
	wantInvalid(t, r, "jobs[0].id", "lowercase UUIDv7")
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
