package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// DecodeFetch reads a fetch request. Absent visibility_timeout_ms leaves
// VisibilityTimeout at 0, so each job's own reservation period (or the
// backend's default) applies; the Go SDK never sends it.
func DecodeFetch(b []byte, maxCount int) (ojs.FetchRequest, error) {
	var req ojs.FetchRequest
	o, err := ParseObject(b)
	if err != nil {
		return req, err
	}
	queues, weights, err := FetchQueues(o)
	if err != nil {
		return req, err
	}
	group, err := o.Str("group", false)
	if err != nil {
		return req, err
	}
	if group != "" && !ojs.ValidGroupName(group) {
		return req, Invalid("group", `a group name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(Short(group)))
	}
	if len(queues) == 0 && group == "" {
		return req, Invalid("queues", "a non-empty array of queue names (or a worker group in group)", Describe(o["queues"]))
	}
	if err := CheckQueueNames("queues", queues); err != nil {
		return req, err
	}
	count, err := o.FetchCount(maxCount)
	if err != nil {
		return req, err
	}
	worker, err := o.ID("worker_id", false)
	if err != nil {
		return req, err
	}
	vt, err := o.Integer("visibility_timeout_ms", 0, 0, MaxVisibilityTimeoutMs)
	if err != nil {
		return req, err
	}
	strategy, err := o.Str("strategy", false)
	if err != nil {
		return req, err
	}
	switch strategy {
	case "", ojs.StrategyStrict, ojs.StrategyWeighted:
	default:
		return req, Invalid("strategy", `"strict" or "weighted"`, strconv.Quote(Short(strategy)))
	}
	if raw, ok := o.Get("weights"); ok {
		if weights, err = WeightsObject(raw, weights); err != nil {
			return req, err
		}
	}
	return ojs.FetchRequest{
		Queues:            Dedupe(queues),
		Count:             int(count),
		WorkerID:          worker,
		VisibilityTimeout: time.Duration(vt) * time.Millisecond,
		Strategy:          strategy,
		Weights:           weights,
		Group:             group,
	}, nil
}

// FetchQueues reads "queues": an array of names, or of {"name","weight"}
// objects (ojs-priority.md 7.3), which also give the weights.
func FetchQueues(o Object) ([]string, map[string]int, error) {
	raw, ok := o.Get("queues")
	if !ok {
		return nil, nil, nil
	}
	if names, _, err := StringArray("queues", raw); err == nil {
		return names, nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, Invalid("queues", "an array of queue names or of {name, weight} objects", Describe(raw))
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
		io, err := ParseObject(it)
		if err != nil || len(it) == 0 || it[0] != '{' {
			return nil, nil, Invalid(field, "a queue name or a {name, weight} Object", Describe(it))
		}
		if name, err = io.Str("name", true); err != nil {
			return nil, nil, PrefixField(field+".", err)
		}
		w, err := io.Integer("weight", 1, 0, ojs.MaxQueueWeight)
		if err != nil {
			return nil, nil, PrefixField(field+".", err)
		}
		names = append(names, name)
		weights[name] = int(w)
	}
	return names, weights, nil
}

// WeightsObject reads "weights": {queue: weight}, added to into.
func WeightsObject(raw json.RawMessage, into map[string]int) (map[string]int, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, Invalid("weights", "an Object of queue name to weight", Describe(raw))
	}
	if into == nil {
		into = map[string]int{}
	}
	for q, v := range m {
		w, err := Object{q: v}.Integer(q, 1, 0, ojs.MaxQueueWeight)
		if err != nil {
			return nil, PrefixField("weights.", err)
		}
		into[q] = int(w)
	}
	return into, nil
}

func DecodeAck(b []byte) (ojs.AckRequest, error) {
	var req ojs.AckRequest
	o, err := ParseObject(b)
	if err != nil {
		return req, err
	}
	if req.JobID, err = BodyJobID(o); err != nil {
		return req, err
	}
	if req.WorkerID, err = o.ID("worker_id", false); err != nil {
		return req, err
	}
	if req.Attempt, err = resultAttempt(o); err != nil {
		return req, err
	}
	if raw, ok := o.Get("result"); ok {
		req.Result = raw
	}
	return req, nil
}

func DecodeNack(b []byte) (ojs.NackRequest, error) {
	var req ojs.NackRequest
	o, err := ParseObject(b)
	if err != nil {
		return req, err
	}
	if req.JobID, err = BodyJobID(o); err != nil {
		return req, err
	}
	if req.WorkerID, err = o.ID("worker_id", false); err != nil {
		return req, err
	}
	if req.Attempt, err = resultAttempt(o); err != nil {
		return req, err
	}
	requeue, err := o.Boolean("requeue")
	if err != nil {
		return req, err
	}
	req.Requeue = requeue != nil && *requeue
	if _, given := o.Get("error"); req.Requeue && !given {
		// A requeue hands the job back; it reports no failure, so it
		// needs no error (issue 32). One given is read, and must be valid.
		return req, nil
	}
	req.Error, err = decodeJobError(o)
	return req, err
}

// resultAttempt reads the optional "attempt" of an ack or nack: the
// attempt the result is for, so that a result for an attempt the server
// already timed out is refused (409) rather than applied to a later one.
func resultAttempt(o Object) (int, error) {
	n, err := o.Integer("attempt", 0, 1, 1<<31-1)
	return int(n), err
}

// jobErrorRule is what a FAIL's "error" may be.
const jobErrorRule = "an Object with code and message, or a string or number taken as the message"

// decodeJobError reads the error of a FAIL. It accepts the binding's shape
// {"code","message","retryable","details"}, the worker protocol's
// {"type","message","backtrace"} (ojs-worker-protocol.md 7.2, 11.5), and a
// bare scalar taken as the message: a string as its text, a number as
// written ("error": 5 is the message "5"; issue 31 and docs/decisions.md,
// string and number alike). code and type are both optional: a worker's
// failure report is recorded rather than refused over a missing label.
func decodeJobError(o Object) (ojs.JobError, error) {
	var je ojs.JobError
	raw, ok := o.Get("error")
	if !ok {
		return je, Invalid("error", jobErrorRule, "nothing")
	}
	switch {
	case raw[0] == '"':
		if json.Unmarshal(raw, &je.Message) != nil {
			return je, Invalid("error", jobErrorRule, Describe(raw))
		}
		return je, nil
	case raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9':
		je.Message = string(raw) // a JSON number, as the worker wrote it
		return je, nil
	}
	eo, err := ParseObject(raw)
	if err != nil || raw[0] != '{' {
		return je, Invalid("error", jobErrorRule, Describe(raw))
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"code", &je.Code}, {"type", &je.Type}, {"message", &je.Message}} {
		if *f.dst, err = eo.Str(f.name, false); err != nil {
			return je, PrefixField("error.", err)
		}
	}
	if je.Retryable, err = eo.Boolean("retryable"); err != nil {
		return je, PrefixField("error.", err)
	}
	je.Details, _ = eo.Get("details")
	je.Backtrace, _ = eo.Get("backtrace")
	if raw, ok := eo.Get("rate_limit_until"); ok {
		// RL-R003: hold the job's rate limit key until then.
		if je.RateLimitUntil, err = ScheduleTime("error.rate_limit_until", raw); err != nil {
			return je, err
		}
	}
	return je, nil
}

func DecodeHeartbeat(b []byte) (ojs.HeartbeatRequest, error) {
	var req ojs.HeartbeatRequest
	o, err := ParseObject(b)
	if err != nil {
		return req, err
	}
	if req.WorkerID, err = o.ID("worker_id", true); err != nil {
		return req, err
	}
	if req.Worker, err = DecodeWorkerInfo(o); err != nil {
		return req, err
	}
	ids, err := activeJobIDs(o)
	if err != nil {
		return req, err
	}
	req.JobIDs = ids
	vt, err := o.Integer("visibility_timeout_ms", 0, 0, MaxVisibilityTimeoutMs)
	req.VisibilityTimeout = time.Duration(vt) * time.Millisecond
	return req, err
}

// activeJobIDs merges active_jobs (the binding's array of ids; the worker
// protocol's count, which carries no ids) and active_job_ids, in order and
// without repeats. Ids that are not job ids cannot be extended and are
// dropped, so they never reach the backend.
func activeJobIDs(o Object) ([]string, error) {
	var ids []string
	if raw, ok := o.Get("active_jobs"); ok {
		if raw[0] == '[' {
			list, _, err := StringArray("active_jobs", raw)
			if err != nil {
				return nil, err
			}
			ids = append(ids, list...)
		} else if _, err := o.Integer("active_jobs", 0, 0, 1<<31-1); err != nil {
			return nil, Invalid("active_jobs", "an integer >= 0 or an array of job ids", Describe(raw))
		}
	}
	list, _, err := o.Strings("active_job_ids")
	if err != nil {
		return nil, err
	}
	ids = append(ids, list...)
	valid := ids[:0]
	for _, id := range Dedupe(ids) {
		if ojs.ValidID(id) == nil {
			valid = append(valid, id)
		}
	}
	return valid, nil
}

// BodyJobID reads "job_id". A value that is not a job id cannot name a job:
// 404, like an unknown id (see pathJobID).
func BodyJobID(o Object) (string, error) {
	id, err := o.ID("job_id", true)
	if err != nil {
		return "", err
	}
	if ojs.ValidID(id) != nil {
		return "", &ojs.NotFoundError{Resource: "job", ID: Short(id)}
	}
	return id, nil
}

// DecodeWorkerInfo reads what a heartbeat says about its worker
// (ojs-worker-protocol.md 4.2; ojs-fair-scheduling.md 6.2 "pool"):
// "state" is running, quiet, drain or terminate.
func DecodeWorkerInfo(o Object) (ojs.WorkerInfo, error) {
	in := ojs.WorkerInfo{ActiveJobs: -1}
	var err error
	if in.State, err = o.Str("state", false); err != nil {
		return in, err
	}
	if in.State != "" && !ojs.ValidWorkerState(in.State) {
		return in, Invalid("state", `one of "running", "quiet", "drain", "terminate"`, strconv.Quote(Short(in.State)))
	}
	if raw, ok := o.Get("active_jobs"); ok && raw[0] != '[' {
		n, err := o.Integer("active_jobs", 0, 0, 1<<31-1)
		if err != nil {
			return in, err
		}
		in.ActiveJobs = int(n)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"hostname", &in.Hostname}, {"version", &in.Version}, {"pool", &in.Pool}} {
		if *f.dst, err = o.ID(f.name, false); err != nil {
			return in, err
		}
	}
	if in.Pool != "" && !ojs.ValidGroupName(in.Pool) {
		return in, Invalid("pool", `a pool name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(Short(in.Pool)))
	}
	pid, err := o.Integer("pid", 0, 0, 1<<31-1)
	if err != nil {
		return in, err
	}
	conc, err := o.Integer("concurrency", 0, 0, 1<<31-1)
	if err != nil {
		return in, err
	}
	in.PID, in.Concurrency = int(pid), int(conc)
	if in.Queues, _, err = o.Strings("queues"); err != nil {
		return in, err
	}
	if err := CheckQueueNames("queues", in.Queues); err != nil {
		return in, err
	}
	if in.Labels, _, err = o.Strings("labels"); err != nil {
		return in, err
	}
	if raw, ok := o.Get("started_at"); ok {
		var t ojs.Time
		if err := json.Unmarshal(raw, &t); err != nil {
			return in, Invalid("started_at", "an RFC 3339 timestamp", Describe(raw))
		}
		in.StartedAt = &t
	}
	if raw, ok := o.Get("metadata"); ok {
		if raw[0] != '{' {
			return in, Invalid("metadata", "a JSON Object", Describe(raw))
		}
		if len(raw) > MaxWorkerMetadataBytes {
			// Kept in the worker's record with every heartbeat: a size
			// limit is a 413 (issue 31), not a heartbeat whose worker
			// record silently fails to be written.
			return in, &ojs.TooLargeError{Field: "metadata", What: "worker metadata", Limit: MaxWorkerMetadataBytes,
				Size: int64(len(raw)), Hint: "Send at most 16 KiB of worker metadata."}
		}
		in.Metadata = raw
	}
	return in, nil
}

const MaxQueueWeight = ojs.MaxQueueWeight

// maxBlockTimeoutSeconds bounds OJS-Block-Timeout; the backend caps the
// wait further with its own maximum.
const maxBlockTimeoutSeconds = 24 * 60 * 60

// EnqueueContext prepares an enqueue's context: the OJS-Block-Timeout
// value blockTimeout (seconds, fractions allowed; "" for none, sent as an
// HTTP or NATS header) and a pressure report for the reply's headers.
func EnqueueContext(ctx context.Context, blockTimeout string) (context.Context, *ojs.PressureReport, error) {
	ctx, rep := ojs.WithPressureReport(ctx)
	v := strings.TrimSpace(blockTimeout)
	if v == "" {
		return ctx, rep, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || secs > maxBlockTimeoutSeconds || math.IsNaN(secs) {
		return nil, nil, &Error{Status: http.StatusBadRequest, Code: ojs.CodeInvalidRequest,
			Message:  "header " + HeaderBlockTimeout + " must be a number of seconds between 0 and 86400",
			Details:  map[string]any{"header": HeaderBlockTimeout, "received": Short(v)},
			Sentinel: ojs.ErrInvalid}
	}
	return ojs.WithBlockTimeout(ctx, time.Duration(secs*float64(time.Second))), rep, nil
}

// DecodeFetchWait reads a NATS fetch's "wait_ms" (issue 19): how long the
// fetch may wait for jobs, from 0 (the default: answer at once) to max.
func DecodeFetchWait(b []byte, max time.Duration) (time.Duration, error) {
	o, err := ParseObject(b)
	if err != nil {
		return 0, err
	}
	ms, err := o.Integer("wait_ms", 0, 0, max.Milliseconds())
	return time.Duration(ms) * time.Millisecond, err
}

// MaxBatchItems bounds the items of a NATS ackbatch or nackbatch.
const MaxBatchItems = 1000

// DecodeBatchItems reads a batch worker call's list field ("acks" or
// "nacks"): a non-empty array of at most MaxBatchItems objects, returned
// raw so each item is decoded (and may fail) on its own.
func DecodeBatchItems(b []byte, field string) ([]json.RawMessage, error) {
	o, err := ParseObject(b)
	if err != nil {
		return nil, err
	}
	raw, ok := o.Get(field)
	if !ok {
		return nil, Invalid(field, fmt.Sprintf("an array of 1 to %d objects", MaxBatchItems), "nothing")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 || len(items) > MaxBatchItems {
		got := Describe(raw)
		if err == nil {
			got = fmt.Sprintf("%d items", len(items))
		}
		return nil, Invalid(field, fmt.Sprintf("an array of 1 to %d objects", MaxBatchItems), got)
	}
	return items, nil
}

// ItemJobID is the job_id of a batch item as sent, for its result even
// when the item does not decode ("" if it has none).
func ItemJobID(item []byte) string {
	var v struct {
		JobID any `json:"job_id"`
	}
	if json.Unmarshal(item, &v) != nil {
		return ""
	}
	s, _ := v.JobID.(string)
	return s
}
