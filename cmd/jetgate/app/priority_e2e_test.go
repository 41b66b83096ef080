package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// PATCH /ojs/v1/jobs/{id} over HTTP (ojs-priority.md 10.2, PRI-R001):
// 200 with the spec's shape, 409 naming the state for an active job, 400
// naming the field for a bad value or a field that cannot change.
func TestHTTPPatchPriority_PRIR001(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	job := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "p.http", "args": []any{}, "queue": "patchh", "priority": 4})["job"])
	id := job["id"].(string)
	res := c.must(200, "PATCH", "/ojs/v1/jobs/"+id, map[string]any{"priority": 0})
	if res["id"] != id || res["priority"] != 0.0 || res["previous_priority"] != 4.0 {
		t.Fatalf("PATCH answer %v", res)
	}
	for body, field := range map[string]string{`-1`: "priority", `1000`: "priority", `"high"`: "priority"} {
		r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"priority": rawJSON(body)})
		if r.status != 400 || !strings.Contains(r.raw, field) {
			t.Errorf("priority %s: %d %s", body, r.status, r.raw)
		}
	}
	if r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"priority": 1, "queue": "other"}); r.status != 400 || !strings.Contains(r.raw, "queue") {
		t.Errorf("changing the queue: %d %s", r.status, r.raw)
	}
	ps := c.must(200, "GET", "/ojs/v1/queues/patchh/priority-stats", nil)
	if ps["queue"] != "patchh" || obj(ps["counts_by_priority"])["0"] != 1.0 || ps["total"] != 1.0 {
		t.Fatalf("priority-stats %v", ps)
	}
	mres, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	for _, m := range []string{`ojs_job_priority_changes_total{queue="patchh"} 1`, `ojs_queue_available_by_priority{priority="0",queue="patchh"} 1`} {
		if !strings.Contains(string(text), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if got := fetchOne(c, "patchh"); got == nil || got["id"] != id || got["priority"] != 0.0 {
		t.Fatalf("fetch %v", got)
	}
	if r := c.do("PATCH", "/ojs/v1/jobs/"+id, map[string]any{"priority": 1}); r.status != 409 || !strings.Contains(r.raw, "active") {
		t.Errorf("active job: %d %s", r.status, r.raw)
	}
}

// rawJSON is a JSON value sent as written.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
