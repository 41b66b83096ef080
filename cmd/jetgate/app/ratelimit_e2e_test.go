package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// The rate limiting extension over HTTP, as a client in another language
// uses it: jobs with rate_limit, the inspection, override and listing
// endpoints (RL-005, RL-R004, 10.3), queue-level limits (RL-R005),
// rate_limit_until on a nack (RL-R003), the events (RL-006), validation
// errors naming the field.
func TestHTTPRateLimits(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	c.must(200, "GET", "/ojs/v1/events", nil) // start the event capture (issue 17), as a dashboard would

	man := c.must(200, "GET", "/ojs/manifest", nil)
	found := false
	for _, e := range list(man["extensions"]) {
		found = found || e == "urn:ojs:ext:rate-limiting"
	}
	if !found {
		t.Fatalf("manifest extensions %v lack urn:ojs:ext:rate-limiting", man["extensions"])
	}

	// Validation names the field and the rule.
	r := c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "rl.http", "args": []any{}, "queue": "rlh",
		"rate_limit": map[string]any{"key": "bad key", "concurrency": 1}})
	if r.status != 400 || !strings.Contains(r.raw, "rate_limit.key") {
		t.Fatalf("bad key: %d %s", r.status, r.raw)
	}
	r = c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "rl.http", "args": []any{}, "queue": "rlh",
		"options": map[string]any{"rate_limit": map[string]any{"key": "k", "rate": map[string]any{"limit": 5, "period": "soon"}}}})
	if r.status != 400 || !strings.Contains(r.raw, "options.rate_limit.rate.period") {
		t.Fatalf("bad period: %d %s", r.status, r.raw)
	}

	// Concurrency 1 on tenant:acme: the second job waits, available.
	var ids []string
	for i := range 2 {
		b := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "rl.http", "args": []any{i}, "queue": "rlh",
			"rate_limit": map[string]any{"key": "tenant:acme", "concurrency": 1}})
		ids = append(ids, obj(b["job"])["id"].(string))
	}
	first := fetchOne(c, "rlh")
	if first == nil || first["id"] != ids[0] {
		t.Fatalf("first fetch %v", first)
	}
	if j := fetchOne(c, "rlh"); j != nil {
		t.Fatalf("RL-001: second job started: %v", j["id"])
	}
	if st := obj(c.must(200, "GET", "/ojs/v1/jobs/"+ids[1], nil)["job"])["state"]; st != "available" {
		t.Fatalf("RL-003: waiting job state %v", st)
	}
	st := c.must(200, "GET", "/ojs/v1/rate-limits/tenant:acme", nil)
	conc := obj(st["concurrency"])
	if st["key"] != "tenant:acme" || conc["limit"] != 1.0 || conc["active"] != 1.0 || conc["available"] != 0.0 || st["waiting_count"] != 1.0 {
		t.Fatalf("RL-005: status %v", st)
	}
	c.must(404, "GET", "/ojs/v1/rate-limits/never-used", nil)
	if r := c.do("GET", "/ojs/v1/rate-limits/bad*key", nil); r.status != 400 || !strings.Contains(r.raw, "key") {
		t.Fatalf("bad key in path: %d %s", r.status, r.raw)
	}

	// RL-R003: the handler hit a 429 downstream; the key is held.
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": first["id"], "error": map[string]any{
		"type": "RateLimitExceeded", "message": "partner said 429", "rate_limit_until": until}})
	st = c.must(200, "GET", "/ojs/v1/rate-limits/tenant:acme", nil)
	if got, _ := time.Parse(time.RFC3339, st["rate_limit_until"].(string)); got.Format(time.RFC3339) != until {
		t.Fatalf("RL-R003: rate_limit_until %v, want %s", st["rate_limit_until"], until)
	}
	if j := fetchOne(c, "rlh"); j != nil {
		t.Fatalf("RL-R003: %v started while the key is held", j["id"])
	}
	// An operator lifts it: reset forgets holds and the stored policy.
	c.must(200, "DELETE", "/ojs/v1/rate-limits/tenant:acme", nil)
	if j := waitFetch(c, 10*time.Second, "rlh"); j["id"] != ids[1] {
		t.Fatalf("after reset got %v, want the waiter %s", j["id"], ids[1])
	}

	// RL-R004: override to 0 until a time; validated.
	if r := c.do("PUT", "/ojs/v1/rate-limits/tenant:acme", map[string]any{"concurrency": -1}); r.status != 400 || !strings.Contains(r.raw, "concurrency") {
		t.Fatalf("negative override: %d %s", r.status, r.raw)
	}
	if r := c.do("PUT", "/ojs/v1/rate-limits/tenant:acme", map[string]any{"expires_at": until}); r.status != 400 {
		t.Fatalf("override without limits: %d %s", r.status, r.raw)
	}
	ov := c.must(200, "PUT", "/ojs/v1/rate-limits/tenant:acme", map[string]any{"concurrency": 0, "expires_at": until})
	if obj(ov["override"])["concurrency"] != 0.0 || obj(ov["concurrency"])["limit"] != 0.0 {
		t.Fatalf("override status %v", ov)
	}

	// RL-R005: a queue-level limit.
	if r := c.do("PUT", "/ojs/v1/admin/queues/rlq2/rate-limit", map[string]any{"concurency": 1}); r.status != 400 {
		t.Fatalf("typo in queue limit: %d %s", r.status, r.raw)
	}
	ql := c.must(200, "PUT", "/ojs/v1/admin/queues/rlq2/rate-limit", map[string]any{"concurrency": 1, "rate": map[string]any{"limit": 100, "period": "PT1H"}})
	if ql["scope"] != "queue" || obj(ql["concurrency"])["limit"] != 1.0 || obj(ql["rate"])["limit"] != 100.0 {
		t.Fatalf("queue limit %v", ql)
	}
	for i := range 2 {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "rl.http", "args": []any{i}, "queue": "rlq2"})
	}
	a := fetchOne(c, "rlq2")
	if a == nil || fetchOne(c, "rlq2") != nil {
		t.Fatal("RL-R005: queue concurrency 1 not enforced")
	}
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": a["id"]})
	waitFetch(c, 10*time.Second, "rlq2")
	c.must(200, "DELETE", "/ojs/v1/admin/queues/rlq2/rate-limit", nil)
	c.must(404, "GET", "/ojs/v1/admin/queues/rlq2/rate-limit", nil)

	// 10.3: the listing, paged.
	page := c.must(200, "GET", "/ojs/v1/rate-limits?per_page=1&page=1", nil)
	pg := obj(page["pagination"])
	if len(list(page["items"])) != 1 || pg["total"].(float64) < 2 || pg["per_page"] != 1.0 || pg["page"] != 1.0 {
		t.Fatalf("listing %v", page)
	}

	// 11.2: the metrics.
	res, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, m := range []string{`ojs_rate_limit_exceeded_total{key="tenant:acme",strategy="concurrency"`, `ojs_rate_limit_active{key="tenant:acme"`,
		`ojs_rate_limit_waiting{key="tenant:acme"`} {
		if !strings.Contains(string(metricsText), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// RL-006: the events are on the events endpoint.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := c.must(200, "GET", "/ojs/v1/events?type=rate_limit.exceeded,rate_limit.released,rate_limit.dynamic_adjusted", nil)
		seen := map[string]bool{}
		for _, e := range list(ev["events"]) {
			seen[obj(e)["type"].(string)] = true
		}
		if seen["rate_limit.exceeded"] && seen["rate_limit.released"] && seen["rate_limit.dynamic_adjusted"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RL-006: events seen %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
