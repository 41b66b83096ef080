package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
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
}

// Page sizes of GET /ojs/v1/cron (13.1 shows limit=50).
const (
	cronDefaultLimit = 50
	cronMaxLimit     = 200
)

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
	return []route{
		{http.MethodGet, "/ojs/v1/cron", h.list, body},
		{http.MethodPost, "/ojs/v1/cron", h.register, body},
		{http.MethodGet, "/ojs/v1/cron/{name}", h.get, body},
		{http.MethodDelete, "/ojs/v1/cron/{name}", h.delete, body},
	}
}

type cronHandlers struct {
	s *server
	b CronBackend
}

// register is POST /ojs/v1/cron (13.2): 201 {"cron_job": {...}}.
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
	h.s.writeJSON(w, r, http.StatusCreated, map[string]any{"cron_job": out})
}

// decodeCron reads a cron registration in the binding's shape (13.2:
// name, cron, timezone, type, args, meta, options) or openapi.yaml's
// (expression, overlap_policy, job_template {type, args, meta, options});
// overlap_policy is read in both.
func decodeCron(o object) (ojs.CronJob, error) {
	var cj ojs.CronJob
	var err error
	if cj.Name, err = o.Str("name", true); err != nil {
		return cj, err
	}
	if cj.Cron, err = cronExpression(o); err != nil {
		return cj, err
	}
	if cj.Timezone, err = o.Str("timezone", false); err != nil {
		return cj, err
	}
	if cj.OverlapPolicy, err = o.Str("overlap_policy", false); err != nil {
		return cj, err
	}
	tpl, prefix := o, ""
	if raw, ok := o.Get("job_template"); ok {
		if _, top := o.Get("type"); top {
			return cj, invalid("job_template", "given alone: the job is either top-level (type, args, meta, options) or in job_template", "both")
		}
		if tpl, err = parseObject(raw); err != nil {
			return cj, invalid("job_template", "an object {type, args, meta, options}", describe(raw))
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

// cronExpression reads cron (the binding) or expression (openapi.yaml).
func cronExpression(o object) (string, error) {
	c, err := o.Str("cron", false)
	if err != nil {
		return "", err
	}
	e, err := o.Str("expression", false)
	if err != nil {
		return "", err
	}
	if c != "" && e != "" && c != e {
		return "", invalid("cron, expression", "one expression: cron and expression name the same setting", short(c)+" / "+short(e))
	}
	if c == "" {
		c = e
	}
	if c == "" {
		return "", invalid("cron", "a 5-field cron expression or a shorthand such as @daily (required)", "nothing")
	}
	return c, nil
}

func renamed(err error, field string) error {
	if ve, ok := err.(*ojs.ValidationError); ok {
		c := *ve
		c.Field = field
		return &c
	}
	return err
}

// list is GET /ojs/v1/cron (13.1): {"cron_jobs": [...], "pagination"}.
func (h cronHandlers) list(w http.ResponseWriter, r *http.Request) {
	page, err := parsePage(r.URL.Query(), cronDefaultLimit, cronMaxLimit)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if page.Cursor != "" {
		if page.Offset, err = decodeCursor(page.Cursor); err != nil {
			h.s.writeError(w, r, err)
			return
		}
	}
	res, err := h.b.CronJobs(r.Context(), page)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	if res.Pagination.HasMore {
		res.Pagination.NextCursor = encodeCursor(page.Offset + page.Limit)
	}
	h.s.writeJSON(w, r, http.StatusOK, res)
}

// get is GET /ojs/v1/cron/{name}: {"cron_job": {...}}. The binding's
// table has no such row; jetgate serves it beside DELETE for symmetry.
func (h cronHandlers) get(w http.ResponseWriter, r *http.Request) {
	cj, err := h.b.CronJob(r.Context(), mux.Vars(r)["name"])
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, map[string]any{"cron_job": cj})
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
