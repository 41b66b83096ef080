package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// DecodeCron reads a cron registration in the binding's shape (13.2:
// name, cron, timezone, type, args, meta, options) or openapi.yaml's and
// the clients' (expression, overlap_policy, job_template {type, args,
// meta, options}); overlap_policy and enabled are read in both.
func DecodeCron(o Object) (ojs.CronJob, error) {
	var cj ojs.CronJob
	var err error
	if cj.Name, err = o.Str("name", true); err != nil {
		return cj, err
	}
	if cj.Cron, cj.CronField, err = cronExpression(o); err != nil {
		return cj, err
	}
	if cj.Timezone, err = o.Str("timezone", false); err != nil {
		return cj, err
	}
	if cj.OverlapPolicy, err = o.Str("overlap_policy", false); err != nil {
		return cj, err
	}
	if cj.Enabled, err = o.Boolean("enabled"); err != nil {
		return cj, err
	}
	tpl, prefix := o, ""
	if raw, ok := o.Get("job_template"); ok {
		if _, top := o.Get("type"); top {
			return cj, Invalid("job_template", "given alone: the job is either top-level (type, args, meta, options) or in job_template", "both")
		}
		if tpl, err = ParseObject(raw); err != nil {
			return cj, Invalid("job_template", "an Object {type, args, meta, options}", Describe(raw))
		}
		prefix = "job_template."
	}
	if cj.Type, err = tpl.Str("type", true); err != nil {
		return cj, renamed(err, prefix+"type")
	}
	cj.Args, _ = tpl.Get("args")
	cj.Meta, _ = tpl.Get("meta")
	cj.Options, _ = tpl.Get("options")
	return cj, nil
}

// cronExpression reads cron (the binding) or expression (openapi.yaml),
// and says which of the two the client sent, so that an expression the
// scheduler refuses is reported under that name.
func cronExpression(o Object) (expr, field string, err error) {
	c, err := o.Str("cron", false)
	if err != nil {
		return "", "", err
	}
	e, err := o.Str("expression", false)
	if err != nil {
		return "", "", err
	}
	switch {
	case c != "" && e != "" && c != e:
		return "", "", Invalid("cron, expression", "one expression: cron and expression name the same setting", Short(c)+" / "+Short(e))
	case c != "":
		return c, "cron", nil
	case e != "":
		return e, "expression", nil
	}
	return "", "", Invalid("cron", "a 5-field cron expression or a shorthand such as @daily (required)", "nothing")
}

func renamed(err error, field string) error {
	if ve, ok := err.(*ojs.ValidationError); ok {
		c := *ve
		c.Field = field
		return &c
	}
	return err
}

// DecodePool reads the body of a PUT of pool name.
func DecodePool(name string, o Object) (ojs.WorkerGroup, error) {
	g := ojs.WorkerGroup{Name: name}
	if err := OnlyFields(o, "name", "queues", "concurrency", "strategy", "weights"); err != nil {
		return g, err
	}
	if n, err := o.Str("name", false); err != nil {
		return g, err
	} else if n != "" && n != name {
		return g, Invalid("name", "the pool name of the path ("+name+") when given", strconv.Quote(Short(n)))
	}
	strategy, err := o.Str("strategy", false)
	if err != nil {
		return g, err
	}
	queues, weights, err := groupQueues(o)
	if err != nil {
		return g, err
	}
	conc, err := o.Integer("concurrency", 0, 1, 1<<31-1)
	if err != nil {
		return g, err
	}
	if strategy == "" {
		strategy = ojs.StrategyRoundRobin
	}
	g.Strategy, g.Queues, g.Weights, g.Concurrency = strategy, queues, weights, int(conc)
	return g, g.Validate()
}

// DecodeAging reads an aging Object. The interval is given once, as
// interval_ms or as an ISO 8601 interval; both with different values is
// refused naming both (spec/README.md decision 2).
func DecodeAging(o Object) (*ojs.Aging, error) {
	if err := OnlyFields(o, "interval_ms", "interval", "step", "min_priority"); err != nil {
		return nil, err
	}
	maxMs := ojs.MaxAgingInterval.Milliseconds()
	ms, err := o.Integer("interval_ms", 0, 1, maxMs)
	if err != nil {
		return nil, err
	}
	iso, err := o.Str("interval", false)
	if err != nil {
		return nil, err
	}
	a := ojs.Aging{Interval: time.Duration(ms) * time.Millisecond}
	if iso != "" {
		d, err := ojs.ParseISODuration(iso)
		if err != nil || d < ojs.MinAgingInterval || d > ojs.MaxAgingInterval {
			return nil, Invalid("interval", "an ISO 8601 duration from PT0.001S to P30D", strconv.Quote(Short(iso)))
		}
		if ms != 0 && d != a.Interval {
			return nil, &ojs.ValidationError{Field: "interval", Rule: "the same interval as interval_ms",
				Message: fmt.Sprintf("interval %q and interval_ms %d give different intervals: give one", iso, ms)}
		}
		a.Interval = d
	}
	if a.Interval == 0 {
		return nil, Invalid("interval_ms", "an integer of milliseconds (or interval, an ISO 8601 duration)", "nothing")
	}
	step, err := o.Integer("step", ojs.DefaultAgingStep, 1, ojs.MaxPriority)
	if err != nil {
		return nil, err
	}
	minPrio, err := o.Integer("min_priority", 0, 0, ojs.MaxPriority)
	if err != nil {
		return nil, err
	}
	a.Step, a.MinPriority = int(step), int(minPrio)
	return &a, a.Validate("")
}

// DecodeGroup reads the body of a PUT of group name.
func DecodeGroup(name string, o Object) (ojs.WorkerGroup, error) {
	g := ojs.WorkerGroup{Name: name}
	if err := OnlyFields(o, "strategy", "queues", "weights"); err != nil {
		return g, err
	}
	strategy, err := o.Str("strategy", true)
	if err != nil {
		return g, err
	}
	queues, weights, err := groupQueues(o)
	if err != nil {
		return g, err
	}
	g.Strategy, g.Queues, g.Weights = strategy, queues, weights
	return g, g.Validate()
}

// groupQueues reads the queues of a worker group or pool body: "queues"
// (names, or {name, weight} objects; not empty) and "weights"
// ({queue: weight}, for listed queues).
func groupQueues(o Object) ([]string, map[string]int, error) {
	var queues []string
	var weights map[string]int
	var err error
	if raw, ok := o.Get("queues"); ok && len(raw) > 0 && raw[0] == '{' {
		queues, weights, err = queueWeightObject(raw)
	} else {
		queues, weights, err = FetchQueues(o)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(queues) == 0 {
		return nil, nil, Invalid("queues", "a non-empty array of queue names or of {name, weight} objects", Describe(o["queues"]))
	}
	for i, q := range queues {
		if err := CheckQueueName(fmt.Sprintf("queues[%d]", i), q); err != nil {
			return nil, nil, err
		}
	}
	if raw, ok := o.Get("weights"); ok {
		if weights, err = WeightsObject(raw, weights); err != nil {
			return nil, nil, err
		}
	}
	return queues, weights, nil
}

// queueWeightObject reads "queues" given as an object of queue name to
// {"weight": n} (or to the weight itself), the shape admin dashboards send
// (issue 32): {"queues": {"critical": {"weight": 70}, "bulk": {"weight":
// 30}}}. The queues keep the order of the body, which strict consumption
// follows; a name given twice is refused.
func queueWeightObject(raw json.RawMessage) ([]string, map[string]int, error) {
	const rule = "an array of queue names or of {name, weight} objects, or an object of queue name to {weight}"
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, Invalid("queues", rule, Describe(raw))
	}
	var names []string
	weights := map[string]int{}
	for dec.More() {
		t, err := dec.Token()
		name, ok := t.(string)
		if err != nil || !ok {
			return nil, nil, Invalid("queues", rule, Describe(raw))
		}
		field := "queues." + name
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, Invalid(field, "a {weight} object or a weight", Describe(raw))
		}
		if _, dup := weights[name]; dup {
			return nil, nil, Invalid(field, "each queue once", strconv.Quote(Short(name)))
		}
		w, err := queueWeight(field, v)
		if err != nil {
			return nil, nil, err
		}
		names = append(names, name)
		weights[name] = w
	}
	return names, weights, nil
}

// queueWeight reads one queue's entry of the object form: {"weight": n}
// (weight 1 when left out) or n.
func queueWeight(field string, v json.RawMessage) (int, error) {
	o := Object{"weight": v}
	if len(v) > 0 && v[0] == '{' {
		var err error
		if o, err = ParseObject(v); err != nil {
			return 0, PrefixField(field+".", err)
		}
		if err := OnlyFields(o, "weight"); err != nil {
			return 0, PrefixField(field+".", err)
		}
	}
	w, err := o.Integer("weight", 1, 0, ojs.MaxQueueWeight)
	if err != nil {
		return 0, PrefixField(field+".", err)
	}
	return int(w), nil
}

// GroupName checks a worker group's (or pool's) name given as field; a
// 400 names the field and says what it names.
func GroupName(name, field, what string) (string, error) {
	if !ojs.ValidGroupName(name) {
		return "", Invalid(field, "a "+what+` name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(Short(name)))
	}
	return name, nil
}

// WorkerID checks a worker id given as field.
func WorkerID(id, field string) (string, error) {
	if id == "" || len(id) > MaxIDLen {
		return "", Invalid(field, fmt.Sprintf("a worker id of 1 to %d bytes", MaxIDLen), strconv.Quote(Short(id)))
	}
	return id, nil
}

// Page sizes of GET /ojs/v1/cron (ojs-http-binding.md 13.1 shows limit=50).
const (
	cronDefaultLimit = 50
	cronMaxLimit     = 200
)

// CronPage reads the paging of a cron listing: the binding's limit,
// offset and cursor, or page (1-based) and per_page as the admin UI sends
// them (GET /ojs/v1/crons, issue 32).
func CronPage(q url.Values) (ojs.PageRequest, error) {
	page, err := ParsePage(q, cronDefaultLimit, cronMaxLimit)
	if err != nil {
		return page, err
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return page, Invalid("per_page", fmt.Sprintf("an integer between 1 and %d", cronMaxLimit), strconv.Quote(Short(v)))
		}
		page.Limit = min(n, cronMaxLimit)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return page, Invalid("page", "an integer >= 1", strconv.Quote(Short(v)))
		}
		page.Offset = (n - 1) * page.Limit
	}
	if page.Cursor != "" {
		if page.Offset, err = DecodeCursor(page.Cursor); err != nil {
			return page, err
		}
	}
	return page, nil
}

// CronView is a cron job definition as the clients read it (issue 32,
// spec/README.md decision 10): the expression under both expression and
// cron, the overlap policy as sent, enabled, and the job both as
// job_template and, as the binding shows it (13.1), at the top level.
type CronView struct {
	Name          string          `json:"name"`
	Expression    string          `json:"expression"`
	Cron          string          `json:"cron"`
	Timezone      string          `json:"timezone"`
	OverlapPolicy string          `json:"overlap_policy"`
	Enabled       bool            `json:"enabled"`
	Status        string          `json:"status,omitempty"`
	JobTemplate   CronTemplate    `json:"job_template"`
	Type          string          `json:"type"`
	Args          json.RawMessage `json:"args"`
	Meta          json.RawMessage `json:"meta,omitempty"`
	Options       json.RawMessage `json:"options,omitempty"`
	CreatedAt     *ojs.Time       `json:"created_at,omitempty"`
	NextRunAt     *ojs.Time       `json:"next_run_at,omitempty"`
	LastRunAt     *ojs.Time       `json:"last_run_at,omitempty"`
	LastJobID     string          `json:"last_job_id,omitempty"`
}

// CronTemplate is the job a cron job's ticks enqueue.
type CronTemplate struct {
	Type    string          `json:"type"`
	Args    json.RawMessage `json:"args"`
	Meta    json.RawMessage `json:"meta,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// NewCronView is cj as the clients read it.
func NewCronView(cj *ojs.CronJob) *CronView {
	args := cj.Args
	if len(args) == 0 {
		args = json.RawMessage("[]")
	}
	return &CronView{
		Name: cj.Name, Expression: cj.Cron, Cron: cj.Cron, Timezone: cj.Timezone,
		OverlapPolicy: cj.OverlapPolicy, Enabled: cj.IsEnabled(), Status: cj.Status,
		JobTemplate: CronTemplate{Type: cj.Type, Args: args, Meta: cj.Meta, Options: cj.Options},
		Type:        cj.Type, Args: args, Meta: cj.Meta, Options: cj.Options,
		CreatedAt: cj.CreatedAt, NextRunAt: cj.NextRunAt, LastRunAt: cj.LastRunAt, LastJobID: cj.LastJobID,
	}
}

// CronReply is the answer about one cron job: under cron (openapi.yaml
// and most clients) and cron_job (the official Go client), the same view.
func CronReply(cj *ojs.CronJob) map[string]any {
	v := NewCronView(cj)
	return map[string]any{"cron": v, "cron_job": v}
}

// CronListReply is a page of the cron listing: under crons and cron_jobs,
// with the binding's pagination (total, limit, offset, has_more,
// next_cursor) and the admin API's (page, per_page).
func CronListReply(res *ojs.CronPage, page ojs.PageRequest) map[string]any {
	views := make([]*CronView, len(res.CronJobs))
	for i := range res.CronJobs {
		views[i] = NewCronView(&res.CronJobs[i])
	}
	p := map[string]any{"total": res.Pagination.Total, "limit": page.Limit, "offset": page.Offset,
		"has_more": res.Pagination.HasMore, "page": page.Offset/max(page.Limit, 1) + 1, "per_page": page.Limit}
	if res.Pagination.HasMore {
		p["next_cursor"] = EncodeCursor(page.Offset + page.Limit)
	}
	return map[string]any{"crons": views, "cron_jobs": views, "pagination": p}
}

// MergeCron is the definition a PUT of a cron job makes (issue 32): the
// body's fields over those of the current definition (cur; nil when there
// is none, and then the body is a whole registration). A body that gives
// the expression (cron or expression) replaces it; one that gives
// job_template replaces the whole job, one that gives type, args, meta or
// options at the top level replaces those.
func MergeCron(name string, cur *ojs.CronJob, body Object) (ojs.CronJob, error) {
	o := Object{}
	if cur != nil {
		put := func(k string, v any) {
			if b, err := json.Marshal(v); err == nil {
				o[k] = b
			}
		}
		put("expression", cur.Cron)
		put("timezone", cur.Timezone)
		put("overlap_policy", cur.OverlapPolicy)
		put("enabled", cur.IsEnabled())
		put("type", cur.Type)
		for k, v := range map[string]json.RawMessage{"args": cur.Args, "meta": cur.Meta, "options": cur.Options} {
			if len(v) > 0 {
				o[k] = v
			}
		}
		if _, ok := body["cron"]; ok {
			delete(o, "expression")
		}
		if _, ok := body["job_template"]; ok {
			for _, k := range []string{"type", "args", "meta", "options"} {
				delete(o, k)
			}
		}
	}
	for k, v := range body {
		o[k] = v
	}
	if _, ok := o["name"]; !ok {
		o["name"], _ = json.Marshal(name)
	}
	return DecodeCron(o)
}

// BeatReply is the answer of POST /ojs/v1/workers/beat (the graceful
// shutdown extension's heartbeat): the state the worker is to be in.
func BeatReply(req ojs.HeartbeatRequest, res *ojs.HeartbeatResult) map[string]any {
	state := res.WorkerState
	if state == "" {
		state = ojs.FurthestWorkerState(res.State, req.Worker.State)
	}
	st := res.ServerTime
	if st.IsZero() {
		st = time.Now()
	}
	return map[string]any{
		"acknowledged": true, "worker_id": req.WorkerID, "state": state,
		"jobs_extended": nonNil(res.Extended), "jobs_to_cancel": nonNil(res.Cancel), "server_time": ojs.NewTime(st),
	}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// WorkerListReply is the answer of GET /ojs/v1/admin/workers (9.1).
func WorkerListReply(res *ojs.WorkerPage, page, per int) map[string]any {
	items := res.Items
	if items == nil {
		items = []ojs.Worker{}
	}
	return map[string]any{
		"items": items, "summary": res.Summary,
		"pagination": map[string]int{"total": res.Total, "page": page, "per_page": per},
	}
}

// WorkflowReply is {"workflow": ...} (14.1-14.3).
type WorkflowReply struct {
	Workflow *ojs.Workflow `json:"workflow"`
}

// ParseWorkflowListQuery reads the query of GET /ojs/v1/workflows (issue
// 32): page (1-based) and per_page as the admin API's listings, or the
// cursor of a previous page, and state.
func ParseWorkflowListQuery(q url.Values) (ojs.WorkflowListQuery, error) {
	var out ojs.WorkflowListQuery
	var err error
	if out.Page, out.PerPage, err = ParseAdminPage(q); err != nil {
		return out, err
	}
	out.Cursor, out.State = q.Get("cursor"), q.Get("state")
	if len(out.Cursor) > MaxCursorLen {
		return out, Invalid("cursor", "a cursor returned as pagination.next_cursor", Short(out.Cursor))
	}
	if out.Cursor != "" && q.Get("page") != "" {
		return out, Invalid("page", "page or cursor, not both", strconv.Quote(Short(q.Get("page"))))
	}
	return out, nil
}

// PoolReply is a pool as GET and PUT /ojs/v1/admin/pools/{pool} answer it:
// its fields at the top level, as jetgate answered before, and again under
// "pool", the shape of ojs-fair-scheduling.md 6.1 that admin dashboards
// read (issue 32; spec/README.md decision 10: answer both).
type PoolReply struct {
	ojs.Pool
	Wrapped *ojs.Pool `json:"pool"`
}

// NewPoolReply is p's reply.
func NewPoolReply(p *ojs.Pool) PoolReply { return PoolReply{Pool: *p, Wrapped: p} }

// SchedulingStatsReply is GET /ojs/v1/admin/scheduling/stats: the
// statistics at the top level (ojs-fair-scheduling.md 10.2) and again
// under "stats", where admin dashboards read them (issue 32).
type SchedulingStatsReply struct {
	ojs.SchedulingStats
	Stats *ojs.SchedulingStats `json:"stats"`
}

// NewSchedulingStatsReply is st's reply.
func NewSchedulingStatsReply(st *ojs.SchedulingStats) SchedulingStatsReply {
	return SchedulingStatsReply{SchedulingStats: *st, Stats: st}
}
