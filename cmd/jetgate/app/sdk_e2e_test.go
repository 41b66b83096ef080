package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// This file drives a real jetgate with a client written the way the official
// OJS SDKs talk (spec/README.md, "What the official OJS clients send"): the
// SDK's headers, its request shapes (everything under "options", fetch
// without a visibility timeout, ack and nack without worker_id), and answers
// decoded into typed Go structs as the Go SDK decodes them, so a field of the
// wrong JSON type (a fractional latency_ms, a string attempt) fails decoding
// instead of passing a map lookup.

// sdkClient is the typed client. It uses nothing from jetgate's packages.
type sdkClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// sdkError is the error envelope the SDKs parse (ojs-http-binding.md 9).
type sdkError struct {
	Error struct {
		Code      string         `json:"code"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
		Details   map[string]any `json:"details"`
		RequestID string         `json:"request_id"`
	} `json:"error"`
}

// sdkCallError is a non-2xx answer, decoded as the SDK does.
type sdkCallError struct {
	status int
	env    sdkError
	raw    string
}

func (e *sdkCallError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.status, e.env.Error.Code, e.raw)
}

// call sends in (when not nil) as the Go SDK does and decodes a 2xx answer
// into out. Non-2xx answers come back as *sdkCallError; a 2xx answer that
// does not decode into out, or lacks the binding's response headers, fails
// the test.
func (c sdkClient) call(method, path string, in, out any) error {
	c.t.Helper()
	res, raw := ojsHTTP(c.t, c.hc, method, c.base+path, in)
	// spec/README.md: responses carry Content-Type
	// application/openjobspec+json exactly, and OJS-Version 1.0.
	if len(raw) > 0 {
		if ct := res.Header.Get("Content-Type"); ct != "application/openjobspec+json" {
			c.t.Errorf("%s %s: Content-Type %q, want exactly application/openjobspec+json", method, path, ct)
		}
	}
	if v := res.Header.Get("OJS-Version"); v != "1.0" {
		c.t.Errorf("%s %s: OJS-Version %q, want 1.0", method, path, v)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := &sdkCallError{status: res.StatusCode, raw: string(raw)}
		if err := json.Unmarshal(raw, &e.env); err != nil || e.env.Error.Code == "" {
			c.t.Errorf("%s %s: HTTP %d answer is not the OJS error envelope the SDKs parse: %s", method, path, res.StatusCode, raw)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: the Go SDK cannot decode the answer into %T: %v\n%s", method, path, out, err, raw)
		}
	}
	return nil
}

// mustCall is call for requests that must succeed.
func (c sdkClient) mustCall(method, path string, in, out any) {
	c.t.Helper()
	if err := c.call(method, path, in, out); err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// SDK request shapes (spec/README.md).

type sdkRetry struct {
	MaxAttempts        int      `json:"max_attempts"`
	InitialIntervalMS  int64    `json:"initial_interval_ms"`
	BackoffCoefficient float64  `json:"backoff_coefficient"`
	MaxIntervalMS      int64    `json:"max_interval_ms"`
	Jitter             bool     `json:"jitter"`
	NonRetryableErrors []string `json:"non_retryable_errors"`
}

type sdkOptions struct {
	Queue               string    `json:"queue"`
	Priority            *int      `json:"priority,omitempty"`
	TimeoutMS           int64     `json:"timeout_ms,omitempty"`
	DelayUntil          string    `json:"delay_until,omitempty"`
	Retry               *sdkRetry `json:"retry,omitempty"`
	Tags                []string  `json:"tags,omitempty"`
	VisibilityTimeoutMS int64     `json:"visibility_timeout_ms,omitempty"`
}

type sdkEnqueue struct {
	Type    string         `json:"type"`
	Args    []any          `json:"args"`
	Meta    map[string]any `json:"meta,omitempty"`
	Options sdkOptions     `json:"options"`
}

type sdkFetch struct {
	Queues   []string `json:"queues"`
	Count    int      `json:"count"`
	WorkerID string   `json:"worker_id"`
}

type sdkAck struct {
	JobID  string         `json:"job_id"`
	Result map[string]any `json:"result,omitempty"`
}

type sdkNackError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

type sdkNack struct {
	JobID string       `json:"job_id"`
	Error sdkNackError `json:"error"`
}

type sdkHeartbeat struct {
	WorkerID     string   `json:"worker_id"`
	State        string   `json:"state"`
	ActiveJobs   int      `json:"active_jobs"`
	ActiveJobIDs []string `json:"active_job_ids"`
}

// SDK answer shapes, typed as the Go SDK types them.

type sdkJob struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Queue       string         `json:"queue"`
	Args        []any          `json:"args"`
	State       string         `json:"state"`
	Priority    int            `json:"priority"`
	Attempt     int            `json:"attempt"`
	MaxAttempts int            `json:"max_attempts"`
	ScheduledAt *time.Time     `json:"scheduled_at"`
	EnqueuedAt  *time.Time     `json:"enqueued_at"`
	StartedAt   *time.Time     `json:"started_at"`
	WorkerID    string         `json:"worker_id"`
	Result      map[string]any `json:"result"`
}

type sdkJobAnswer struct {
	Job sdkJob `json:"job"`
}

type sdkFetchAnswer struct {
	Jobs []sdkJob `json:"jobs"`
}

type sdkManifest struct {
	OJSVersion string   `json:"ojs_version"`
	Extensions []string `json:"extensions"`
}

type sdkHealth struct {
	Status        string `json:"status"`
	Version       string `json:"version"`
	UptimeSeconds int64  `json:"uptime_seconds"`
	Backend       struct {
		Type      string `json:"type"`
		Status    string `json:"status"`
		LatencyMS *int64 `json:"latency_ms"`
		Error     string `json:"error"`
	} `json:"backend"`
}

type sdkHeartbeatAnswer struct {
	State string `json:"state"`
}

type sdkAckAnswer struct {
	Acknowledged bool       `json:"acknowledged"`
	ID           string     `json:"id"`
	JobID        string     `json:"job_id"`
	State        string     `json:"state"`
	CompletedAt  *time.Time `json:"completed_at"`
}

type sdkNackAnswer struct {
	JobID         string     `json:"job_id"`
	State         string     `json:"state"`
	Attempt       int        `json:"attempt"`
	MaxAttempts   int        `json:"max_attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	RetryDelayMS  *int64     `json:"retry_delay_ms"`
}

type sdkProgress struct {
	JobID    string   `json:"job_id"`
	State    string   `json:"state"`
	Progress *float64 `json:"progress"`
	Message  *string  `json:"message"`
}

type sdkEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Source  string          `json:"source"`
	Time    time.Time       `json:"time"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data"`
}

type sdkEvents struct {
	Events []sdkEvent `json:"events"`
}

// sdkCompletedData is job.completed's data (ojs-events.md 5.2: job_type,
// queue, duration_ms and attempt, integers where the spec says integer).
type sdkCompletedData struct {
	JobType    *string `json:"job_type"`
	Queue      *string `json:"queue"`
	Attempt    *int    `json:"attempt"`
	DurationMS *int64  `json:"duration_ms"`
}

// enqueue posts one job as the SDK does and decodes {"job":{...}}.
func (c sdkClient) enqueue(req sdkEnqueue) (sdkJob, error) {
	c.t.Helper()
	var a sdkJobAnswer
	err := c.call("POST", "/ojs/v1/jobs", req, &a)
	return a.Job, err
}

// fetch asks for up to count jobs as the SDK does (no visibility timeout).
func (c sdkClient) fetch(queue string, count int) []sdkJob {
	c.t.Helper()
	var a sdkFetchAnswer
	c.mustCall("POST", "/ojs/v1/workers/fetch", sdkFetch{Queues: []string{queue}, Count: count, WorkerID: "sdk-worker-1"}, &a)
	return a.Jobs
}

// fetchWithin polls fetch until a job comes, as the SDK's poll loop does,
// and fails the test at the deadline.
func (c sdkClient) fetchWithin(queue string, within time.Duration) sdkJob {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if jobs := c.fetch(queue, 10); len(jobs) > 0 {
			if len(jobs) != 1 {
				c.t.Fatalf("fetch %s: %d jobs, want the one enqueued", queue, len(jobs))
			}
			return jobs[0]
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("fetch %s: no job within %s", queue, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enqueueFetch enqueues one plain job into queue and fetches it.
func (c sdkClient) enqueueFetch(queue string, retry *sdkRetry) sdkJob {
	c.t.Helper()
	j, err := c.enqueue(sdkEnqueue{Type: "email.send", Args: []any{"ada@example.com"}, Options: sdkOptions{Queue: queue, Retry: retry}})
	if err != nil {
		c.t.Fatalf("enqueue into %s: %v", queue, err)
	}
	got := c.fetchWithin(queue, 10*time.Second)
	if got.ID != j.ID {
		c.t.Fatalf("fetch %s: job %s, want %s", queue, got.ID, j.ID)
	}
	// spec/README.md: attempt is 1 on the first run.
	if got.Attempt != 1 || got.State != "active" {
		c.t.Fatalf("fetched job: attempt %d state %q, want attempt 1, active", got.Attempt, got.State)
	}
	return got
}

// TestSDKSession runs, in order, what an application using an official OJS
// SDK does, each step a subtest citing the requirement it checks, so a
// failing step names the behaviour that is missing.
func TestSDKSession(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := sdkClient{t: t, base: s.URL(), hc: &http.Client{Timeout: 30 * time.Second}}

	// spec/README.md: the SDK decodes the manifest expecting ojs_version and
	// extensions as a list of strings.
	t.Run("manifest", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		var m sdkManifest
		c.mustCall("GET", "/ojs/manifest", nil, &m)
		if m.OJSVersion == "" || len(m.Extensions) == 0 {
			t.Fatalf("manifest: ojs_version %q, extensions %v", m.OJSVersion, m.Extensions)
		}
	})

	// spec/README.md: health with backend.latency_ms as an integer;
	// backend.status is one of ok / degraded / unhealthy.
	t.Run("health typed: status, backend.status ok|degraded|unhealthy, integer backend.latency_ms", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		var h sdkHealth
		c.mustCall("GET", "/ojs/v1/health", nil, &h)
		if h.Status != "ok" {
			t.Errorf("health status %q, want ok", h.Status)
		}
		switch h.Backend.Status {
		case "ok", "degraded", "unhealthy":
		default:
			t.Errorf("health backend.status %q, want one of ok, degraded, unhealthy", h.Backend.Status)
		}
		if h.Backend.LatencyMS == nil || *h.Backend.LatencyMS < 0 {
			t.Errorf("health backend.latency_ms missing or negative: %v", h.Backend.LatencyMS)
		}
	})

	// ojs-core.md job types are dot-separated; the SDKs' examples use hyphens
	// within a segment (billing.invoice-sent), and the SDKs send them as is.
	t.Run("enqueue hyphenated type billing.invoice-sent", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		const q = "sdk-hyphen"
		j, err := c.enqueue(sdkEnqueue{Type: "billing.invoice-sent", Args: []any{"inv-42"}, Options: sdkOptions{Queue: q}})
		if err != nil {
			t.Fatalf("enqueue of type billing.invoice-sent refused: %v", err)
		}
		if j.Type != "billing.invoice-sent" || j.State != "available" {
			t.Fatalf("enqueued job: type %q state %q, want billing.invoice-sent, available", j.Type, j.State)
		}
		got := c.fetchWithin(q, 10*time.Second)
		if got.ID != j.ID || got.Type != "billing.invoice-sent" || got.Attempt != 1 {
			t.Fatalf("fetched %s type %q attempt %d, want %s billing.invoice-sent attempt 1", got.ID, got.Type, got.Attempt, j.ID)
		}
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: got.ID}, nil)
	})

	// Relative timestamps: options.delay_until (the SDK's form) and the
	// top-level scheduled_at (spec/README.md decision 2) of "+PT1S" mean one
	// second after the enqueue; the job is scheduled until then.
	t.Run("enqueue with relative options.delay_until and scheduled_at +PT1S", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		const q = "sdk-relative"
		check := func(form string, body any) {
			t.Helper()
			before := time.Now()
			var a sdkJobAnswer
			err := c.call("POST", "/ojs/v1/jobs", body, &a)
			after := time.Now()
			if err != nil {
				t.Fatalf("enqueue with %s +PT1S refused: %v", form, err)
			}
			j := a.Job
			if j.State != "scheduled" {
				t.Fatalf("%s +PT1S: state %q, want scheduled", form, j.State)
			}
			// Stored in milliseconds: allow the truncation.
			lo, hi := before.Add(time.Second-time.Millisecond), after.Add(time.Second+time.Millisecond)
			if j.ScheduledAt == nil || j.ScheduledAt.Before(lo) || j.ScheduledAt.After(hi) {
				t.Fatalf("%s +PT1S: scheduled_at %v, want one second after the enqueue (%v..%v)", form, j.ScheduledAt, lo, hi)
			}
			got := c.fetchWithin(q, 15*time.Second)
			if got.ID != j.ID || got.Attempt != 1 {
				t.Fatalf("%s +PT1S: fetched %s attempt %d, want %s attempt 1", form, got.ID, got.Attempt, j.ID)
			}
			if got.StartedAt == nil || got.StartedAt.Before(j.ScheduledAt.Add(-time.Millisecond)) {
				t.Fatalf("%s +PT1S: started_at %v before scheduled_at %v", form, got.StartedAt, j.ScheduledAt)
			}
			c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: got.ID}, nil)
		}
		check("options.delay_until", sdkEnqueue{Type: "report.build", Args: []any{}, Options: sdkOptions{Queue: q, DelayUntil: "+PT1S"}})
		check("scheduled_at", map[string]any{"type": "report.build", "args": []any{}, "queue": q, "scheduled_at": "+PT1S"})
	})

	// spec/README.md decision 7: pause stops delivery only; a paused queue
	// accepts enqueues (201), and resume lets the job be fetched.
	t.Run("pause: enqueue into a paused queue is accepted (201), delivered after resume", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		const q = "sdk-paused"
		c.mustCall("POST", "/ojs/v1/queues/"+q+"/pause", nil, nil)
		j, err := c.enqueue(sdkEnqueue{Type: "email.send", Args: []any{"x"}, Options: sdkOptions{Queue: q}})
		if err != nil {
			t.Fatalf("enqueue into a paused queue: %v (decision 7: must be accepted with 201)", err)
		}
		if j.State != "available" {
			t.Fatalf("job enqueued into a paused queue: state %q, want available", j.State)
		}
		if jobs := c.fetch(q, 10); len(jobs) != 0 {
			t.Fatalf("fetch from a paused queue handed out %d jobs", len(jobs))
		}
		c.mustCall("POST", "/ojs/v1/queues/"+q+"/resume", nil, nil)
		got := c.fetchWithin(q, 10*time.Second)
		if got.ID != j.ID {
			t.Fatalf("fetch after resume: %s, want %s", got.ID, j.ID)
		}
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: got.ID}, nil)
	})

	// spec/README.md: heartbeat {"worker_id","state","active_jobs":<int>,
	// "active_job_ids"}, only state read; ack {"job_id","result"} without
	// worker_id, answered with the job's id.
	t.Run("heartbeat, then ack answers with id", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		j := c.enqueueFetch("sdk-ack", nil)
		var hb sdkHeartbeatAnswer
		c.mustCall("POST", "/ojs/v1/workers/heartbeat", sdkHeartbeat{WorkerID: "sdk-worker-1", State: "running", ActiveJobs: 1, ActiveJobIDs: []string{j.ID}}, &hb)
		switch hb.State {
		case "running", "quiet", "terminate":
		default:
			t.Errorf("heartbeat state %q, want running, quiet or terminate", hb.State)
		}
		var a sdkAckAnswer
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: j.ID, Result: map[string]any{"message_id": "m-1"}}, &a)
		if a.State != "completed" || a.JobID != j.ID {
			t.Errorf("ack answer: state %q job_id %q, want completed, %s", a.State, a.JobID, j.ID)
		}
		if a.ID != j.ID {
			t.Errorf("ack answer id %q, want the job's id %s", a.ID, j.ID)
		}
	})

	// spec/README.md: nack {"job_id","error":{"code","message","retryable"}}
	// without worker_id; a retryable failure answers retry_delay_ms
	// (openapi.yaml Job.retry_delay_ms, integer).
	t.Run("nack of a retryable error answers retry_delay_ms", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		retry := &sdkRetry{MaxAttempts: 3, InitialIntervalMS: 1000, BackoffCoefficient: 2, MaxIntervalMS: 60000, Jitter: false, NonRetryableErrors: []string{}}
		j := c.enqueueFetch("sdk-nack", retry)
		var n sdkNackAnswer
		c.mustCall("POST", "/ojs/v1/workers/nack", sdkNack{JobID: j.ID, Error: sdkNackError{Code: "smtp_unavailable", Message: "connection refused", Retryable: true}}, &n)
		if n.State != "retryable" || n.Attempt != 1 || n.MaxAttempts != 3 {
			t.Fatalf("nack answer: state %q attempt %d max_attempts %d, want retryable 1 3", n.State, n.Attempt, n.MaxAttempts)
		}
		// First retry, 1 s initial interval, no jitter: 1000 ms.
		if n.RetryDelayMS == nil || *n.RetryDelayMS < 900 || *n.RetryDelayMS > 1100 {
			t.Fatalf("nack answer retry_delay_ms %v, want about 1000 (initial_interval_ms, no jitter)", n.RetryDelayMS)
		}
	})

	// ojs-progress.md: PUT progress with a message; GET returns both.
	t.Run("progress with a message: PUT {progress 0.5, message half}, GET returns both", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		j := c.enqueueFetch("sdk-progress", nil)
		path := "/ojs/v1/jobs/" + j.ID + "/progress"
		c.mustCall("PUT", path, map[string]any{"progress": 0.5, "message": "half"}, nil)
		var p sdkProgress
		c.mustCall("GET", path, nil, &p)
		if p.JobID != j.ID || p.Progress == nil || *p.Progress != 0.5 {
			t.Errorf("progress: job_id %q progress %v, want %s 0.5", p.JobID, p.Progress, j.ID)
		}
		if p.Message == nil || *p.Message != "half" {
			t.Errorf("progress message %v, want \"half\"", p.Message)
		}
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: j.ID}, nil)
	})

	// ojs-events.md 9 (GET /ojs/v1/events?types=...&queues=...): filtered
	// by queue, only that queue's events; job.completed data carries
	// job_type, queue, attempt and duration_ms (5.2).
	t.Run("events filtered by queue: types=job.completed&queues=<q> returns only that queue's, typed data", func(t *testing.T) {
		c := sdkClient{t: t, base: c.base, hc: c.hc}
		const q, other = "sdk-events", "sdk-events-other"
		// A dashboard's first read starts the event capture (issue 17).
		c.mustCall("GET", "/ojs/v1/events", nil, &sdkEvents{})
		mine := c.enqueueFetch(q, nil)
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: mine.ID}, nil)
		theirs := c.enqueueFetch(other, nil)
		c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: theirs.ID}, nil)

		// Both completions are recorded (events are published without
		// waiting), so wait until the unfiltered list holds both.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var all sdkEvents
			c.mustCall("GET", "/ojs/v1/events?types=job.completed&limit=1000", nil, &all)
			seen := 0
			for _, e := range all.Events {
				if e.Subject == mine.ID || e.Subject == theirs.ID {
					seen++
				}
			}
			if seen == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job.completed events of %s and %s not recorded within 10s", mine.ID, theirs.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}

		var got sdkEvents
		qs := url.Values{"queues": {q}, "types": {"job.completed"}, "limit": {"10"}}
		if err := c.call("GET", "/ojs/v1/events?"+qs.Encode(), nil, &got); err != nil {
			t.Fatalf("GET /ojs/v1/events?%s: %v", qs.Encode(), err)
		}
		found := false
		for _, e := range got.Events {
			if e.Type != "job.completed" {
				t.Errorf("event %s of type %q in a types=job.completed answer", e.ID, e.Type)
			}
			var d sdkCompletedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("job.completed data does not decode with integer attempt and duration_ms: %v\n%s", err, e.Data)
			}
			if d.Queue == nil || *d.Queue != q {
				t.Errorf("event %s (job %s) of queue %v in a queues=%s answer", e.ID, e.Subject, d.Queue, q)
			}
			if e.Subject == theirs.ID {
				t.Errorf("the %s job's event is in a queues=%s answer", other, q)
			}
			if e.Subject != mine.ID {
				continue
			}
			found = true
			if d.JobType == nil || *d.JobType != "email.send" || d.Attempt == nil || *d.Attempt != 1 || d.DurationMS == nil || *d.DurationMS < 0 {
				t.Errorf("job.completed data %s: want job_type email.send, queue %s, attempt 1, duration_ms >= 0", e.Data, q)
			}
		}
		if !found {
			t.Errorf("job.completed of %s (queue %s) missing from the filtered answer (%d events)", mine.ID, q, len(got.Events))
		}
	})
}
