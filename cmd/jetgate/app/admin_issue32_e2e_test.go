package app_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 32, "Admin API and dead letter" and the admin dashboards' calls:
// each answer is decoded into types shaped as an admin UI or the official
// clients read them (local structs, nothing of jetgate's), and the NATS
// binding is asked the same where it has the endpoint.

// uiJobDetail is GET /ojs/v1/admin/jobs/{id} as ojs-admin-api.md 7.2 shows it.
type uiJobDetail struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Queue       string `json:"queue"`
	State       string `json:"state"`
	Priority    int    `json:"priority"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	RetryPolicy *struct {
		MaxAttempts int `json:"max_attempts"`
	} `json:"retry_policy"`
	Errors []struct {
		Attempt    int    `json:"attempt"`
		Message    string `json:"message"`
		OccurredAt string `json:"occurred_at"`
	} `json:"errors"`
	Metadata struct {
		CreatedAt   *time.Time `json:"created_at"`
		EnqueuedAt  *time.Time `json:"enqueued_at"`
		StartedAt   *time.Time `json:"started_at"`
		ScheduledAt *time.Time `json:"scheduled_at"`
		CompletedAt *time.Time `json:"completed_at"`
		CancelledAt *time.Time `json:"cancelled_at"`
		DiscardedAt *time.Time `json:"discarded_at"`
	} `json:"metadata"`
}

// uiStats is GET /ojs/v1/admin/stats as ojs-admin-api.md 10.1 shows it and
// an admin dashboard's overview reads it.
type uiStats struct {
	Queues     int              `json:"queues"`
	Workers    int              `json:"workers"`
	Jobs       map[string]int64 `json:"jobs"`
	Throughput struct {
		ProcessedPerMinute float64 `json:"processed_per_minute"`
		FailedPerMinute    float64 `json:"failed_per_minute"`
	} `json:"throughput"`
	UptimeSeconds int64 `json:"uptime_seconds"`
}

// uiJobPage is GET /ojs/v1/admin/jobs as 7.1 shows it.
type uiJobPage struct {
	Items []struct {
		ID          string     `json:"id"`
		State       string     `json:"state"`
		Priority    int        `json:"priority"`
		ScheduledAt *time.Time `json:"scheduled_at"`
		CreatedAt   *time.Time `json:"created_at"`
	} `json:"items"`
	Pagination struct {
		Total      *int64 `json:"total"`
		Page       int    `json:"page"`
		PerPage    int    `json:"per_page"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	} `json:"pagination"`
}

func (p uiJobPage) ids() []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, it.ID)
	}
	return out
}

// uiPool is a pool as ojs-fair-scheduling.md 6.1 wraps it.
type uiPool struct {
	Pool struct {
		Name     string         `json:"name"`
		Strategy string         `json:"strategy"`
		Queues   []string       `json:"queues"`
		Weights  map[string]int `json:"weights"`
	} `json:"pool"`
}

// decodeAs decodes an answer into a UI type; a field of the wrong JSON
// type fails the test.
func decodeAs(t *testing.T, what string, r resp, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.raw), v); err != nil {
		t.Fatalf("%s: an admin UI cannot decode the answer into %T: %v\n%s", what, v, err, r.raw)
	}
}

// natsAsk sends req to the NATS binding's endpoint and returns the error
// code ("" on success) and the answer.
func natsAsk(t *testing.T, nc *nats.Conn, endpoint string, req any) (string, map[string]any) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := nc.Request("ojs.v1."+endpoint, b, 30*time.Second)
	if err != nil {
		t.Fatalf("nats %s: %v", endpoint, err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatalf("nats %s: answer is not a JSON object: %s", endpoint, res.Data)
	}
	return res.Header.Get(micro.ErrorCodeHeader), out
}

// sameOverNATS checks the NATS binding answers endpoint with the body the
// HTTP binding gave (ignore: fields that tell the time of the answer).
func sameOverNATS(t *testing.T, nc *nats.Conn, endpoint string, req any, http resp, ignore ...string) {
	t.Helper()
	code, got := natsAsk(t, nc, endpoint, req)
	if code != "" {
		t.Fatalf("nats %s: error %s: %v", endpoint, code, got)
	}
	want := http.body
	for _, k := range ignore {
		delete(got, k)
		delete(want, k)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("nats %s answers\n%v\nHTTP answered\n%v", endpoint, got, want)
	}
}

func nackJob(c client, id string) map[string]any {
	c.t.Helper()
	return c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id,
		"error": map[string]any{"code": "ConnectionError", "message": "refused", "retryable": true}})
}

// enqueueFetched enqueues a job into its own queue and fetches it: an
// active job.
func enqueueFetched(c client, queue string, opts map[string]any) string {
	c.t.Helper()
	o := map[string]any{"queue": queue}
	for k, v := range opts {
		o[k] = v
	}
	r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1}, "options": o})
	id := obj(r["job"])["id"].(string)
	if j := waitFetch(c, 10*time.Second, queue); j["id"] != id {
		c.t.Fatalf("fetched %v, want %s", j["id"], id)
	}
	return id
}

// Issue 32: GET /ojs/v1/admin/jobs/{id} finds every job GET
// /ojs/v1/jobs/{id} finds, available ones included (their ready message is
// their record), with the same envelope plus 7.2's metadata and
// retry_policy; the NATS binding's admin.job answers the same body.
func TestIssue32AdminJobDetailFindsEveryJob(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	nc, _ := connectApp(t, s)
	jobs := map[string]string{}
	r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1},
		"options": map[string]any{"queue": "d-available", "priority": 7}})
	jobs["available"] = obj(r["job"])["id"].(string)
	r = c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1},
		"options": map[string]any{"queue": "d-scheduled", "delay_until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	jobs["scheduled"] = obj(r["job"])["id"].(string)
	jobs["active"] = enqueueFetched(c, "d-active", nil)
	jobs["retryable"] = enqueueFetched(c, "d-retryable", map[string]any{"retry": map[string]any{"max_attempts": 3, "initial_interval_ms": 3_600_000, "max_interval_ms": 3_600_000}})
	nackJob(c, jobs["retryable"])
	jobs["completed"] = enqueueFetched(c, "d-completed", nil)
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": jobs["completed"], "result": map[string]any{}})
	jobs["discarded"] = enqueueFetched(c, "d-discarded", map[string]any{"retry": map[string]any{"max_attempts": 1}})
	nackJob(c, jobs["discarded"])
	r = c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{1}, "options": map[string]any{"queue": "d-cancelled"}})
	jobs["cancelled"] = obj(r["job"])["id"].(string)
	c.must(200, "DELETE", "/ojs/v1/jobs/"+jobs["cancelled"], nil)

	for state, id := range jobs {
		data := obj(c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
		if data["state"] != state {
			t.Fatalf("%s job %s: data plane says %v", state, id, data["state"])
		}
		ar := c.do("GET", "/ojs/v1/admin/jobs/"+id, nil)
		if ar.status != 200 {
			t.Fatalf("%s job %s: GET /ojs/v1/admin/jobs/{id} answered %d: %s", state, id, ar.status, ar.raw)
		}
		var d uiJobDetail
		decodeAs(t, "admin job "+state, ar, &d)
		if d.ID != id || d.State != state || d.Queue != data["queue"] || d.Attempt != int(data["attempt"].(float64)) {
			t.Fatalf("%s job: admin detail %+v, data plane %v", state, d, data)
		}
		if d.RetryPolicy == nil || d.RetryPolicy.MaxAttempts != d.MaxAttempts || d.Metadata.CreatedAt == nil {
			t.Fatalf("%s job: retry_policy or metadata missing: %s", state, ar.raw)
		}
		// The same envelope: every field the data plane shows, equal.
		for k, v := range data {
			if !reflect.DeepEqual(ar.body[k], v) {
				t.Fatalf("%s job: admin %s = %v, data plane %v", state, k, ar.body[k], v)
			}
		}
		sameOverNATS(t, nc, "admin.job", map[string]any{"id": id}, ar)
	}
	var d uiJobDetail
	decodeAs(t, "discarded", c.do("GET", "/ojs/v1/admin/jobs/"+jobs["discarded"], nil), &d)
	if len(d.Errors) != 1 || d.Errors[0].Attempt != 1 || d.Errors[0].Message != "refused" || d.Metadata.DiscardedAt == nil {
		t.Fatalf("discarded job detail: %+v", d)
	}
	decodeAs(t, "scheduled", c.do("GET", "/ojs/v1/admin/jobs/"+jobs["scheduled"], nil), &d)
	if d.Metadata.ScheduledAt == nil {
		t.Fatalf("scheduled job without metadata.scheduled_at: %+v", d)
	}
	unknown := "019503e1-7b2a-7000-8000-000000000009"
	if r := c.do("GET", "/ojs/v1/admin/jobs/"+unknown, nil); r.status != 404 {
		t.Fatalf("unknown job: %d %s", r.status, r.raw)
	}
	if code, _ := natsAsk(t, nc, "admin.job", map[string]any{"id": unknown}); code != "404" {
		t.Fatalf("nats admin.job of an unknown job: %q", code)
	}
}

// Issue 32 and ojs-dead-letter.md 6.1, ojs-admin-api.md 11.2: a job
// dead-lettered by retry {max_attempts: 1, on_exhaustion: "dead_letter"}
// and one nack is retried (200, attempts reset) and deleted (204) under
// /ojs/v1/admin/dead-letter/{id}; the Go client's /ojs/v1/dead-letter/{id}
// paths keep their answers, and so does the NATS binding.
func TestIssue32AdminDeadLetterRetryAndDelete(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	nc, _ := connectApp(t, s)
	deadRetry := map[string]any{"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}}
	kill := func(queue string) string {
		t.Helper()
		id := enqueueFetched(c, queue, deadRetry)
		if n := nackJob(c, id); n["state"] != "discarded" {
			t.Fatalf("nack of the last attempt: %v", n)
		}
		return id
	}
	type retried struct {
		Job struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		} `json:"job"`
	}

	// The admin paths.
	id := kill("dl-admin")
	r := c.do("POST", "/ojs/v1/admin/dead-letter/"+id+"/retry", nil)
	if r.status != 200 {
		t.Fatalf("admin dead letter retry: %d %s", r.status, r.raw)
	}
	var rt retried
	decodeAs(t, "admin retry", r, &rt)
	if rt.Job.ID != id || rt.Job.State != "available" || rt.Job.Attempt != 0 {
		t.Fatalf("admin retry: %+v", rt)
	}
	if j := waitFetch(c, 10*time.Second, "dl-admin"); j["id"] != id || j["attempt"] != float64(1) {
		t.Fatalf("retried job fetched: %v", j)
	}
	nackJob(c, id)
	r = c.do("DELETE", "/ojs/v1/admin/dead-letter/"+id, nil)
	if r.status != 204 || r.raw != "" {
		t.Fatalf("admin dead letter delete: %d %q, want 204 without a body", r.status, r.raw)
	}
	if r := c.do("GET", "/ojs/v1/jobs/"+id, nil); r.status != 404 {
		t.Fatalf("deleted dead letter job: %d", r.status)
	}
	for _, m := range []string{"POST", "DELETE"} {
		path := "/ojs/v1/admin/dead-letter/" + id
		if m == "POST" {
			path += "/retry"
		}
		if r := c.do(m, path, nil); r.status != 404 {
			t.Fatalf("%s %s of a deleted job: %d %s", m, path, r.status, r.raw)
		}
	}

	// The Go client's paths: 200 both.
	id = kill("dl-client")
	c.must(200, "POST", "/ojs/v1/dead-letter/"+id+"/retry", nil)
	waitFetch(c, 10*time.Second, "dl-client")
	nackJob(c, id)
	var del struct {
		Deleted bool   `json:"deleted"`
		JobID   string `json:"job_id"`
	}
	r = c.do("DELETE", "/ojs/v1/dead-letter/"+id, nil)
	if r.status != 200 {
		t.Fatalf("dead letter delete: %d %s", r.status, r.raw)
	}
	decodeAs(t, "delete", r, &del)
	if !del.Deleted || del.JobID != id {
		t.Fatalf("dead letter delete: %s", r.raw)
	}

	// The NATS binding: the same operations, the Go client's bodies.
	id = kill("dl-nats")
	if code, body := natsAsk(t, nc, "deadletter.retry", map[string]any{"id": id}); code != "" || obj(body["job"])["state"] != "available" || obj(body["job"])["attempt"] != float64(0) {
		t.Fatalf("nats deadletter.retry: %s %v", code, body)
	}
	waitFetch(c, 10*time.Second, "dl-nats")
	nackJob(c, id)
	if code, body := natsAsk(t, nc, "deadletter.delete", map[string]any{"id": id}); code != "" || body["deleted"] != true || body["job_id"] != id {
		t.Fatalf("nats deadletter.delete: %s %v", code, body)
	}
}

// Issue 32 and ojs-admin-api.md 10.1: GET /ojs/v1/admin/stats carries
// throughput.processed_per_minute (attempts ended in the last minute:
// completed plus failed) and failed_per_minute, counted from the activity
// samples, before and after this process flushes them (each job once),
// and the number of workers; the NATS binding's admin.stats answers the
// same.
func TestIssue32AdminStatsThroughput(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	nc, _ := connectApp(t, s)
	var st uiStats
	decodeAs(t, "stats", c.do("GET", "/ojs/v1/admin/stats", nil), &st)
	if st.Throughput.ProcessedPerMinute != 0 || st.Workers != 0 {
		t.Fatalf("stats before any job: %+v", st)
	}
	for range 3 {
		id := enqueueFetched(c, "tp", nil)
		c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id, "result": map[string]any{}})
	}
	nackJob(c, enqueueFetched(c, "tp", map[string]any{"retry": map[string]any{"max_attempts": 1}}))

	// Read over two seconds: the samples move from this process's memory
	// to OJS_STATS once a second, and every read counts each job once.
	until := time.Now().Add(2500 * time.Millisecond)
	for n := 0; n < 3 || time.Now().Before(until); n++ {
		r := c.do("GET", "/ojs/v1/admin/stats", nil)
		decodeAs(t, "stats", r, &st)
		if st.Throughput.ProcessedPerMinute != 4 || st.Throughput.FailedPerMinute != 1 {
			t.Fatalf("read %d: throughput %+v, want 4 processed and 1 failed per minute: %s", n, st.Throughput, r.raw)
		}
		if st.Workers != 1 || st.Jobs["completed"] != 3 || st.Jobs["discarded"] != 1 || st.Queues != 1 {
			t.Fatalf("read %d: stats %+v", n, st)
		}
		time.Sleep(250 * time.Millisecond)
	}
	sameOverNATS(t, nc, "admin.stats", map[string]any{}, c.do("GET", "/ojs/v1/admin/stats", nil), "computed_at", "uptime_seconds")
}

// Issue 32 and ojs-fair-scheduling.md 6.1, 10: a pool PUT as admin
// dashboards send it (queues as an object of queue to {weight}) is
// accepted and answered under "pool"; the array shapes are still
// accepted; scheduling stats are answered under "stats"; the NATS binding
// answers the same.
func TestIssue32PoolsAsDashboardsSendThem(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	nc, _ := connectApp(t, s)
	r := c.do("PUT", "/ojs/v1/admin/pools/mixed", map[string]any{"name": "mixed", "strategy": "weighted",
		"queues": json.RawMessage(`{"critical":{"weight":70},"bulk":{"weight":30},"misc":{}}`)})
	if r.status != 200 {
		t.Fatalf("PUT pool as dashboards send it: %d %s", r.status, r.raw)
	}
	var p uiPool
	decodeAs(t, "pool", r, &p)
	if p.Pool.Name != "mixed" || p.Pool.Strategy != "weighted" || !slices.Equal(p.Pool.Queues, []string{"critical", "bulk", "misc"}) ||
		!reflect.DeepEqual(p.Pool.Weights, map[string]int{"critical": 70, "bulk": 30, "misc": 1}) {
		t.Fatalf("pool answer: %s", r.raw)
	}
	// What was accepted before still is, and still answered at the top
	// level too.
	old := c.must(200, "PUT", "/ojs/v1/admin/pools/plain", map[string]any{"queues": []any{"a", map[string]any{"name": "b", "weight": 3}}})
	if old["name"] != "plain" || obj(old["pool"])["name"] != "plain" || obj(obj(old["pool"])["weights"])["b"] != float64(3) {
		t.Fatalf("array shape: %v", old)
	}
	for _, bad := range []struct{ queues, field string }{
		{`{"critical":{"weight":-1}}`, "queues.critical.weight"},
		{`{"critical":{"weight":70,"share":2}}`, "queues.critical.share"},
		{`{"critical":"much"}`, "queues.critical.weight"},
		{`{"Bad!":{"weight":1}}`, "queues[0]"},
		{`{}`, "queues"},
	} {
		wantField(t, c.do("PUT", "/ojs/v1/admin/pools/mixed", map[string]any{"queues": json.RawMessage(bad.queues)}), bad.field)
	}
	get := c.do("GET", "/ojs/v1/admin/pools/mixed", nil)
	decodeAs(t, "pool", get, &p)
	if p.Pool.Weights["critical"] != 70 {
		t.Fatalf("GET pool after refused PUTs: %s", get.raw)
	}
	sameOverNATS(t, nc, "pools.get", map[string]any{"pool": "mixed"}, get)
	if code, body := natsAsk(t, nc, "pools.set", map[string]any{"pool": "mixed", "strategy": "weighted",
		"queues": json.RawMessage(`{"critical":{"weight":60},"bulk":{"weight":40}}`)}); code != "" || obj(obj(body["pool"])["weights"])["critical"] != float64(60) {
		t.Fatalf("nats pools.set: %s %v", code, body)
	}

	enqueueFetched(c, "critical", nil)
	sr := c.do("GET", "/ojs/v1/admin/scheduling/stats", nil)
	var ss struct {
		Stats struct {
			Queues []struct {
				Name            string `json:"name"`
				DispatchCount1m int64  `json:"dispatch_count_1m"`
			} `json:"queues"`
			Window string `json:"window"`
		} `json:"stats"`
	}
	decodeAs(t, "scheduling stats", sr, &ss)
	if ss.Stats.Window != "PT1M" || len(ss.Stats.Queues) != 1 || ss.Stats.Queues[0].Name != "critical" || ss.Stats.Queues[0].DispatchCount1m != 1 {
		t.Fatalf("scheduling stats: %s", sr.raw)
	}
	if sr.body["window"] != "PT1M" {
		t.Fatalf("scheduling stats no longer at the top level: %s", sr.raw)
	}
	sameOverNATS(t, nc, "pools.stats", map[string]any{}, sr)
}

// Issue 32 and ojs-admin-api.md 7.1: the scheduled jobs page of an admin
// dashboard asks sort=scheduled_at&order=asc and gets the soonest first,
// with an exact total and pages in that order; priority and created_at
// orders too; a sort or order it cannot serve is 400 naming it; the NATS
// binding's admin.jobs answers the same.
func TestIssue32AdminJobsSorted(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	nc, _ := connectApp(t, s)
	now := time.Now().UTC()
	at := func(h int) string { return now.Add(time.Duration(h) * time.Hour).Format(time.RFC3339) }
	sched := map[int]string{}
	for _, h := range []int{3, 1, 4, 2} {
		r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{h},
			"options": map[string]any{"queue": "later", "delay_until": at(h)}})
		sched[h] = obj(r["job"])["id"].(string)
	}
	prio := map[int]string{}
	for _, p := range []int{5, 0, 9} {
		r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "report.build", "args": []any{p},
			"options": map[string]any{"queue": "now", "priority": p}})
		prio[p] = obj(r["job"])["id"].(string)
	}
	list := func(q string) (uiJobPage, resp) {
		t.Helper()
		r := c.do("GET", "/ojs/v1/admin/jobs?"+q, nil)
		if r.status != 200 {
			t.Fatalf("GET /ojs/v1/admin/jobs?%s: %d %s", q, r.status, r.raw)
		}
		var p uiJobPage
		decodeAs(t, q, r, &p)
		return p, r
	}

	q := "state=scheduled&sort=scheduled_at&order=asc"
	p, r := list(q)
	soonest := []string{sched[1], sched[2], sched[3], sched[4]}
	if !slices.Equal(p.ids(), soonest) || p.Pagination.Total == nil || *p.Pagination.Total != 4 {
		t.Fatalf("%s: %v (total %v), want %v", q, p.ids(), p.Pagination.Total, soonest)
	}
	sameOverNATS(t, nc, "admin.jobs", map[string]any{"state": "scheduled", "sort": "scheduled_at", "order": "asc"}, r)
	latest := slices.Clone(soonest)
	slices.Reverse(latest)
	if p, _ := list("state=scheduled&sort=scheduled_at&order=desc"); !slices.Equal(p.ids(), latest) {
		t.Fatalf("scheduled_at desc: %v, want %v", p.ids(), latest)
	}
	// Pages keep the order, by number and by cursor.
	p1, _ := list(q + "&per_page=3")
	p2, _ := list(q + "&per_page=3&page=2")
	p2c, _ := list(q + "&per_page=3&cursor=" + url.QueryEscape(p1.Pagination.NextCursor))
	if !p1.Pagination.HasMore || !slices.Equal(append(p1.ids(), p2.ids()...), soonest) || !slices.Equal(p2c.ids(), p2.ids()) || p2.Pagination.HasMore {
		t.Fatalf("pages: %v + %v (by cursor %v), want %v", p1.ids(), p2.ids(), p2c.ids(), soonest)
	}
	if p, _ := list("queue=now&sort=priority"); !slices.Equal(p.ids(), []string{prio[0], prio[5], prio[9]}) {
		t.Fatalf("priority asc: %v", p.ids())
	}
	// order=desc alone is 7.1's default sort, created_at: newest first.
	newest := []string{prio[9], prio[0], prio[5]}
	if p, _ := list("queue=now&state=available&order=desc"); !slices.Equal(p.ids(), newest) {
		t.Fatalf("created_at desc: %v, want %v", p.ids(), newest)
	}
	for _, b := range []struct{ q, field string }{
		{"sort=type", "sort"}, {"sort=scheduled_at&order=sideways", "order"},
		{"state=available&cursor=" + url.QueryEscape(p1.Pagination.NextCursor), "cursor"},
	} {
		wantField(t, c.do("GET", "/ojs/v1/admin/jobs?"+b.q, nil), b.field)
	}
	if code, body := natsAsk(t, nc, "admin.jobs", map[string]any{"sort": "type"}); code != "400" || obj(obj(body["error"])["details"])["field"] != "sort" {
		t.Fatalf("nats admin.jobs sort=type: %s %v", code, body)
	}
}
