package httpbind

import (
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs/wire"
	"github.com/jetgate/jetgate/admission/tracing"
)

// fetch is FETCH, POST /ojs/v1/workers/fetch (ojs-http-binding.md 10.1):
// {"queues","count"?,"worker_id"?,"visibility_timeout_ms"?} -> {"jobs":[...]},
// an empty list when there is no work. The priority extension adds
// "strategy", "weights" and "group" (a worker group whose stored defaults
// fill in what the fetch leaves out; "queues" may then be omitted).
func (s *server) fetch(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeFetch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobs, err := s.b.Fetch(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tracing.LinkJobs(r.Context(), jobs)
	s.writeJobs(w, r, http.StatusOK, "jobs", nil, jobs, false)
}

// ack is ACK, POST /ojs/v1/workers/ack (10.2): {"job_id","result"?} ->
// {"acknowledged":true,"job_id","state","completed_at"}. worker_id is
// optional: the official clients do not send it.
//
// result is passed on as any JSON value; the clients expect an object when
// they read it back, which is the producer's concern, not a wire error.
func (s *server) ack(w http.ResponseWriter, r *http.Request) {
	req, err := decodeAck(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.Ack(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wire.NewAckReply(res))
}

// nack is FAIL, POST /ojs/v1/workers/nack (10.3): {"job_id","error"} ->
// {"job_id","state","attempt","max_attempts","next_attempt_at"|"discarded_at"}.
func (s *server) nack(w http.ResponseWriter, r *http.Request) {
	req, err := decodeNack(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.Nack(r.Context(), req)
	s.answer(w, r, res, err)
}

// heartbeat is BEAT, POST /ojs/v1/workers/heartbeat (10.4, spec/README.md
// decision 4): {"worker_id","active_jobs"?: int | [ids],
// "active_job_ids"?: [ids], "state"?, "visibility_timeout_ms"?} ->
// {"state","jobs_extended","jobs_to_cancel","server_time"}; jobs_to_cancel
// lists the jobs past their execution timeout (ojs-timeouts.md 5.4).
func (s *server) heartbeat(w http.ResponseWriter, r *http.Request) {
	req, err := decodeHeartbeat(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.Heartbeat(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wire.NewHeartbeatReply(res))
}
