package app_test

import (
	"strings"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// ojs-priority.md 8.2 over HTTP: a queue's aging is set (interval_ms or
// an ISO 8601 interval), read back in both units, removed; bad bodies are
// 400 envelopes naming the field and the rule.
func TestHTTPQueueAging_PRI8_2(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	const path = "/ojs/v1/admin/queues/agedh/aging"
	if r := c.do("GET", path, nil); r.status != 404 {
		t.Fatalf("aging of an unknown queue: %d %s", r.status, r.raw)
	}
	res := c.must(200, "PUT", path, map[string]any{"interval": "PT30S", "step": 2, "min_priority": 1})
	a := obj(res["aging"])
	if res["queue"] != "agedh" || a["interval_ms"] != 30000.0 || a["interval"] != "PT30S" || a["step"] != 2.0 || a["min_priority"] != 1.0 {
		t.Fatalf("PUT aging answered %v", res)
	}
	if got := obj(c.must(200, "GET", path, nil)["aging"]); got["interval_ms"] != 30000.0 {
		t.Fatalf("GET aging %v", got)
	}
	if a := obj(c.must(200, "PUT", path, map[string]any{"interval_ms": 60000})["aging"]); a["step"] != 1.0 || a["min_priority"] != 0.0 {
		t.Fatalf("defaults: %v", a)
	}
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{}, "interval_ms"},
		{map[string]any{"interval_ms": 0}, "interval_ms"},
		{map[string]any{"interval": "soon"}, "interval"},
		{map[string]any{"interval": "PT1S", "interval_ms": 2000}, "interval"},
		{map[string]any{"interval_ms": 1000, "step": 0}, "step"},
		{map[string]any{"interval_ms": 1000, "min_priority": -1}, "min_priority"},
		{map[string]any{"interval_ms": 1000, "rate": 3}, "rate"},
	} {
		r := c.do("PUT", path, bad.body)
		if r.status != 400 || !strings.Contains(r.raw, `"`+bad.field) || !strings.Contains(r.raw, "invalid_request") {
			t.Errorf("PUT %v: %d %s, want 400 naming %s", bad.body, r.status, r.raw, bad.field)
		}
	}
	if res := c.must(200, "DELETE", path, nil); res["aging"] != nil {
		t.Fatalf("DELETE aging answered %v", res)
	}
	if res := c.must(200, "GET", path, nil); res["aging"] != nil {
		t.Fatalf("aging after DELETE %v", res)
	}
}

// ojs-priority.md 7.3, PRI-R002 over HTTP: a worker group's default
// strategy is stored through the admin API and used by a fetch that
// names the group and gives no queues or strategy of its own; bad groups
// are 400 naming the field; a removed group is 404.
func TestHTTPWorkerGroups_PRIR002(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	const path = "/ojs/v1/admin/worker-groups/billing"
	g := c.must(200, "PUT", path, map[string]any{"strategy": "weighted",
		"queues": []any{map[string]any{"name": "inv-low", "weight": 0}, map[string]any{"name": "inv-high", "weight": 5}}})
	if g["name"] != "billing" || g["strategy"] != "weighted" || obj(g["weights"])["inv-high"] != 5.0 {
		t.Fatalf("PUT group answered %v", g)
	}
	if got := c.must(200, "GET", path, nil); got["strategy"] != "weighted" || len(list(got["queues"])) != 2 {
		t.Fatalf("GET group %v", got)
	}
	if gs := list(c.must(200, "GET", "/ojs/v1/admin/worker-groups", nil)["groups"]); len(gs) != 1 {
		t.Fatalf("group list %v", gs)
	}
	for _, q := range []string{"inv-low", "inv-high"} {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "g.http", "args": []any{}, "queue": q})
	}
	res := c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"group": "billing", "worker_id": "w"})
	if jobs := list(res["jobs"]); len(jobs) != 1 || obj(jobs[0])["queue"] != "inv-high" {
		t.Fatalf("fetch with the group (inv-low has weight 0): %v", res)
	}
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"queues": []any{"a"}}, "strategy"},
		{map[string]any{"strategy": "fifo", "queues": []any{"a"}}, "strategy"},
		{map[string]any{"strategy": "strict"}, "queues"},
		{map[string]any{"strategy": "strict", "queues": []any{"A!"}}, "queues[0]"},
		{map[string]any{"strategy": "weighted", "queues": []any{"a"}, "weights": map[string]any{"b": 2}}, "weights.b"},
		{map[string]any{"strategy": "weighted", "queues": []any{"a"}, "weights": map[string]any{"a": -1}}, "weights.a"},
	} {
		r := c.do("PUT", path, bad.body)
		if r.status != 400 || !strings.Contains(r.raw, `"`+bad.field) {
			t.Errorf("PUT %v: %d %s, want 400 naming %s", bad.body, r.status, r.raw, bad.field)
		}
	}
	if r := c.do("POST", "/ojs/v1/workers/fetch", map[string]any{"group": "No Such", "worker_id": "w"}); r.status != 400 || !strings.Contains(r.raw, `"group`) {
		t.Errorf("fetch with a bad group name: %d %s", r.status, r.raw)
	}
	c.must(200, "DELETE", path, nil)
	if r := c.do("POST", "/ojs/v1/workers/fetch", map[string]any{"group": "billing", "worker_id": "w"}); r.status != 404 {
		t.Errorf("fetch naming a removed group: %d %s", r.status, r.raw)
	}
	if r := c.do("DELETE", path, nil); r.status != 404 {
		t.Errorf("second DELETE: %d %s", r.status, r.raw)
	}
}

// ojs-priority.md (URI urn:ojs:ext:priority), spec/README.md decision 1:
// the manifest declares the priority extension, so clients know lower
// values run first, and its capability flag.
func TestManifestDeclaresPriority(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	man := c.must(200, "GET", "/ojs/manifest", nil)
	found := false
	for _, e := range list(man["extensions"]) {
		found = found || e == "urn:ojs:ext:priority"
	}
	if !found || obj(man["capabilities"])["priority_queues"] != true {
		t.Fatalf("manifest extensions %v, capabilities %v: want urn:ojs:ext:priority and priority_queues", man["extensions"], man["capabilities"])
	}
}
