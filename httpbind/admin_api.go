package httpbind

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// AdminBackend is what the operator API (ojs-admin-api.md) asks of the
// layer below besides Backend: listings, counts and bulk operations. A
// Backend that also implements it gets the /ojs/v1/admin/ routes below
// and GET /ojs/v1/dead-letter/stats. Queue pause and resume, job detail,
// cancel and dead letter retry and delete are Backend's own operations,
// served under the admin prefix too.
type AdminBackend interface {
	AdminStats(ctx context.Context) (*ojs.AdminStats, error)
	AdminQueues(ctx context.Context, page, perPage int) (*ojs.AdminQueueList, error)
	AdminQueue(ctx context.Context, name string) (*ojs.AdminQueue, error)
	AdminJobs(ctx context.Context, q ojs.JobListQuery) (*ojs.JobList, error)
	BulkJobs(ctx context.Context, req ojs.BulkRequest) (*ojs.BulkResult, error)
	DeadLetterStats(ctx context.Context) (*ojs.DeadLetterStats, error)
}

// ExtAdminAPI is the admin API extension's URI (ojs-admin-api.md): a
// server whose Backend implements AdminBackend and WorkerBackend serves
// every required endpoint (ADM-001..ADM-008) and declares it.
const ExtAdminAPI = "urn:ojs:ext:admin-api"

// Page sizes of admin listings (7.1: default 20, max 100).
const (
	adminDefaultPerPage = 20
	adminMaxPerPage     = 100
	maxJobTypeLen       = 255
)

func (s *server) adminRoutes() []route {
	ab, ok := s.b.(AdminBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	h := adminHandlers{s: s, b: ab}
	return []route{
		{http.MethodGet, "/ojs/v1/admin/stats", h.stats, body},
		{http.MethodGet, "/ojs/v1/admin/queues", h.queues, body},
		{http.MethodGet, "/ojs/v1/admin/queues/{name}", h.queue, body},
		{http.MethodPost, "/ojs/v1/admin/queues/{name}/pause", h.pause, body},
		{http.MethodPost, "/ojs/v1/admin/queues/{name}/resume", h.resume, body},
		// Bulk routes before the {id} ones: /jobs/bulk/cancel would match
		// /jobs/{id}/cancel too.
		{http.MethodPost, "/ojs/v1/admin/jobs/bulk/{action}", h.bulk, body},
		{http.MethodGet, "/ojs/v1/admin/jobs", h.jobs, body},
		{http.MethodGet, "/ojs/v1/admin/jobs/{id}", h.job, body},
		{http.MethodPost, "/ojs/v1/admin/jobs/{id}/cancel", s.cancelJob, body},
		{http.MethodPost, "/ojs/v1/admin/jobs/{id}/retry", s.retryDeadLetter, body},
		{http.MethodGet, "/ojs/v1/admin/dead-letter", h.deadLetter, body},
		{http.MethodGet, "/ojs/v1/admin/dead-letter/stats", h.deadLetterStats, body},
		{http.MethodPost, "/ojs/v1/admin/dead-letter/{id}/retry", s.retryDeadLetter, body},
		{http.MethodDelete, "/ojs/v1/admin/dead-letter/{id}", s.deleteDeadLetter, body},
		{http.MethodGet, "/ojs/v1/dead-letter/stats", h.deadLetterStats, body},
	}
}

type adminHandlers struct {
	s *server
	b AdminBackend
}

// stats is GET /ojs/v1/admin/stats (10.1, ADM-005).
func (h adminHandlers) stats(w http.ResponseWriter, r *http.Request) {
	st, err := h.b.AdminStats(r.Context())
	h.s.answer(w, r, st, err)
}

// queues is GET /ojs/v1/admin/queues?page=&per_page= (6.1, ADM-001).
func (h adminHandlers) queues(w http.ResponseWriter, r *http.Request) {
	page, per, err := parseAdminPage(r.URL.Query())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	out, err := h.b.AdminQueues(r.Context(), page, per)
	h.s.answer(w, r, out, err)
}

// queue is GET /ojs/v1/admin/queues/{name} (6.2).
func (h adminHandlers) queue(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	out, err := h.b.AdminQueue(r.Context(), name)
	h.s.answer(w, r, out, err)
}

// adminQueueState is the answer to admin pause and resume (6.3, 6.4).
type adminQueueState struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Paused    bool      `json:"paused"`
	PausedAt  *ojs.Time `json:"paused_at,omitempty"`
	ResumedAt *ojs.Time `json:"resumed_at,omitempty"`
}

// pause is POST /ojs/v1/admin/queues/{name}/pause (6.3, ADM-002): the
// same operation as POST /ojs/v1/queues/{name}/pause.
func (h adminHandlers) pause(w http.ResponseWriter, r *http.Request) {
	h.setState(w, r, h.s.b.PauseQueue)
}

// resume is POST /ojs/v1/admin/queues/{name}/resume (6.4, ADM-002).
func (h adminHandlers) resume(w http.ResponseWriter, r *http.Request) {
	h.setState(w, r, h.s.b.ResumeQueue)
}

func (h adminHandlers) setState(w http.ResponseWriter, r *http.Request,
	op func(ctx context.Context, name string) (*ojs.QueueInfo, error)) {
	name, err := pathQueue(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	info, err := op(r.Context(), name)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	out := adminQueueState{Name: name, State: info.Status, Paused: info.Status == ojs.QueuePaused}
	if out.Paused {
		out.PausedAt = info.PausedAt
	} else {
		out.ResumedAt = info.ResumedAt
	}
	h.s.writeJSON(w, r, http.StatusOK, out)
}

// jobList is the answer of a job listing (7.1).
type jobList struct {
	Items      []jobSummary        `json:"items"`
	Pagination ojs.AdminPagination `json:"pagination"`
}

// jobSummary is one job of a listing (7.1): what a dashboard's table
// shows; GET /ojs/v1/admin/jobs/{id} has the whole envelope.
type jobSummary struct {
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

func summarize(j *ojs.Job) jobSummary {
	return jobSummary{ID: j.ID, Type: j.Type, Queue: j.Queue, State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Tags: j.Tags, CreatedAt: j.CreatedAt,
		EnqueuedAt: j.EnqueuedAt, ScheduledAt: j.ScheduledAt, StartedAt: j.StartedAt,
		CompletedAt: j.CompletedAt, CancelledAt: j.CancelledAt, DiscardedAt: j.DiscardedAt,
		NextAttemptAt: j.NextAttemptAt, Error: j.Error}
}

// jobs is GET /ojs/v1/admin/jobs (7.1, ADM-003).
func (h adminHandlers) jobs(w http.ResponseWriter, r *http.Request) {
	h.listJobs(w, r, "")
}

// deadLetter is GET /ojs/v1/admin/dead-letter (11.1): the job listing of
// discarded jobs, with the same query parameters.
func (h adminHandlers) deadLetter(w http.ResponseWriter, r *http.Request) {
	h.listJobs(w, r, ojs.StateDiscarded)
}

func (h adminHandlers) listJobs(w http.ResponseWriter, r *http.Request, state ojs.State) {
	q, err := parseJobListQuery(r.URL.Query(), state)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.AdminJobs(r.Context(), q)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	out := jobList{Items: make([]jobSummary, 0, len(res.Items)), Pagination: res.Pagination}
	for _, j := range res.Items {
		out.Items = append(out.Items, summarize(j))
	}
	h.s.writeJSON(w, r, http.StatusOK, out)
}

// parseAdminPage reads page (1-based) and per_page; a per_page above the
// maximum is lowered to it (the answer shows the size used).
func parseAdminPage(q url.Values) (page, per int, err error) {
	page, per = 1, adminDefaultPerPage
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<31-1 {
			return 0, 0, invalid("page", "an integer >= 1", strconv.Quote(short(v)))
		}
		page = n
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, invalid("per_page", fmt.Sprintf("an integer between 1 and %d", adminMaxPerPage), strconv.Quote(short(v)))
		}
		per = min(n, adminMaxPerPage)
	}
	return page, per, nil
}

// parseJobListQuery reads the query of a job listing (7.1). A listing
// follows its streams' order (see admission/admin), so sort is refused and
// order may only be asc. forced, when set, is the only state allowed.
func parseJobListQuery(q url.Values, forced ojs.State) (ojs.JobListQuery, error) {
	var out ojs.JobListQuery
	var err error
	if out.Page, out.PerPage, err = parseAdminPage(q); err != nil {
		return out, err
	}
	out.Cursor = q.Get("cursor")
	if len(out.Cursor) > wire.MaxCursorLen {
		return out, invalid("cursor", "a cursor returned as pagination.next_cursor", short(out.Cursor))
	}
	if out.Cursor != "" && q.Get("page") != "" {
		return out, invalid("page", "absent when cursor is given", strconv.Quote(short(q.Get("page"))))
	}
	if v := q.Get("sort"); v != "" {
		return out, invalid("sort", "absent: jobs are listed in stream order (available jobs in the order they became ready, others by last change)", strconv.Quote(short(v)))
	}
	if v := q.Get("order"); v != "" && v != "asc" {
		return out, invalid("order", "asc: a descending listing would need an index written for every job", strconv.Quote(short(v)))
	}
	str := func(name string) string { return q.Get(name) }
	out.Filter, err = decodeFilter("", str, forced)
	return out, err
}

// decodeFilter checks the fields of a job filter (7.1, 8.1), read by get;
// prefix names them in errors ("filter." in a bulk body).
func decodeFilter(prefix string, get func(string) string, forced ojs.State) (ojs.JobFilter, error) {
	var f ojs.JobFilter
	if f.Queue = get("queue"); f.Queue != "" {
		if err := checkQueueName(prefix+"queue", f.Queue); err != nil {
			return f, err
		}
	}
	if v := get("state"); v != "" {
		f.State = ojs.State(v)
		if !f.State.Valid() {
			return f, invalid(prefix+"state", "one of scheduled, available, pending, active, completed, retryable, cancelled, discarded", strconv.Quote(short(v)))
		}
	}
	if forced != "" {
		if f.State != "" && f.State != forced {
			return f, invalid(prefix+"state", string(forced)+" (or absent) on this listing", strconv.Quote(string(f.State)))
		}
		f.State = forced
	}
	if f.Type = get("type"); len(f.Type) > maxJobTypeLen {
		return f, invalid(prefix+"type", fmt.Sprintf("a job type (or prefix ending in *) of at most %d characters", maxJobTypeLen), short(f.Type))
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
			return f, invalid(prefix+b.name, "an RFC 3339 timestamp", strconv.Quote(short(v)))
		}
		*b.dst = ojs.NewTime(t)
	}
	return f, nil
}

// job is GET /ojs/v1/admin/jobs/{id} (7.2, ADM-004): the whole envelope,
// its timestamps also gathered under "metadata" as 7.2 shows them.
func (h adminHandlers) job(w http.ResponseWriter, r *http.Request) {
	id, err := pathJobID(r, "job")
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	j, err := h.s.b.Get(r.Context(), id)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, withField(j, "metadata", map[string]*ojs.Time{
		"created_at": j.CreatedAt, "enqueued_at": j.EnqueuedAt, "started_at": j.StartedAt,
		"scheduled_at": j.ScheduledAt, "completed_at": j.CompletedAt, "cancelled_at": j.CancelledAt,
		"discarded_at": j.DiscardedAt,
	}))
}

// bulk is POST /ojs/v1/admin/jobs/bulk/{retry|cancel|delete} (8.1-8.3,
// ADM-007, ADM-R005): {"filter":{...},"confirm":true,"limit"?,"cursor"?}.
// Without "confirm": true nothing is done (4, "safe by default").
func (h adminHandlers) bulk(w http.ResponseWriter, r *http.Request) {
	req, err := decodeBulk(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.BulkJobs(r.Context(), req)
	h.s.answer(w, r, res, err)
}

func decodeBulk(r *http.Request) (ojs.BulkRequest, error) {
	req := ojs.BulkRequest{Action: mux.Vars(r)["action"]}
	switch req.Action {
	case ojs.BulkRetry, ojs.BulkCancel, ojs.BulkDelete:
	default:
		return req, &ojs.NotFoundError{Resource: "bulk action", ID: short(req.Action)}
	}
	o, err := readObject(r)
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
		return req, invalid("confirm", "true: a bulk operation changes every job its filter matches", got)
	}
	var fo object
	if raw, ok := o.Get("filter"); ok {
		if fo, err = parseObject(raw); err != nil {
			return req, invalid("filter", "a JSON object", describe(raw))
		}
	}
	strs := map[string]string{}
	for _, name := range []string{"queue", "state", "type", "since", "until"} {
		v, err := fo.Str(name, false)
		if err != nil {
			return req, invalid("filter."+name, "a string", describe(fo[name]))
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
	if len(req.Cursor) > wire.MaxCursorLen {
		return req, invalid("cursor", "a cursor returned as next_cursor", short(req.Cursor))
	}
	return req, nil
}

// deadLetterStats is GET /ojs/v1/dead-letter/stats and
// /ojs/v1/admin/dead-letter/stats (ojs-dead-letter.md 10.1, DLQ-R004).
func (h adminHandlers) deadLetterStats(w http.ResponseWriter, r *http.Request) {
	st, err := h.b.DeadLetterStats(r.Context())
	h.s.answer(w, r, st, err)
}
