package httpbind

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
)

// jobResponse is {"job": {...}}.
type jobResponse struct {
	Job *ojs.Job `json:"job"`
}

// enqueue is PUSH, POST /ojs/v1/jobs (ojs-http-binding.md 9.1): 201 with a
// Location header and {"job": ...}.
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := ojs.ParseJob(body)
	if err != nil {
		s.writeError(w, r, inEnvelope(err))
		return
	}
	ctx, pressure, err := enqueueContext(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err = s.b.Enqueue(ctx, job)
	if dd, ok := errors.AsType[*ojs.DeduplicatedError](err); ok {
		// A unique job's duplicate answered with the existing job
		// (ojs-unique-jobs.md 5.4: 200, not 201).
		writePressure(w, pressure)
		s.writeJSON(w, r, http.StatusOK, struct {
			Job          *ojs.Job `json:"job"`
			Deduplicated bool     `json:"deduplicated"`
		}{dd.Job.Public(), true})
		return
	}
	if err != nil {
		s.writeError(w, r, inEnvelope(err))
		return
	}
	writePressure(w, pressure)
	w.Header().Set("Location", "/ojs/v1/jobs/"+url.PathEscape(job.ID))
	s.writeJobs(w, r, http.StatusCreated, "job", job.Public(), nil)
}

// enqueueBatch is PUSH (batch), POST /ojs/v1/jobs/batch (9.2): all or
// nothing, 201 {"jobs": [...], "count": n}.
func (s *server) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, err := ojs.ParseBatch(body)
	if err != nil {
		s.writeError(w, r, inEnvelope(err))
		return
	}
	ctx, pressure, err := enqueueContext(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, err = s.b.EnqueueBatch(ctx, jobs)
	if err != nil {
		s.writeError(w, r, inEnvelope(err))
		return
	}
	writePressure(w, pressure)
	out := publicJobs(jobs)
	s.writeJSON(w, r, http.StatusCreated, struct {
		Jobs  []*ojs.Job `json:"jobs"`
		Count int        `json:"count"`
	}{out, len(out)})
}

// getJob is INFO, GET /ojs/v1/jobs/{id} (9.3).
func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.b.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, jobResponse{Job: job.Public()})
}

// cancelJob is CANCEL, DELETE /ojs/v1/jobs/{id} (9.4): the cancelled job
// with "previous_state".
func (s *server) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, prev, err := s.b.Cancel(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, jobResponse{Job: withField(job, "previous_state", prev)})
}

// activateJob is ACTIVATE, POST /ojs/v1/jobs/{id}/activate (9.5). Only a
// pending job can be activated, so previous_state is always "pending".
func (s *server) activateJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.b.Activate(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, jobResponse{Job: withField(job, "previous_state", ojs.StatePending)})
}

// pathJobID returns the {id} of the path. Job ids are UUIDv7 (ojs-core.md
// 5.1) and every stored job was validated on enqueue, so anything else
// cannot name a job: it answers 404 without reaching the backend.
func pathJobID(r *http.Request, resource string) (string, error) {
	id := mux.Vars(r)["id"]
	if ojs.ValidID(id) != nil {
		return "", &ojs.NotFoundError{Resource: resource, ID: short(id)}
	}
	return id, nil
}

// publicJobs renders jobs for a response: never null, no bookkeeping.
func publicJobs(jobs []*ojs.Job) []*ojs.Job {
	out := make([]*ojs.Job, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			out = append(out, j.Public())
		}
	}
	return out
}

// withField returns the public form of j with one more top-level field,
// without touching j (its Extra map is copied, not shared).
func withField(j *ojs.Job, key string, v any) *ojs.Job {
	p := j.Public()
	b, err := json.Marshal(v)
	if err != nil {
		return p
	}
	extra := make(map[string]json.RawMessage, len(p.Extra)+1)
	maps.Copy(extra, p.Extra)
	extra[key] = b
	p.Extra = extra
	return p
}
