package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// CronBackend is what the cron endpoints ask of the layer below
// (ojs-http-binding.md 13; admission/cron). A Backend that also
// implements it gets the routes and the manifest's cron_jobs capability.
type CronBackend interface {
	// CronRegister validates and registers a definition; a name in use
	// is ojs.ErrDuplicate (409), a bad field an *ojs.ValidationError.
	CronRegister(ctx context.Context, cj ojs.CronJob) (*ojs.CronJob, error)
	CronJobs(ctx context.Context, page ojs.PageRequest) (*ojs.CronPage, error)
	CronJob(ctx context.Context, name string) (*ojs.CronJob, error)
	CronDelete(ctx context.Context, name string) error
	// CronPut registers or replaces cron job name with the definition
	// build makes from the current one (nil when there is none), and
	// reports whether it was created.
	CronPut(ctx context.Context, name string, build func(cur *ojs.CronJob) (ojs.CronJob, error)) (*ojs.CronJob, bool, error)
}

func (s *server) cronRoutes() []route {
	cb, ok := s.b.(CronBackend)
	if !ok {
		return nil
	}
	// The manifest is built before the routes; it declares cron only
	// when the routes exist.
	s.manifest.Capabilities["cron_jobs"] = true
	body := s.cfg.MaxBodyBytes
	h := cronHandlers{s: s, b: cb}
	// /ojs/v1/cron is the binding's and the Go client's path; /ojs/v1/crons
	// the admin UI's (issue 32). Both serve every call.
	return []route{
		{http.MethodGet, "/ojs/v1/cron", h.list, body},
		{http.MethodPost, "/ojs/v1/cron", h.register, body},
		{http.MethodGet, "/ojs/v1/cron/{name}", h.get, body},
		{http.MethodPut, "/ojs/v1/cron/{name}", h.put, body},
		{http.MethodDelete, "/ojs/v1/cron/{name}", h.delete, body},
		{http.MethodGet, "/ojs/v1/crons", h.list, body},
		{http.MethodPost, "/ojs/v1/crons", h.register, body},
		{http.MethodGet, "/ojs/v1/crons/{name}", h.get, body},
		{http.MethodPut, "/ojs/v1/crons/{name}", h.put, body},
		{http.MethodDelete, "/ojs/v1/crons/{name}", h.delete, body},
	}
}

type cronHandlers struct {
	s *server
	b CronBackend
}

// register is POST /ojs/v1/cron (13.2): 201 {"cron": {...}, "cron_job":
// {...}} (wire.CronReply).
func (h cronHandlers) register(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	cj, err := decodeCron(o)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	out, err := h.b.CronRegister(r.Context(), cj)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusCreated, wire.CronReply(out))
}

var decodeCron = wire.DecodeCron

// list is GET /ojs/v1/cron (13.1): {"crons": [...], "cron_jobs": [...],
// "pagination"}; limit, offset and cursor, or page and per_page.
func (h cronHandlers) list(w http.ResponseWriter, r *http.Request) {
	page, err := wire.CronPage(r.URL.Query())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.CronJobs(r.Context(), page)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.CronListReply(res, page))
}

// get is GET /ojs/v1/cron/{name}: {"cron": {...}, "cron_job": {...}}. The
// binding's table has no such row; jetgate serves it beside DELETE.
func (h cronHandlers) get(w http.ResponseWriter, r *http.Request) {
	cj, err := h.b.CronJob(r.Context(), mux.Vars(r)["name"])
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, wire.CronReply(cj))
}

// put is PUT /ojs/v1/cron/{name} (issue 32): the body's fields over the
// current definition (wire.MergeCron), or a whole registration when there
// is none; 200, or 201 when it created the cron job.
func (h cronHandlers) put(w http.ResponseWriter, r *http.Request) {
	o, err := readObject(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	name := mux.Vars(r)["name"]
	out, created, err := h.b.CronPut(r.Context(), name, func(cur *ojs.CronJob) (ojs.CronJob, error) {
		return wire.MergeCron(name, cur, o)
	})
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	h.s.writeJSON(w, r, status, wire.CronReply(out))
}

// delete is DELETE /ojs/v1/cron/{name} (13.3): {"deleted": true, "name"}.
func (h cronHandlers) delete(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	if err := h.b.CronDelete(r.Context(), name); err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"deleted": true, "name": name})
}
