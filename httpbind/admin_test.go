package httpbind

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// 11.1 and 17: queues are paged with limit and offset or cursor; has_more
// comes with a next_cursor.
func TestListQueues_11_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 5 {
		b.fake.queues = append(b.fake.queues, ojs.QueueInfo{Name: fmt.Sprintf("q%d", i), Status: ojs.QueueActive,
			CreatedAt: ojs.NewTime(testNow)})
	}
	r := b.do(t, http.MethodGet, "/ojs/v1/queues", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if qs := r.list(t, "queues"); len(qs) != 5 || qs[0].(map[string]any)["name"] != "q0" {
		t.Errorf("queues = %s", r.raw)
	}
	p := r.obj(t, "pagination")
	if p["total"] != float64(5) || p["limit"] != float64(50) || p["offset"] != float64(0) || p["has_more"] != false {
		t.Errorf("pagination = %v", p)
	}

	var names []string
	path := "/ojs/v1/queues?limit=2"
	for range 3 {
		r := b.do(t, http.MethodGet, path, "", nil).wantStatus(t, http.StatusOK)
		for _, q := range r.list(t, "queues") {
			names = append(names, q.(map[string]any)["name"].(string))
		}
		p := r.obj(t, "pagination")
		if p["has_more"] == false {
			break
		}
		cur, _ := p["next_cursor"].(string)
		if cur == "" {
			t.Fatalf("has_more without next_cursor: %v", p)
		}
		path = "/ojs/v1/queues?limit=2&cursor=" + url.QueryEscape(cur)
	}
	if !slices.Equal(names, []string{"q0", "q1", "q2", "q3", "q4"}) {
		t.Errorf("paged names = %v", names)
	}

	r = b.do(t, http.MethodGet, "/ojs/v1/queues?limit=1000&offset=4", "", nil).wantStatus(t, http.StatusOK)
	if p := r.obj(t, "pagination"); p["limit"] != float64(200) || len(r.list(t, "queues")) != 1 {
		t.Errorf("clamped page: %s", r.raw)
	}
	for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "offset=-1": "offset",
		"cursor=%21%21": "cursor"} {
		d := b.do(t, http.MethodGet, "/ojs/v1/queues?"+q, "", nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v", q, d)
		}
	}
}

// 11.2 queue stats; a queue name in the path that breaks the pattern is 400
// naming the field.
func TestQueueStats_11_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.stats = &ojs.QueueStats{Queue: "email", Status: ojs.QueueActive,
		Stats: ojs.QueueStatsCounts{Available: 3, ThroughputPerSecond: 2.5}, ComputedAt: ojs.NewTime(testNow)}
	r := b.do(t, http.MethodGet, "/ojs/v1/queues/email/stats", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["queue"] != "email" || r.obj(t, "stats")["available"] != float64(3) ||
		r.body["computed_at"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("stats = %s", r.raw)
	}
	if b.fake.queue != "email" {
		t.Errorf("backend got queue %q", b.fake.queue)
	}
	for _, name := range []string{"Email", "-x", "a%20b", strings.Repeat("a", 129)} {
		d := b.do(t, http.MethodGet, "/ojs/v1/queues/"+name+"/stats", "", nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != "name" {
			t.Errorf("%s: details = %v", name, d)
		}
	}
	b.fake.err = &ojs.NotFoundError{Resource: "queue", ID: "nope"}
	b.do(t, http.MethodGet, "/ojs/v1/queues/nope/stats", "", nil).wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
}

// 11.3, 11.4: {"queue","status","paused_at"} and {"queue","status","resumed_at"}.
func TestPauseResume_11_3(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, "/ojs/v1/queues/email/pause", "", sdkHeaders).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["queue"] != "email" || r.body["status"] != "paused" || r.body["paused_at"] == nil ||
		r.body["resumed_at"] != nil {
		t.Errorf("pause = %s", r.raw)
	}
	r = b.do(t, http.MethodPost, "/ojs/v1/queues/email/resume", "{}", nil).wantStatus(t, http.StatusOK)
	if r.body["queue"] != "email" || r.body["status"] != "active" || r.body["resumed_at"] == nil ||
		r.body["paused_at"] != nil {
		t.Errorf("resume = %s", r.raw)
	}
	if calls := b.fake.called(); !slices.Equal(calls, []string{"PauseQueue", "ResumeQueue"}) {
		t.Errorf("calls = %v", calls)
	}
}

// 12.1: filters and paging reach the backend; limit defaults to 50 and is
// lowered to 100; jobs are public.
func TestListDeadLetter_12_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.dlPage = &ojs.JobPage{Jobs: []*ojs.Job{newJob(ojs.StateDiscarded)},
		Pagination: ojs.Pagination{Total: 11, Limit: 10, HasMore: true, NextCursor: "c2"}}
	r := b.do(t, http.MethodGet, "/ojs/v1/dead-letter?queue=email&limit=10&cursor=c1", "", nil).
		wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	wantPublic(t, r)
	if len(r.list(t, "jobs")) != 1 || r.obj(t, "pagination")["next_cursor"] != "c2" {
		t.Errorf("page = %s", r.raw)
	}
	want := ojs.DeadLetterQuery{Queue: "email", Page: ojs.PageRequest{Limit: 10, Cursor: "c1"}}
	if b.fake.dlQuery != want {
		t.Errorf("query = %+v, want %+v", b.fake.dlQuery, want)
	}

	b.fake.dlPage = &ojs.JobPage{}
	r = b.do(t, http.MethodGet, "/ojs/v1/dead-letter?limit=500&offset=20", "", nil).wantStatus(t, http.StatusOK)
	if got := b.fake.dlQuery.Page; got.Limit != 100 || got.Offset != 20 {
		t.Errorf("page = %+v", got)
	}
	if jobs := r.list(t, "jobs"); len(jobs) != 0 {
		t.Errorf("jobs = %v", jobs)
	}
	b.do(t, http.MethodGet, "/ojs/v1/dead-letter", "", nil).wantStatus(t, http.StatusOK)
	if got := b.fake.dlQuery; got.Page.Limit != 50 || got.Queue != "" {
		t.Errorf("defaults = %+v", got)
	}
	d := b.do(t, http.MethodGet, "/ojs/v1/dead-letter?queue=A", "", nil).
		wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
	if d["field"] != "queue" {
		t.Errorf("details = %v", d)
	}
}

// 12.2, 12.3: retry answers {"job"}; delete {"deleted":true,"job_id"}; an
// unknown id is 404 dead_letter_job.
func TestDeadLetterRetryDelete_12_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.job = newJob(ojs.StateAvailable)
	id := b.fake.job.ID
	r := b.do(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", "", sdkHeaders).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	wantPublic(t, r)
	if job := r.obj(t, "job"); job["id"] != id || job["state"] != "available" {
		t.Errorf("retry = %s", r.raw)
	}
	r = b.do(t, http.MethodDelete, "/ojs/v1/dead-letter/"+id, "", nil).wantStatus(t, http.StatusOK)
	if r.body["deleted"] != true || r.body["job_id"] != id {
		t.Errorf("delete = %s", r.raw)
	}
	d := b.do(t, http.MethodDelete, "/ojs/v1/dead-letter/zzz", "", nil).
		wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
	if d["resource_type"] != "dead_letter_job" {
		t.Errorf("details = %v", d)
	}
}

// ojs-events.md 6.4: type filters (repeated or comma lists), limit, since.
func TestEvents_6_4(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.events = []ojs.Event{{SpecVersion: "1.0", ID: "evt_1", Type: "job.completed", Source: "jetgate",
		Time: ojs.Time{Time: testNow}, Data: []byte(`{"job_id":"x"}`)}}
	r := b.do(t, http.MethodGet,
		"/ojs/v1/events?type=job.completed&type=job.failed,job.completed&types=queue.paused&limit=5&since=2026-02-12T11:30:00%2B01:00",
		"", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if evs := r.list(t, "events"); len(evs) != 1 || evs[0].(map[string]any)["time"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("events = %s", r.raw)
	}
	q := b.fake.evQuery
	if !slices.Equal(q.Types, []string{"job.completed", "job.failed", "queue.paused"}) || q.Limit != 5 ||
		!q.Since.Equal(time.Date(2026, 2, 12, 10, 30, 0, 0, time.UTC)) {
		t.Errorf("query = %+v", q)
	}

	b.fake.events = nil
	r = b.do(t, http.MethodGet, "/ojs/v1/events?limit=5000", "", nil).wantStatus(t, http.StatusOK)
	if q := b.fake.evQuery; q.Limit != 1000 || q.Types != nil || !q.Since.IsZero() {
		t.Errorf("query = %+v", q)
	}
	if len(r.list(t, "events")) != 0 {
		t.Errorf("events = %s", r.raw)
	}
	for q, field := range map[string]string{"since=yesterday": "since", "limit=0": "limit", "type=Job%20Done": "type"} {
		d := b.do(t, http.MethodGet, "/ojs/v1/events?"+q, "", nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v", q, d)
		}
	}
	// ojs-events.md 6.4: queues and job_types are comma-separated lists,
	// repeated parameters add to them; 6.1: "job.*" and "*" are prefixes.
	b.do(t, http.MethodGet, "/ojs/v1/events?queues=a,b&queues=b&job_types=mail.send,%20x.y&types=job.*,*", "", nil).
		wantStatus(t, http.StatusOK)
	if q := b.fake.evQuery; !slices.Equal(q.Queues, []string{"a", "b"}) ||
		!slices.Equal(q.JobTypes, []string{"mail.send", "x.y"}) || !slices.Equal(q.Types, []string{"job.*", "*"}) {
		t.Errorf("query = %+v", q)
	}
	for q, field := range map[string]string{"queues=Bad": "queues", "job_types=A.B": "job_types", "types=job.**": "type"} {
		d := b.do(t, http.MethodGet, "/ojs/v1/events?"+q, "", nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v", q, d)
		}
	}
	d := b.do(t, http.MethodGet, "/ojs/v1/events?after=evt_1", "", nil).
		wantError(t, http.StatusUnprocessableEntity, ojs.CodeUnsupported, false)
	if d["parameter"] != "after" {
		t.Errorf("details = %v", d)
	}
}

// 8.1: 200 with the health body when ok, 503 with the same shape when the
// backend is unhealthy; a degraded (slow) backend still answers 200
// (ojs-observability.md 10.1). latency_ms is an integer.
func TestHealth_8_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ServerVersion: "1.2.3"})
	b.fake.health = ojs.Health{Status: "ok", UptimeSeconds: 60,
		Backend: ojs.HealthBackend{Type: "nats-jetstream", Status: ojs.BackendOK, LatencyMs: 2}}
	r := b.do(t, http.MethodGet, "/ojs/v1/health", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["status"] != "ok" || r.body["version"] != "1.2.3" || r.obj(t, "backend")["status"] != "ok" ||
		!strings.Contains(string(r.raw), `"latency_ms":2}`) {
		t.Errorf("health = %s", r.raw)
	}
	b.fake.health = ojs.Health{Status: "degraded", Backend: ojs.HealthBackend{Status: ojs.BackendDegraded, LatencyMs: 1500}}
	r = b.do(t, http.MethodGet, "/ojs/v1/health", "", nil).wantStatus(t, http.StatusOK)
	if r.body["status"] != "degraded" || r.obj(t, "backend")["status"] != "degraded" {
		t.Errorf("health = %s", r.raw)
	}
	b.fake.health = ojs.Health{Status: "degraded", Backend: ojs.HealthBackend{Status: ojs.BackendUnhealthy, Error: "no servers"}}
	r = b.do(t, http.MethodGet, "/ojs/v1/health", "", nil).wantStatus(t, http.StatusServiceUnavailable)
	wantHeaders(t, r)
	if r.body["status"] != "degraded" || r.obj(t, "backend")["error"] != "no servers" {
		t.Errorf("health = %s", r.raw)
	}
}

// ojs-http-binding.md 21 and ojs-conformance.md 4: the manifest's required
// fields; extensions are the configured URIs as strings.
func TestManifest_21(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{
		Extensions:       []string{"urn:ojs:ext:priority", "urn:ojs:ext:timeouts"},
		ConformanceLevel: 1, ServerVersion: "0.3.0",
		Capabilities:            map[string]bool{"unique_jobs": false, "x_bounded_queues": true},
		DefaultHeartbeatTimeout: 45 * time.Second,
	})
	r := b.do(t, http.MethodGet, "/ojs/manifest", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	impl := r.obj(t, "implementation")
	if r.body["ojs_version"] != "1.0" || r.body["specversion"] != "1.0" || impl["name"] != "jetgate" ||
		impl["version"] != "0.3.0" || impl["language"] != "go" || impl["backend"] != "nats-jetstream" ||
		r.body["backend"] != "nats-jetstream" || r.body["conformance_level"] != float64(1) ||
		r.body["conformance_tier"] != "runtime" {
		t.Errorf("manifest = %s", r.raw)
	}
	if p := r.list(t, "protocols"); len(p) != 1 || p[0] != "http" {
		t.Errorf("protocols = %v", p)
	}
	if e := r.list(t, "extensions"); len(e) != 2 || e[0] != "urn:ojs:ext:priority" {
		t.Errorf("extensions = %v", e)
	}
	c := r.obj(t, "capabilities")
	if c["priority_queues"] != true || c["rate_limiting"] != false || c["batch_enqueue"] != true ||
		c["unique_jobs"] != false || c["x_bounded_queues"] != true || c["cron_jobs"] != false {
		t.Errorf("capabilities = %v", c)
	}
	if d := r.obj(t, "defaults"); d["visibility_timeout_ms"] != float64(45000) {
		t.Errorf("defaults = %v", d)
	}
	// No extensions: still a list, never null.
	r = setup(t, Config{}).do(t, http.MethodGet, "/ojs/manifest", "", nil)
	if e := r.list(t, "extensions"); len(e) != 0 {
		t.Errorf("extensions = %v", e)
	}
}

// GET /metrics is served by Config.MetricsHandler, and only when set.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MetricsHandler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("ojs_jobs_enqueued 1\n"))
	})})
	resp, err := http.Get(b.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4" ||
		resp.Header.Get("OJS-Version") != "1.0" {
		t.Errorf("metrics: %d %v", resp.StatusCode, resp.Header)
	}
	setup(t, Config{}).do(t, http.MethodGet, "/metrics", "", nil).wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
}
