package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Shapes of the official OJS clients' types (not jetgate's): the
// workflow the clients read, the Go client's cron job (under cron_job /
// cron_jobs, expression as cron) and the JS / Python clients' (under cron /
// crons, expression and job_template).

// clientWorkflowStates are the official clients' workflow states.
var clientWorkflowStates = map[string]bool{"pending": true, "running": true, "completed": true, "failed": true, "cancelled": true}

type clientWorkflow struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Type      string     `json:"type"`
	State     string     `json:"state"`
	CreatedAt *time.Time `json:"created_at"`
	Steps     []struct {
		ID    string  `json:"id"`
		Type  string  `json:"type"`
		State string  `json:"state"`
		JobID *string `json:"job_id"`
	} `json:"steps"`
}

type clientWorkflowAnswer struct {
	Workflow clientWorkflow `json:"workflow"`
}

type clientWorkflowList struct {
	Workflows  []clientWorkflow `json:"workflows"`
	Pagination struct {
		Page       int    `json:"page"`
		PerPage    int    `json:"per_page"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	} `json:"pagination"`
}

// goCronJob is the official Go client's cron job.
type goCronJob struct {
	Name          string         `json:"name"`
	Cron          string         `json:"cron"`
	Timezone      string         `json:"timezone"`
	OverlapPolicy string         `json:"overlap_policy"`
	Enabled       bool           `json:"enabled"`
	Type          string         `json:"type"`
	Args          []any          `json:"args"`
	Options       map[string]any `json:"options"`
	NextRunAt     *time.Time     `json:"next_run_at"`
	CreatedAt     *time.Time     `json:"created_at"`
}

// jsCronJob is the JS and Python clients' cron job.
type jsCronJob struct {
	Name          string `json:"name"`
	Expression    string `json:"expression"`
	Timezone      string `json:"timezone"`
	OverlapPolicy string `json:"overlap_policy"`
	Enabled       bool   `json:"enabled"`
	JobTemplate   struct {
		Type    string         `json:"type"`
		Args    []any          `json:"args"`
		Options map[string]any `json:"options"`
	} `json:"job_template"`
	NextRunAt *time.Time `json:"next_run_at"`
	CreatedAt *time.Time `json:"created_at"`
}

type cronAnswers struct {
	CronJob goCronJob `json:"cron_job"`
	Cron    jsCronJob `json:"cron"`
}

type cronListAnswers struct {
	CronJobs   []goCronJob `json:"cron_jobs"`
	Crons      []jsCronJob `json:"crons"`
	Pagination struct {
		Total   int  `json:"total"`
		Page    int  `json:"page"`
		PerPage int  `json:"per_page"`
		HasMore bool `json:"has_more"`
	} `json:"pagination"`
}

// wc is an HTTP client that decodes into client types and keeps the raw
// answer to compare with the NATS binding's.
type wc struct {
	t    *testing.T
	base string
	nc   *nats.Conn
}

func (c wc) call(status int, method, path string, in, out any) []byte {
	c.t.Helper()
	res, raw := ojsHTTP(c.t, nil, method, c.base+path, in)
	if res.StatusCode != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, raw, status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %s does not decode into the clients' type: %v", method, path, raw, err)
		}
	}
	return raw
}

// sameOverNATS asks the NATS binding's subject with body and checks it
// answers the same JSON as HTTP did (httpRaw), or the same error status.
func (c wc) sameOverNATS(subject string, body any, httpRaw []byte) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	res, err := c.nc.Request("ojs.v1."+subject, b, 30*time.Second)
	if err != nil {
		c.t.Fatalf("%s: %v", subject, err)
	}
	if code := res.Header.Get(micro.ErrorCodeHeader); code != "" {
		c.t.Fatalf("%s %s: error %s %s", subject, b, code, res.Data)
	}
	var h, n any
	if err := json.Unmarshal(httpRaw, &h); err != nil {
		c.t.Fatal(err)
	}
	if err := json.Unmarshal(res.Data, &n); err != nil {
		c.t.Fatal(err)
	}
	if !reflect.DeepEqual(h, n) {
		c.t.Fatalf("%s answers\n%s\nover NATS, HTTP answered\n%s", subject, res.Data, httpRaw)
	}
}

func newWC(t *testing.T) (wc, *app.Server) {
	s := startApp(t, app.Config{})
	nc, _ := connectApp(t, s)
	return wc{t: t, base: s.URL(), nc: nc}, s
}

// Issue 32 workflows: a running workflow answers "running", one of the
// clients' states, at create, on GET and over NATS (the same body); a
// record stored as "active" by an earlier jetgate reads as running.
func TestIssue32WorkflowRunningStateAsClientsRead(t *testing.T) {
	t.Parallel()
	c, s := newWC(t)
	body := map[string]any{"type": "chain", "name": "etl", "steps": []any{
		map[string]any{"name": "extract", "type": "etl.extract", "args": []any{}, "options": map[string]any{"queue": "wf32state"}},
		map[string]any{"name": "load", "type": "etl.load", "args": []any{}, "options": map[string]any{"queue": "wf32state"}}}}
	var created clientWorkflowAnswer
	c.call(201, "POST", "/ojs/v1/workflows", body, &created)
	w := created.Workflow
	if w.State != "running" || !clientWorkflowStates[w.State] || w.ID == "" || w.Type != "chain" || len(w.Steps) != 2 {
		t.Fatalf("created workflow %+v: want state running", w)
	}
	var got clientWorkflowAnswer
	raw := c.call(200, "GET", "/ojs/v1/workflows/"+w.ID, nil, &got)
	if got.Workflow.State != "running" {
		t.Fatalf("GET: state %q, want running", got.Workflow.State)
	}
	c.sameOverNATS("workflows.get", map[string]any{"id": w.ID}, raw)

	// A record written by jetgate before issue 32 says "active".
	_, js := connectApp(t, s)
	kv, err := js.KeyValue(context.Background(), topology.WorkflowsBucket)
	if err != nil {
		t.Fatal(err)
	}
	en, err := kv.Get(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Replace(en.Value(), []byte(`"state":"running"`), []byte(`"state":"active"`), 1)
	if bytes.Equal(old, en.Value()) {
		t.Fatalf("stored record does not say running: %s", en.Value())
	}
	if _, err := kv.Put(context.Background(), w.ID, old); err != nil {
		t.Fatal(err)
	}
	raw = c.call(200, "GET", "/ojs/v1/workflows/"+w.ID, nil, &got)
	if got.Workflow.State != "running" {
		t.Fatalf("a stored \"active\" answers %q, want running", got.Workflow.State)
	}
	c.sameOverNATS("workflows.get", map[string]any{"id": w.ID}, raw)

	// Cancelled is a client state too.
	c.call(200, "DELETE", "/ojs/v1/workflows/"+w.ID, nil, &got)
	if got.Workflow.State != "cancelled" {
		t.Fatalf("cancelled workflow: %q", got.Workflow.State)
	}
}

// Issue 32 "what OJS admin dashboards call": GET /ojs/v1/workflows?page&
// per_page[&state] lists workflows (405 before), paged, filtered by state
// (a bad state is 400 naming state), and the NATS binding answers the same.
func TestIssue32WorkflowListing(t *testing.T) {
	t.Parallel()
	c, _ := newWC(t)
	var ids []string
	for range 3 {
		var a clientWorkflowAnswer
		c.call(201, "POST", "/ojs/v1/workflows", map[string]any{"type": "group", "name": "fan", "jobs": []any{
			map[string]any{"name": "a", "type": "fan.a", "args": []any{}, "options": map[string]any{"queue": "wf32list"}}}}, &a)
		ids = append(ids, a.Workflow.ID)
	}
	c.call(200, "DELETE", "/ojs/v1/workflows/"+ids[0], nil, nil)

	var l clientWorkflowList
	raw := c.call(200, "GET", "/ojs/v1/workflows?page=1&per_page=2", nil, &l)
	if len(l.Workflows) != 2 || !l.Pagination.HasMore || l.Pagination.Page != 1 || l.Pagination.PerPage != 2 {
		t.Fatalf("page 1: %s", raw)
	}
	c.sameOverNATS("workflows.list", map[string]any{"page": 1, "per_page": 2}, raw)
	seen := map[string]bool{}
	for _, w := range l.Workflows {
		seen[w.ID] = true
	}
	raw = c.call(200, "GET", "/ojs/v1/workflows?page=2&per_page=2", nil, &l)
	if len(l.Workflows) != 1 || l.Pagination.HasMore || seen[l.Workflows[0].ID] {
		t.Fatalf("page 2: %s", raw)
	}
	for state, want := range map[string]int{"running": 2, "cancelled": 1, "completed": 0, "pending": 0} {
		raw = c.call(200, "GET", "/ojs/v1/workflows?state="+state, nil, &l)
		if len(l.Workflows) != want {
			t.Fatalf("state=%s: %s, want %d", state, raw, want)
		}
		for _, w := range l.Workflows {
			if w.State != state || !clientWorkflowStates[w.State] {
				t.Fatalf("state=%s lists %+v", state, w)
			}
		}
		c.sameOverNATS("workflows.list", map[string]any{"state": state}, raw)
	}
	var e sdkError
	c.call(400, "GET", "/ojs/v1/workflows?state=paused", nil, &e)
	if e.Error.Details["field"] != "state" {
		t.Fatalf("bad state: %+v, want 400 naming state", e)
	}
}

// Issue 32 cron: a registration in the clients' shape (name, expression or
// cron, timezone, overlap_policy, job_template) is answered under cron and
// cron_job with expression and cron, the timezone and overlap_policy as
// sent, enabled, next_run_at, created_at and the job template; lists
// under crons and cron_jobs. The admin UI's plural paths (GET
// /ojs/v1/crons?page&per_page, GET/PUT/DELETE /ojs/v1/crons/{name}) serve
// the same. The NATS binding answers the same bodies.
func TestIssue32CronAsClientsRead(t *testing.T) {
	t.Parallel()
	c, _ := newWC(t)
	var a cronAnswers
	c.call(201, "POST", "/ojs/v1/cron", map[string]any{"name": "nightly", "expression": "0 3 * * *",
		"timezone": "Europe/Paris", "overlap_policy": "skip",
		"job_template": map[string]any{"type": "db.vacuum", "args": []any{"main"}, "options": map[string]any{"queue": "maint"}}}, &a)
	g, j := a.CronJob, a.Cron
	if g.Name != "nightly" || g.Cron != "0 3 * * *" || g.Timezone != "Europe/Paris" || g.OverlapPolicy != "skip" ||
		!g.Enabled || g.Type != "db.vacuum" || g.NextRunAt == nil || g.CreatedAt == nil || g.Options["queue"] != "maint" {
		t.Fatalf("cron_job as the Go client reads it: %+v", g)
	}
	if j.Name != "nightly" || j.Expression != "0 3 * * *" || j.Timezone != "Europe/Paris" || j.OverlapPolicy != "skip" ||
		!j.Enabled || j.JobTemplate.Type != "db.vacuum" || len(j.JobTemplate.Args) != 1 || j.JobTemplate.Options["queue"] != "maint" ||
		j.NextRunAt == nil || j.CreatedAt == nil || !j.NextRunAt.Equal(*g.NextRunAt) {
		t.Fatalf("cron as the JS and Python clients read it: %+v", j)
	}
	if paris, _ := time.LoadLocation("Europe/Paris"); j.NextRunAt.In(paris).Hour() != 3 || !j.NextRunAt.After(time.Now()) {
		t.Fatalf("next_run_at %s is not the next 03:00 in Paris", j.NextRunAt)
	}
	createdAt := *j.CreatedAt // a is decoded into again below
	// cron is an alias of expression; a policy is answered as sent.
	a = cronAnswers{}
	c.call(201, "POST", "/ojs/v1/crons", map[string]any{"name": "hourly", "cron": "@hourly", "overlap_policy": "queue",
		"job_template": map[string]any{"type": "t.hourly", "args": []any{}}}, &a)
	if a.Cron.Expression != "@hourly" || a.CronJob.Cron != "@hourly" || a.Cron.OverlapPolicy != "queue" || a.Cron.Timezone != "UTC" {
		t.Fatalf("cron alias / policy as sent: %+v", a)
	}

	// Lists, singular and plural paths, paged.
	var l cronListAnswers
	raw := c.call(200, "GET", "/ojs/v1/cron", nil, &l)
	if len(l.CronJobs) != 2 || len(l.Crons) != 2 || l.Crons[0].Name != "hourly" || l.CronJobs[1].Name != "nightly" || l.Pagination.Total != 2 {
		t.Fatalf("list: %s", raw)
	}
	c.sameOverNATS("cron.list", map[string]any{}, raw)
	raw = c.call(200, "GET", "/ojs/v1/crons?page=2&per_page=1", nil, &l)
	if len(l.Crons) != 1 || l.Crons[0].Name != "nightly" || l.CronJobs[0].Name != "nightly" || l.Pagination.Page != 2 ||
		l.Pagination.PerPage != 1 || l.Pagination.HasMore {
		t.Fatalf("plural list page 2: %s", raw)
	}
	c.sameOverNATS("cron.list", map[string]any{"page": 2, "per_page": 1}, raw)

	// GET one, both paths, and over NATS.
	raw = c.call(200, "GET", "/ojs/v1/crons/nightly", nil, &a)
	if a.Cron.Expression != "0 3 * * *" || a.CronJob.Name != "nightly" {
		t.Fatalf("plural get: %s", raw)
	}
	if again := c.call(200, "GET", "/ojs/v1/cron/nightly", nil, nil); !bytes.Equal(again, raw) {
		t.Fatalf("singular get %s differs from plural %s", again, raw)
	}
	c.sameOverNATS("cron.get", map[string]any{"name": "nightly"}, raw)

	// PUT: disable (no next run), then change the expression and enable.
	a = cronAnswers{}
	raw = c.call(200, "PUT", "/ojs/v1/crons/nightly", map[string]any{"enabled": false}, &a)
	if a.Cron.Enabled || a.CronJob.Enabled || a.Cron.NextRunAt != nil || a.Cron.Expression != "0 3 * * *" ||
		a.Cron.JobTemplate.Type != "db.vacuum" || !a.Cron.CreatedAt.Equal(createdAt) {
		t.Fatalf("PUT enabled=false: %s", raw)
	}
	a = cronAnswers{}
	raw = c.call(200, "PUT", "/ojs/v1/crons/nightly", map[string]any{"enabled": true, "expression": "30 4 * * *"}, &a)
	if !a.Cron.Enabled || a.Cron.NextRunAt == nil || a.Cron.Expression != "30 4 * * *" || a.CronJob.Cron != "30 4 * * *" {
		t.Fatalf("PUT enabled=true, expression: %s", raw)
	}
	natsPut := c.call(200, "GET", "/ojs/v1/crons/nightly", nil, nil)
	c.sameOverNATS("cron.get", map[string]any{"name": "nightly"}, natsPut)
	// PUT of an unknown name registers it (201); a bad field is 400.
	c.call(201, "PUT", "/ojs/v1/crons/weekly", map[string]any{"expression": "@weekly",
		"job_template": map[string]any{"type": "t.weekly", "args": []any{}}}, &a)
	if a.Cron.Name != "weekly" || !a.Cron.Enabled {
		t.Fatalf("PUT create: %+v", a.Cron)
	}
	var e sdkError
	c.call(400, "PUT", "/ojs/v1/crons/weekly", map[string]any{"overlap_policy": "sometimes"}, &e)
	if e.Error.Details["field"] != "overlap_policy" {
		t.Fatalf("bad policy: %+v", e)
	}
	// Over NATS, PUT answers what HTTP's GET then reads.
	b, _ := json.Marshal(map[string]any{"name": "weekly", "enabled": false})
	res, err := c.nc.Request("ojs.v1.cron.put", b, 30*time.Second)
	if err != nil || res.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("cron.put over NATS: %v %v", err, res)
	}
	a = cronAnswers{}
	if after := c.call(200, "GET", "/ojs/v1/crons/weekly", nil, &a); a.Cron.Enabled || !jsonEqual(after, res.Data) {
		t.Fatalf("cron.put answered %s, GET reads %s", res.Data, after)
	}

	// DELETE on the plural path.
	c.call(200, "DELETE", "/ojs/v1/crons/hourly", nil, nil)
	c.call(404, "GET", "/ojs/v1/crons/hourly", nil, nil)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
