package wire

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Page sizes and limits of admin listings (ojs-admin-api.md 7.1: default
// 20, max 100).
const (
	adminDefaultPerPage = 20
	AdminMaxPerPage     = 100
	maxJobTypeLen       = 255
)

// JobList is the answer of a job listing (7.1).
type JobList struct {
	Items      []JobSummary        `json:"items"`
	Pagination ojs.AdminPagination `json:"pagination"`
}

// JobSummary is one job of a listing (7.1): what a dashboard's table
// shows; GET /ojs/v1/admin/jobs/{id} has the whole envelope.
type JobSummary struct {
	ID            string        `json:"id"`
	Type          string        `json:"type"`
	Queue         string        `json:"queue"`
	State         ojs.State     `json:"state"`
	Priority      int           `json:"priority"`
	Attempt       int           `json:"attempt"`
	MaxAttempts   int           `json:"max_attempts"`
	Tags          []string      `json:"tags,omitempty"`
	CreatedAt     *ojs.Time     `json:"created_at,omitempty"`
	EnqueuedAt    *ojs.Time     `json:"enqueued_at,omitempty"`
	ScheduledAt   *ojs.Time     `json:"scheduled_at,omitempty"`
	StartedAt     *ojs.Time     `json:"started_at,omitempty"`
	CompletedAt   *ojs.Time     `json:"completed_at,omitempty"`
	CancelledAt   *ojs.Time     `json:"cancelled_at,omitempty"`
	DiscardedAt   *ojs.Time     `json:"discarded_at,omitempty"`
	NextAttemptAt *ojs.Time     `json:"next_attempt_at,omitempty"`
	Error         *ojs.JobError `json:"error,omitempty"`
}

// Summarize is the listing form of j.
func Summarize(j *ojs.Job) JobSummary {
	return JobSummary{ID: j.ID, Type: j.Type, Queue: j.Queue, State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Tags: j.Tags, CreatedAt: j.CreatedAt,
		EnqueuedAt: j.EnqueuedAt, ScheduledAt: j.ScheduledAt, StartedAt: j.StartedAt,
		CompletedAt: j.CompletedAt, CancelledAt: j.CancelledAt, DiscardedAt: j.DiscardedAt,
		NextAttemptAt: j.NextAttemptAt, Error: j.Error}
}

// AdminQueueState is the answer to admin pause and resume (6.3, 6.4).
type AdminQueueState struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Paused    bool      `json:"paused"`
	PausedAt  *ojs.Time `json:"paused_at,omitempty"`
	ResumedAt *ojs.Time `json:"resumed_at,omitempty"`
}

// ParseAdminPage reads page (1-based) and per_page; a per_page above the
// maximum is lowered to it (the answer shows the size used).
func ParseAdminPage(q url.Values) (page, per int, err error) {
	page, per = 1, adminDefaultPerPage
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<31-1 {
			return 0, 0, Invalid("page", "an integer >= 1", strconv.Quote(Short(v)))
		}
		page = n
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, Invalid("per_page", fmt.Sprintf("an integer between 1 and %d", AdminMaxPerPage), strconv.Quote(Short(v)))
		}
		per = min(n, AdminMaxPerPage)
	}
	return page, per, nil
}

// ParseJobListQuery reads the query of a job listing (7.1). Without sort a
// listing follows its streams' order (see admission/admin); sort orders it
// (issue 32), within the listing's scan bound. forced, when set, is the
// only state allowed.
func ParseJobListQuery(q url.Values, forced ojs.State) (ojs.JobListQuery, error) {
	var out ojs.JobListQuery
	var err error
	if out.Page, out.PerPage, err = ParseAdminPage(q); err != nil {
		return out, err
	}
	out.Cursor = q.Get("cursor")
	if len(out.Cursor) > MaxCursorLen {
		return out, Invalid("cursor", "a cursor returned as pagination.next_cursor", Short(out.Cursor))
	}
	if out.Cursor != "" && q.Get("page") != "" {
		return out, Invalid("page", "absent when cursor is given", strconv.Quote(Short(q.Get("page"))))
	}
	if out.Sort, out.Desc, err = listOrder(q); err != nil {
		return out, err
	}
	str := func(name string) string { return q.Get(name) }
	out.Filter, err = decodeFilter("", str, forced)
	return out, err
}

// listOrder reads sort (created_at, scheduled_at or priority) and order
// (asc or desc). order=asc alone keeps stream order, as before sort was
// served; order=desc alone is created_at, newest first (7.1's default
// sort field).
func listOrder(q url.Values) (sort string, desc bool, err error) {
	switch v := q.Get("order"); v {
	case "", "asc":
	case "desc":
		desc = true
	default:
		return "", false, Invalid("order", "asc or desc", strconv.Quote(Short(v)))
	}
	switch v := q.Get("sort"); v {
	case "":
		if desc {
			sort = ojs.SortCreatedAt
		}
	case ojs.SortCreatedAt, ojs.SortScheduledAt, ojs.SortPriority:
		sort = v
	default:
		return "", false, Invalid("sort", "created_at, scheduled_at or priority (or absent: stream order)", strconv.Quote(Short(v)))
	}
	return sort, desc, nil
}

// decodeFilter checks the fields of a job filter (7.1, 8.1), read by get;
// prefix names them in errors ("filter." in a bulk body).
func decodeFilter(prefix string, get func(string) string, forced ojs.State) (ojs.JobFilter, error) {
	var f ojs.JobFilter
	if f.Queue = get("queue"); f.Queue != "" {
		if err := CheckQueueName(prefix+"queue", f.Queue); err != nil {
			return f, err
		}
	}
	if v := get("state"); v != "" {
		f.State = ojs.State(v)
		if !f.State.Valid() {
			return f, Invalid(prefix+"state", "one of scheduled, available, pending, active, completed, retryable, cancelled, discarded", strconv.Quote(Short(v)))
		}
	}
	if forced != "" {
		if f.State != "" && f.State != forced {
			return f, Invalid(prefix+"state", string(forced)+" (or absent) on this listing", strconv.Quote(string(f.State)))
		}
		f.State = forced
	}
	if f.Type = get("type"); len(f.Type) > maxJobTypeLen {
		return f, Invalid(prefix+"type", fmt.Sprintf("a job type (or prefix ending in *) of at most %d characters", maxJobTypeLen), Short(f.Type))
	}
	for _, b := range []struct {
		name string
		dst  **ojs.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		v := get(b.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, Invalid(prefix+b.name, "an RFC 3339 timestamp", strconv.Quote(Short(v)))
		}
		*b.dst = ojs.NewTime(t)
	}
	return f, nil
}

// DecodeBulk reads a bulk operation (ojs-admin-api.md 8.1-8.3, ADM-007,
// ADM-R005): action retry, cancel or delete (404 otherwise) and the body
// {"filter":{...},"confirm":true,"limit"?,"cursor"?}; without "confirm":
// true nothing is done (4, "safe by default").
func DecodeBulk(action string, body []byte) (ojs.BulkRequest, error) {
	req := ojs.BulkRequest{Action: action}
	switch req.Action {
	case ojs.BulkRetry, ojs.BulkCancel, ojs.BulkDelete:
	default:
		return req, &ojs.NotFoundError{Resource: "bulk action", ID: Short(req.Action)}
	}
	o, err := ParseObject(body)
	if err != nil {
		return req, err
	}
	confirm, err := o.Boolean("confirm")
	if err != nil {
		return req, err
	}
	if confirm == nil || !*confirm {
		got := "nothing"
		if confirm != nil {
			got = "false"
		}
		return req, Invalid("confirm", "true: a bulk operation changes every job its filter matches", got)
	}
	var fo Object
	if raw, ok := o.Get("filter"); ok {
		if fo, err = ParseObject(raw); err != nil {
			return req, Invalid("filter", "a JSON Object", Describe(raw))
		}
	}
	strs := map[string]string{}
	for _, name := range []string{"queue", "state", "type", "since", "until"} {
		v, err := fo.Str(name, false)
		if err != nil {
			return req, Invalid("filter."+name, "a string", Describe(fo[name]))
		}
		strs[name] = v
	}
	if req.Filter, err = decodeFilter("filter.", func(n string) string { return strs[n] }, ""); err != nil {
		return req, err
	}
	limit, err := o.Integer("limit", 0, 1, 1<<31-1)
	if err != nil {
		return req, err
	}
	req.Limit = int(limit)
	if req.Cursor, err = o.Str("cursor", false); err != nil {
		return req, err
	}
	if len(req.Cursor) > MaxCursorLen {
		return req, Invalid("cursor", "a cursor returned as next_cursor", Short(req.Cursor))
	}
	return req, nil
}

// AdminJob is the job detail of GET /ojs/v1/admin/jobs/{id} (7.2): the
// whole envelope at the top level, its timestamps gathered under
// "metadata" and its retry policy again as "retry_policy", as 7.2 shows
// them (issue 32).
func AdminJob(j *ojs.Job) *ojs.Job {
	p := WithField(j, "metadata", map[string]*ojs.Time{
		"created_at": j.CreatedAt, "enqueued_at": j.EnqueuedAt, "started_at": j.StartedAt,
		"scheduled_at": j.ScheduledAt, "completed_at": j.CompletedAt, "cancelled_at": j.CancelledAt,
		"discarded_at": j.DiscardedAt,
	})
	if _, sent := p.Extra["retry_policy"]; j.Retry != nil && p.Extra != nil && !sent {
		if b, err := json.Marshal(j.Retry); err == nil {
			p.Extra["retry_policy"] = b
		}
	}
	return p
}

// NewJobList is the reply of a job listing: each job summarized.
func NewJobList(res *ojs.JobList) JobList {
	out := JobList{Items: make([]JobSummary, 0, len(res.Items)), Pagination: res.Pagination}
	for _, j := range res.Items {
		out.Items = append(out.Items, Summarize(j))
	}
	return out
}
