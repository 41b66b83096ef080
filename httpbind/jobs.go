package httpbind

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// jobResponse is {"job": {...}}.
type jobResponse = wire.JobReply

var (
	publicJobs = wire.PublicJobs
	withField  = wire.WithField
)

// enqueue is PUSH, POST /ojs/v1/jobs (ojs-http-binding.md 9.1): 201 with a
// Location header and {"job": ...}.
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := wire.DecodeJob(body)
	if err != nil {
		s.writeError(w, r, err)
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
		s.writeJSON(w, r, http.StatusOK, wire.DeduplicatedReply{Job: dd.Job.Public(), Deduplicated: true})
		return
	}
	if err != nil {
		s.writeError(w, r, inEnvelope(err))
		return
	}
	writePressure(w, pressure)
	w.Header().Set("Location", "/ojs/v1/jobs/"+url.PathEscape(job.ID))
	s.writeJobs(w, r, http.StatusCreated, "job", job, nil, false)
}

// enqueueBatch is PUSH (batch), POST /ojs/v1/jobs/batch (9.2): all or
// nothing, 201 {"jobs": [...], "count": n}.
func (s *server) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, err := wire.DecodeBatch(body)
	if err != nil {
		s.writeError(w, r, err)
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
	s.writeJobs(w, r, http.StatusCreated, "jobs", nil, jobs, true) // wire.BatchReply
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

// pathJobID returns the {id} of the path, checked by wire.JobID (404 for
// what cannot be a job id).
func pathJobID(r *http.Request, resource string) (string, error) {
	return wire.JobID(mux.Vars(r)["id"], resource)
}
