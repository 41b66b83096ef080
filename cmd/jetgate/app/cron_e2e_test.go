package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// The cron endpoints over HTTP (ojs-http-binding.md 13): register in the
// binding's shape and in openapi.yaml's, 409 on a name in use (13.2), list
// with pagination (13.1), get, delete (13.3), and 400s that name the field
// (L2-CRON-001 expressions, L2-CRON-002 time zones, L2-CRON-003 overlap
// policy). The manifest declares cron_jobs.
func TestHTTPCron(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}

	if caps := obj(c.must(200, "GET", "/ojs/manifest", nil)["capabilities"]); caps["cron_jobs"] != true {
		t.Fatalf("manifest capabilities.cron_jobs = %v", caps["cron_jobs"])
	}

	if empty := c.must(200, "GET", "/ojs/v1/cron", nil); len(list(empty["cron_jobs"])) != 0 || empty["cron_jobs"] == nil {
		t.Fatalf("empty list: %v", empty)
	}

	daily := map[string]any{"name": "daily-report", "cron": "0 9 * * *", "timezone": "America/New_York",
		"type": "report.generate", "args": []any{"daily_summary"}, "meta": map[string]any{"owner": "analytics-team"},
		"options": map[string]any{"queue": "reports", "timeout_ms": 300000}}
	cj := obj(c.must(201, "POST", "/ojs/v1/cron", daily)["cron_job"])
	if cj["name"] != "daily-report" || cj["cron"] != "0 9 * * *" || cj["timezone"] != "America/New_York" ||
		cj["type"] != "report.generate" || cj["status"] != "active" || cj["overlap_policy"] != "skip" ||
		obj(cj["options"])["queue"] != "reports" || cj["created_at"] == nil {
		t.Fatalf("registered: %v", cj)
	}
	next, err := time.Parse(time.RFC3339, cj["next_run_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	if w := next.In(ny); w.Hour() != 9 || w.Minute() != 0 || !next.After(time.Now()) {
		t.Fatalf("next_run_at %s is not the next 09:00 in New York", w)
	}

	// 13.2: a name in use is 409.
	if r := c.do("POST", "/ojs/v1/cron", daily); r.status != 409 {
		t.Fatalf("duplicate name: %d %s", r.status, r.raw)
	}

	// openapi.yaml's shape: expression, overlap_policy, job_template.
	hourly := obj(c.must(201, "POST", "/ojs/v1/cron", map[string]any{"name": "hourly-cleanup", "expression": "@hourly",
		"overlap_policy": "allow", "job_template": map[string]any{"type": "maintenance.cleanup", "args": []any{map[string]any{"older_than_days": 30}}}})["cron_job"])
	if hourly["cron"] != "@hourly" || hourly["timezone"] != "UTC" || hourly["overlap_policy"] != "allow" || hourly["type"] != "maintenance.cleanup" {
		t.Fatalf("openapi shape: %v", hourly)
	}

	bad := []struct {
		field string
		body  map[string]any
	}{
		{"cron", map[string]any{"name": "b", "cron": "0 25 * * *", "type": "t", "args": []any{}}},
		{"cron", map[string]any{"name": "b", "cron": "every day", "type": "t", "args": []any{}}},
		{"cron", map[string]any{"name": "b", "type": "t", "args": []any{}}},
		{"timezone", map[string]any{"name": "b", "cron": "* * * * *", "timezone": "Nowhere/City", "type": "t", "args": []any{}}},
		{"overlap_policy", map[string]any{"name": "b", "cron": "* * * * *", "overlap_policy": "sometimes", "type": "t", "args": []any{}}},
		{"name", map[string]any{"cron": "* * * * *", "type": "t", "args": []any{}}},
		{"name", map[string]any{"name": "a/b", "cron": "* * * * *", "type": "t", "args": []any{}}},
		{"type", map[string]any{"name": "b", "cron": "* * * * *", "args": []any{}}},
		{"job_template.type", map[string]any{"name": "b", "cron": "* * * * *", "job_template": map[string]any{"args": []any{}}}},
		{"args", map[string]any{"name": "b", "cron": "* * * * *", "type": "t", "args": "not a list"}},
		{"cron, expression", map[string]any{"name": "b", "cron": "* * * * *", "expression": "0 * * * *", "type": "t", "args": []any{}}},
		// Issue 31: an expression sent as openapi.yaml's "expression" is
		// refused under that name, not as "cron".
		{"expression", map[string]any{"name": "b", "expression": "0 25 * * *", "type": "t", "args": []any{}}},
		{"expression", map[string]any{"name": "b", "expression": "every day", "job_template": map[string]any{"type": "t", "args": []any{}}}},
		{"expression", map[string]any{"name": "b", "expression": "0 0 30 2 *", "type": "t", "args": []any{}}},
	}
	for _, b := range bad {
		r := c.do("POST", "/ojs/v1/cron", b.body)
		details := obj(obj(r.body["error"])["details"])
		if r.status != 400 || !strings.Contains(r.raw, b.field) {
			t.Errorf("%v: %d %s, want 400 naming %q", b.body, r.status, r.raw, b.field)
		} else if details["field"] != nil && details["field"] != b.field {
			t.Errorf("%v: details.field %v, want %q", b.body, details["field"], b.field)
		}
	}

	// 13.1: the list, by name, paged.
	page := c.must(200, "GET", "/ojs/v1/cron", nil)
	jobs := list(page["cron_jobs"])
	if len(jobs) != 2 || obj(jobs[0])["name"] != "daily-report" || obj(jobs[1])["name"] != "hourly-cleanup" ||
		obj(page["pagination"])["total"] != float64(2) {
		t.Fatalf("list: %v", page)
	}
	page = c.must(200, "GET", "/ojs/v1/cron?limit=1&offset=1", nil)
	if jobs := list(page["cron_jobs"]); len(jobs) != 1 || obj(jobs[0])["name"] != "hourly-cleanup" || obj(page["pagination"])["has_more"] != false {
		t.Fatalf("second page: %v", page)
	}
	if got := obj(c.must(200, "GET", "/ojs/v1/cron/hourly-cleanup", nil)["cron_job"]); got["name"] != "hourly-cleanup" {
		t.Fatalf("get: %v", got)
	}
	c.must(404, "GET", "/ojs/v1/cron/nope", nil)

	// 13.3: delete, then it is gone.
	if d := c.must(200, "DELETE", "/ojs/v1/cron/daily-report", nil); d["deleted"] != true || d["name"] != "daily-report" {
		t.Fatalf("delete: %v", d)
	}
	c.must(404, "DELETE", "/ojs/v1/cron/daily-report", nil)
	c.must(404, "GET", "/ojs/v1/cron/daily-report", nil)
	if jobs := list(c.must(200, "GET", "/ojs/v1/cron", nil)["cron_jobs"]); len(jobs) != 1 {
		t.Fatalf("list after delete: %v", jobs)
	}
	// The name can be registered again.
	c.must(201, "POST", "/ojs/v1/cron", daily)
}
