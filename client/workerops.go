package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// FetchRequest is a worker's FETCH.
type FetchRequest struct {
	Queues   []string
	Count    int
	WorkerID string
	// Wait, over NATS, lets the server answer as soon as Count jobs are
	// claimed or Wait passes (wait_ms); over HTTP it is ignored.
	Wait time.Duration
	// VisibilityTimeout overrides the jobs' heartbeat timeout when > 0.
	VisibilityTimeout time.Duration
}

// Fetch claims up to Count jobs; none is an empty list, not an error.
func (c *Client) Fetch(ctx context.Context, req FetchRequest) ([]*Job, error) {
	body := map[string]any{"queues": req.Queues, "count": max(req.Count, 1)}
	if req.WorkerID != "" {
		body["worker_id"] = req.WorkerID
	}
	if req.VisibilityTimeout > 0 {
		body["visibility_timeout_ms"] = ms(req.VisibilityTimeout)
	}
	if c.t.nats() && req.Wait > 0 {
		body["wait_ms"] = ms(req.Wait)
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < req.Wait+c.cfg.Timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, req.Wait+c.cfg.Timeout)
			defer cancel()
		}
	}
	b, _ := json.Marshal(body)
	var out struct {
		Jobs []*Job `json:"jobs"`
	}
	if _, err := c.call(ctx, &request{op: "workers.fetch", method: http.MethodPost, path: "/ojs/v1/workers/fetch", body: b}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Ack is a worker's ACK of one job: the attempt it answers (0: unsaid),
// the worker (optional) and the result (any JSON value; nil: none).
type Ack struct {
	JobID    string `json:"job_id"`
	Attempt  int    `json:"attempt,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
	Result   any    `json:"result,omitempty"`
}

// Nack is a worker's FAIL of one job. With Requeue the worker hands the
// job back instead (a worker shutting down): it is available again at
// once, the attempt is not counted and Error is not recorded.
type Nack struct {
	JobID    string   `json:"job_id"`
	Attempt  int      `json:"attempt,omitempty"`
	WorkerID string   `json:"worker_id,omitempty"`
	Error    JobError `json:"error"`
	Requeue  bool     `json:"requeue,omitempty"`
}

// Result is the server's answer to one ack or nack: the job's state
// after it, or the error of that item. CompletedAt is when the job
// reached its terminal state (completed or discarded); RetryDelayMs, for
// a retryable job, the milliseconds until its retry is due; Requeued
// answers a requeue.
type Result struct {
	JobID         string     `json:"job_id"`
	State         string     `json:"state,omitempty"`
	Attempt       int        `json:"attempt,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	CompletedAt   *time.Time `json:"completed_at,omitempty"`
	RetryDelayMs  *int64     `json:"retry_delay_ms,omitempty"`
	Requeued      bool       `json:"requeued,omitempty"`
	// Err is the item's error (a batch answers per item).
	Err *Error `json:"-"`
}

// AckJob acknowledges one job.
func (c *Client) AckJob(ctx context.Context, a Ack) (*Result, error) {
	return c.report(ctx, "workers.ack", "/ojs/v1/workers/ack", a)
}

// NackJob fails one job.
func (c *Client) NackJob(ctx context.Context, n Nack) (*Result, error) {
	return c.report(ctx, "workers.nack", "/ojs/v1/workers/nack", n)
}

func (c *Client) report(ctx context.Context, op, path string, v any) (*Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out Result
	if _, err := c.call(ctx, &request{op: op, method: http.MethodPost, path: path, body: b}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AckBatch acknowledges many jobs in one request (NATS only: over HTTP
// it sends one request per job). Results are per item, in order.
func (c *Client) AckBatch(ctx context.Context, acks []Ack) ([]Result, error) {
	if !c.t.nats() {
		return each(acks, func(a Ack) (*Result, error) { return c.AckJob(ctx, a) }, func(a Ack) string { return a.JobID })
	}
	return c.batch(ctx, "workers.ackbatch", map[string]any{"acks": acks})
}

// NackBatch fails many jobs in one request (NATS only, as AckBatch).
func (c *Client) NackBatch(ctx context.Context, nacks []Nack) ([]Result, error) {
	if !c.t.nats() {
		return each(nacks, func(n Nack) (*Result, error) { return c.NackJob(ctx, n) }, func(n Nack) string { return n.JobID })
	}
	return c.batch(ctx, "workers.nackbatch", map[string]any{"nacks": nacks})
}

// batchItem is one item of an ackbatch / nackbatch answer.
type batchItem struct {
	Result
	Status int `json:"status"`
	Error  *struct {
		Code      string         `json:"code"`
		Type      string         `json:"type"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
		Details   map[string]any `json:"details"`
		DocsURL   string         `json:"docs_url"`
	} `json:"error"`
}

func (c *Client) batch(ctx context.Context, op string, body any) ([]Result, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []batchItem `json:"results"`
	}
	if _, err := c.call(ctx, &request{op: op, body: b}, &out); err != nil {
		return nil, err
	}
	res := make([]Result, len(out.Results))
	for i, it := range out.Results {
		res[i] = it.Result
		if it.Error != nil {
			status := it.Status
			if status < 400 {
				status = statusOf(it.Error.Code)
			}
			res[i].Err = &Error{Status: status, Code: it.Error.Code, Type: it.Error.Type, Message: it.Error.Message,
				Retryable: it.Error.Retryable, Details: it.Error.Details, DocsURL: it.Error.DocsURL}
		}
	}
	return res, nil
}

// statusOf is the HTTP status of an OJS code, for per-item errors that
// carry no status.
func statusOf(code string) int {
	switch code {
	case "not_found":
		return http.StatusNotFound
	case "conflict", "duplicate":
		return http.StatusConflict
	case "invalid_request", "invalid_payload":
		return http.StatusBadRequest
	case "unauthorized":
		return http.StatusUnauthorized
	case "forbidden":
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func each[T any](items []T, do func(T) (*Result, error), id func(T) string) ([]Result, error) {
	out := make([]Result, len(items))
	for i, it := range items {
		r, err := do(it)
		switch e, ok := err.(*Error); {
		case err == nil:
			out[i] = *r
		case ok:
			out[i] = Result{JobID: id(it), Err: e}
		default:
			return nil, err
		}
	}
	return out, nil
}

// HeartbeatRequest is a worker's BEAT.
type HeartbeatRequest struct {
	WorkerID string
	// State is the worker's lifecycle state: running, quiet or terminate.
	State        string
	ActiveJobIDs []string
	Queues       []string
	Concurrency  int
	Hostname     string
	PID          int
}

// HeartbeatResult is the server's answer to a BEAT: the state it directs
// (running, quiet, terminate), the jobs whose deadline it extended (a
// job sent but not extended is no longer this worker's), and the jobs
// past their execution timeout, to cancel within their grace period.
type HeartbeatResult struct {
	State    string   `json:"state"`
	Extended []string `json:"jobs_extended"`
	Cancel   []string `json:"jobs_to_cancel"`
}

// Heartbeat sends a BEAT.
func (c *Client) Heartbeat(ctx context.Context, req HeartbeatRequest) (*HeartbeatResult, error) {
	ids := req.ActiveJobIDs
	if ids == nil {
		ids = []string{}
	}
	body := map[string]any{"worker_id": req.WorkerID, "state": req.State, "active_jobs": len(ids), "active_job_ids": ids}
	if len(req.Queues) > 0 {
		body["queues"] = req.Queues
	}
	if req.Concurrency > 0 {
		body["concurrency"] = req.Concurrency
	}
	if req.Hostname != "" {
		body["hostname"] = req.Hostname
	}
	if req.PID > 0 {
		body["pid"] = req.PID
	}
	b, _ := json.Marshal(body)
	var out HeartbeatResult
	if _, err := c.call(ctx, &request{op: "workers.heartbeat", method: http.MethodPost, path: "/ojs/v1/workers/heartbeat", body: b}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ProgressUpdate is a progress report of an active job (ojs-progress.md):
// the fraction done (0..1), a message, structured data and a checkpoint
// the next attempt can resume from.
type ProgressUpdate struct {
	Progress   *float64 `json:"progress,omitempty"`
	Message    string   `json:"message,omitempty"`
	Data       any      `json:"data,omitempty"`
	Checkpoint any      `json:"checkpoint,omitempty"`
}

// Progress reports the progress of an active job (it also counts as a
// heartbeat of the job).
func (c *Client) Progress(ctx context.Context, id string, u ProgressUpdate) error {
	b, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("progress %s: %w", id, err)
	}
	_, err = c.call(ctx, &request{op: "workers.progress", method: http.MethodPut,
		path: "/ojs/v1/jobs/" + url.PathEscape(id) + "/progress", body: b, fields: []field{{name: "id", value: id}}}, nil)
	return err
}
