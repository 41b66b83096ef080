package httpbind

import (
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// listDeadLetter is GET /ojs/v1/dead-letter (12.1):
// ?queue=&limit=&offset=&cursor= -> {"jobs":[...],"pagination":{...}}.
// Paging is the backend's: it receives the cursor as sent and returns the
// next one.
func (s *server) listDeadLetter(w http.ResponseWriter, r *http.Request) {
	query, err := wire.DeadLetterQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.ListDeadLetter(r.Context(), query)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ojs.JobPage{Jobs: publicJobs(res.Jobs), Pagination: res.Pagination})
}

// retryDeadLetter is POST /ojs/v1/dead-letter/{id}/retry (12.2):
// {"job": ...} back in the available state.
func (s *server) retryDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := pathJobID(r, "dead_letter_job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.b.RetryDeadLetter(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, jobResponse{Job: job.Public()})
}

// deleteDeadLetter is DELETE /ojs/v1/dead-letter/{id} (12.3): 200
// {"deleted":true,"job_id"}, what the official Go client reads.
func (s *server) deleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, ok := s.deleteDead(w, r)
	if ok {
		s.writeJSON(w, r, http.StatusOK, wire.DeletedReply{Deleted: true, JobID: id})
	}
}

// adminDeleteDeadLetter is DELETE /ojs/v1/admin/dead-letter/{id}: the same
// operation, answered 204 without a body as admin dashboards expect of a
// delete (issue 32).
func (s *server) adminDeleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.deleteDead(w, r); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// deleteDead deletes the dead letter job of the path; on failure it has
// answered the error.
func (s *server) deleteDead(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := pathJobID(r, "dead_letter_job")
	if err == nil {
		err = s.b.DeleteDeadLetter(r.Context(), id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return id, true
}
