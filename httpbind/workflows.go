package httpbind

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// WorkflowBackend is what the workflow endpoints ask of the layer below
// (ojs-http-binding.md 14; admission/workflow). A Backend that also
// implements it gets the routes.
type WorkflowBackend interface {
	CreateWorkflow(ctx context.Context, spec *ojs.WorkflowSpec) (*ojs.Workflow, error)
	Workflow(ctx context.Context, id string) (*ojs.Workflow, error)
	CancelWorkflow(ctx context.Context, id string) (*ojs.Workflow, error)
	// Workflows lists workflows, one page of summaries (issue 32).
	Workflows(ctx context.Context, q ojs.WorkflowListQuery) (*ojs.WorkflowList, error)
}

func (s *server) workflowRoutes() []route {
	wb, ok := s.b.(WorkflowBackend)
	if !ok {
		return nil
	}
	if _, set := s.cfg.Capabilities["workflows"]; !set {
		// The manifest declares what is served (Config.Capabilities wins).
		s.manifest.Capabilities["workflows"] = true
	}
	body := s.cfg.MaxBodyBytes
	h := workflowHandlers{s: s, b: wb}
	return []route{
		{http.MethodPost, "/ojs/v1/workflows", h.create, body},
		{http.MethodGet, "/ojs/v1/workflows", h.list, body},
		{http.MethodGet, "/ojs/v1/workflows/{id}", h.get, body},
		{http.MethodDelete, "/ojs/v1/workflows/{id}", h.cancel, body},
	}
}

type workflowHandlers struct {
	s *server
	b WorkflowBackend
}

// workflowBody is {"workflow": ...} (14.1-14.3).
type workflowBody = wire.WorkflowReply

// create is POST /ojs/v1/workflows (14.1): 201 with Location.
func (h workflowHandlers) create(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	spec, err := ojs.ParseWorkflow(b)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	wf, err := h.b.CreateWorkflow(r.Context(), spec)
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/ojs/v1/workflows/"+url.PathEscape(wf.ID))
	h.s.writeJSON(w, r, http.StatusCreated, workflowBody{Workflow: wf})
}

// list is GET /ojs/v1/workflows?page&per_page[&state][&cursor] (issue
// 32): {"workflows": [...], "pagination": {"page","per_page","has_more",
// "next_cursor"?}}.
func (h workflowHandlers) list(w http.ResponseWriter, r *http.Request) {
	q, err := wire.ParseWorkflowListQuery(r.URL.Query())
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	res, err := h.b.Workflows(r.Context(), q)
	h.s.answer(w, r, res, err)
}

// get is GET /ojs/v1/workflows/{id} (14.2).
func (h workflowHandlers) get(w http.ResponseWriter, r *http.Request) {
	wf, err := h.b.Workflow(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, workflowBody{Workflow: wf})
}

// cancel is DELETE /ojs/v1/workflows/{id} (14.3): 409 when it has ended.
func (h workflowHandlers) cancel(w http.ResponseWriter, r *http.Request) {
	wf, err := h.b.CancelWorkflow(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		h.s.writeError(w, r, err)
		return
	}
	h.s.writeJSON(w, r, http.StatusOK, workflowBody{Workflow: wf})
}
