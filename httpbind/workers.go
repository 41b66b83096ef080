package httpbind

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
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
	s.writeJobs(w, r, http.StatusOK, "jobs", nil, publicJobs(jobs))
}

// decodeFetch reads a fetch request. Absent visibility_timeout_ms leaves
// VisibilityTimeout at 0, so each job's own reservation period (or the
// backend's default) applies; the Go SDK never sends it.
func (s *server) decodeFetch(r *http.Request) (ojs.FetchRequest, error) {
	var req ojs.FetchRequest
	o, err := readObject(r)
	if err != nil {
		return req, err
	}
	queues, weights, err := fetchQueues(o)
	if err != nil {
		return req, err
	}
	group, err := o.str("group", false)
	if err != nil {
		return req, err
	}
	if group != "" && !ojs.ValidGroupName(group) {
		return req, invalid("group", `a group name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(short(group)))
	}
	if len(queues) == 0 && group == "" {
		return req, invalid("queues", "a non-empty array of queue names (or a worker group in group)", describe(o["queues"]))
	}
	for i, q := range queues {
		if err := checkQueueName(fmt.Sprintf("queues[%d]", i), q); err != nil {
			return req, err
		}
	}
	count, err := o.fetchCount(s.cfg.MaxFetchCount)
	if err != nil {
		return req, err
	}
	worker, err := o.id("worker_id", false)
	if err != nil {
		return req, err
	}
	vt, err := o.integer("visibility_timeout_ms", 0, 0, maxVisibilityTimeoutMs)
	if err != nil {
		return req, err
	}
	strategy, err := o.str("strategy", false)
	if err != nil {
		return req, err
	}
	switch strategy {
	case "", ojs.StrategyStrict, ojs.StrategyWeighted:
	default:
		return req, invalid("strategy", `"strict" or "weighted"`, strconv.Quote(short(strategy)))
	}
	if raw, ok := o.get("weights"); ok {
		if weights, err = weightsObject(raw, weights); err != nil {
			return req, err
		}
	}
	return ojs.FetchRequest{
		Queues:            dedupe(queues),
		Count:             int(count),
		WorkerID:          worker,
		VisibilityTimeout: time.Duration(vt) * time.Millisecond,
		Strategy:          strategy,
		Weights:           weights,
		Group:             group,
	}, nil
}

// maxQueueWeight bounds a queue's weight in a weighted fetch.
const maxQueueWeight = ojs.MaxQueueWeight

// fetchQueues reads "queues": an array of names, or of {"name","weight"}
// objects (ojs-priority.md 7.3), which also give the weights.
func fetchQueues(o object) ([]string, map[string]int, error) {
	raw, ok := o.get("queues")
	if !ok {
		return nil, nil, nil
	}
	if names, _, err := stringArray("queues", raw); err == nil {
		return names, nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, invalid("queues", "an array of queue names or of {name, weight} objects", describe(raw))
	}
	names := make([]string, 0, len(items))
	weights := map[string]int{}
	for i, it := range items {
		field := fmt.Sprintf("queues[%d]", i)
		var name string
		if json.Unmarshal(it, &name) == nil {
			names = append(names, name)
			continue
		}
		io, err := parseObject(it)
		if err != nil || len(it) == 0 || it[0] != '{' {
			return nil, nil, invalid(field, "a queue name or a {name, weight} object", describe(it))
		}
		if name, err = io.str("name", true); err != nil {
			return nil, nil, prefixField(field+".", err)
		}
		w, err := io.integer("weight", 1, 0, maxQueueWeight)
		if err != nil {
			return nil, nil, prefixField(field+".", err)
		}
		names = append(names, name)
		weights[name] = int(w)
	}
	return names, weights, nil
}

// weightsObject reads "weights": {queue: weight}, added to into.
func weightsObject(raw json.RawMessage, into map[string]int) (map[string]int, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, invalid("weights", "an object of queue name to weight", describe(raw))
	}
	if into == nil {
		into = map[string]int{}
	}
	for q, v := range m {
		w, err := object{q: v}.integer(q, 1, 0, maxQueueWeight)
		if err != nil {
			return nil, prefixField("weights.", err)
		}
		into[q] = int(w)
	}
	return into, nil
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
	s.writeJSON(w, r, http.StatusOK, struct {
		Acknowledged bool `json:"acknowledged"`
		*ojs.AckResult
	}{true, res})
}

func decodeAck(r *http.Request) (ojs.AckRequest, error) {
	var req ojs.AckRequest
	o, err := readObject(r)
	if err != nil {
		return req, err
	}
	if req.JobID, err = bodyJobID(o); err != nil {
		return req, err
	}
	if req.WorkerID, err = o.id("worker_id", false); err != nil {
		return req, err
	}
	if req.Attempt, err = resultAttempt(o); err != nil {
		return req, err
	}
	if raw, ok := o.get("result"); ok {
		req.Result = raw
	}
	return req, nil
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

func decodeNack(r *http.Request) (ojs.NackRequest, error) {
	var req ojs.NackRequest
	o, err := readObject(r)
	if err != nil {
		return req, err
	}
	if req.JobID, err = bodyJobID(o); err != nil {
		return req, err
	}
	if req.WorkerID, err = o.id("worker_id", false); err != nil {
		return req, err
	}
	if req.Attempt, err = resultAttempt(o); err != nil {
		return req, err
	}
	req.Error, err = decodeJobError(o)
	return req, err
}

// resultAttempt reads the optional "attempt" of an ack or nack: the
// attempt the result is for, so that a result for an attempt the server
// already timed out is refused (409) rather than applied to a later one.
func resultAttempt(o object) (int, error) {
	n, err := o.integer("attempt", 0, 1, 1<<31-1)
	return int(n), err
}

// decodeJobError reads the error of a FAIL. It accepts the binding's shape
// {"code","message","retryable","details"}, the worker protocol's
// {"type","message","backtrace"} (ojs-worker-protocol.md 7.2, 11.5), and a
// bare string taken as the message. code and type are both optional: a
// worker's failure report is recorded rather than refused over a missing
// label.
func decodeJobError(o object) (ojs.JobError, error) {
	var je ojs.JobError
	raw, ok := o.get("error")
	if !ok {
		return je, invalid("error", "an object with code and message", "nothing")
	}
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &je.Message)
		return je, err
	}
	eo, err := parseObject(raw)
	if err != nil || raw[0] != '{' {
		return je, invalid("error", "an object with code and message", describe(raw))
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"code", &je.Code}, {"type", &je.Type}, {"message", &je.Message}} {
		if *f.dst, err = eo.str(f.name, false); err != nil {
			return je, prefixField("error.", err)
		}
	}
	if je.Retryable, err = eo.boolean("retryable"); err != nil {
		return je, prefixField("error.", err)
	}
	je.Details, _ = eo.get("details")
	je.Backtrace, _ = eo.get("backtrace")
	if raw, ok := eo.get("rate_limit_until"); ok {
		// RL-R003: hold the job's rate limit key until then.
		var t ojs.Time
		if err := json.Unmarshal(raw, &t); err != nil {
			return je, invalid("error.rate_limit_until", "an RFC 3339 time", describe(raw))
		}
		je.RateLimitUntil = &t
	}
	return je, nil
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
	if res == nil {
		res = &ojs.HeartbeatResult{}
	}
	out := struct {
		State      string    `json:"state"`
		Extended   []string  `json:"jobs_extended"`
		Cancel     []string  `json:"jobs_to_cancel"`
		ServerTime *ojs.Time `json:"server_time"`
	}{res.State, res.Extended, res.Cancel, ojs.NewTime(res.ServerTime)}
	if out.State == "" {
		out.State = ojs.WorkerRunning
	}
	if out.Extended == nil {
		out.Extended = []string{}
	}
	if out.Cancel == nil {
		out.Cancel = []string{}
	}
	if res.ServerTime.IsZero() {
		out.ServerTime = ojs.NewTime(time.Now())
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func decodeHeartbeat(r *http.Request) (ojs.HeartbeatRequest, error) {
	var req ojs.HeartbeatRequest
	o, err := readObject(r)
	if err != nil {
		return req, err
	}
	if req.WorkerID, err = o.id("worker_id", true); err != nil {
		return req, err
	}
	if req.Worker, err = decodeWorkerInfo(o); err != nil {
		return req, err
	}
	ids, err := activeJobIDs(o)
	if err != nil {
		return req, err
	}
	req.JobIDs = ids
	vt, err := o.integer("visibility_timeout_ms", 0, 0, maxVisibilityTimeoutMs)
	req.VisibilityTimeout = time.Duration(vt) * time.Millisecond
	return req, err
}

// activeJobIDs merges active_jobs (the binding's array of ids; the worker
// protocol's count, which carries no ids) and active_job_ids, in order and
// without repeats. Ids that are not job ids cannot be extended and are
// dropped, so they never reach the backend.
func activeJobIDs(o object) ([]string, error) {
	var ids []string
	if raw, ok := o.get("active_jobs"); ok {
		if raw[0] == '[' {
			list, _, err := stringArray("active_jobs", raw)
			if err != nil {
				return nil, err
			}
			ids = append(ids, list...)
		} else if _, err := o.integer("active_jobs", 0, 0, 1<<31-1); err != nil {
			return nil, invalid("active_jobs", "an integer >= 0 or an array of job ids", describe(raw))
		}
	}
	list, _, err := o.strings("active_job_ids")
	if err != nil {
		return nil, err
	}
	ids = append(ids, list...)
	valid := ids[:0]
	for _, id := range dedupe(ids) {
		if ojs.ValidID(id) == nil {
			valid = append(valid, id)
		}
	}
	return valid, nil
}

// bodyJobID reads "job_id". A value that is not a job id cannot name a job:
// 404, like an unknown id (see pathJobID).
func bodyJobID(o object) (string, error) {
	id, err := o.id("job_id", true)
	if err != nil {
		return "", err
	}
	if ojs.ValidID(id) != nil {
		return "", &ojs.NotFoundError{Resource: "job", ID: short(id)}
	}
	return id, nil
}

// prefixField puts a parent path in front of a ValidationError's field.
func prefixField(prefix string, err error) error {
	if ve, ok := err.(*ojs.ValidationError); ok {
		c := *ve
		c.Field = prefix + c.Field
		return &c
	}
	return err
}
