package httpbind

import (
	"context"
	"net/http"

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
		{http.MethodDelete, "/ojs/v1/admin/dead-letter/{id}", s.adminDeleteDeadLetter, body},
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
	page, per, err := wire.ParseAdminPage(r.URL.Query())
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
	out := wire.AdminQueueState{Name: name, State: info.Status, Paused: info.Status == ojs.QueuePaused}
	if out.Paused {
		out.PausedAt = info.PausedAt
	} else {
		out.ResumedAt = info.ResumedAt
	}
	h.s.writeJSON(w, r, http.StatusOK, out)
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
	q, err := wire.ParseJobListQuery(r.URL.Query(), state)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.AdminJobs(r.Context(), q)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.NewJobList(res))
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
	h.s.writeJSON(w, r, http.StatusOK, wire.AdminJob(j))
}

// bulk is POST /ojs/v1/admin/jobs/bulk/{retry|cancel|delete} (8.1-8.3,
// ADM-007, ADM-R005): {"filter":{...},"confirm":true,"limit"?,"cursor"?}.
// Without "confirm": true nothing is done (4, "safe by default").
func (h adminHandlers) bulk(w http.ResponseWriter, r *http.Request) {
	req, err := decodeBody(r, func(b []byte) (ojs.BulkRequest, error) { return wire.DecodeBulk(mux.Vars(r)["action"], b) })
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.BulkJobs(r.Context(), req)
	h.s.answer(w, r, res, err)
}

// deadLetterStats is GET /ojs/v1/dead-letter/stats and
// /ojs/v1/admin/dead-letter/stats (ojs-dead-letter.md 10.1, DLQ-R004).
func (h adminHandlers) deadLetterStats(w http.ResponseWriter, r *http.Request) {
	st, err := h.b.DeadLetterStats(r.Context())
	h.s.answer(w, r, st, err)
}
