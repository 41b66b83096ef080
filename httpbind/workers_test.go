package httpbind

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// 10.1 FETCH: {"jobs":[...]}, [] (not null) when there is no work.
func TestFetch_10_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.fetched = []*ojs.Job{newJob(ojs.StateActive)}
	r := b.do(t, http.MethodPost, "/ojs/v1/workers/fetch",
		`{"queues":["email","default","email"],"count":5,"worker_id":"w1","visibility_timeout_ms":30000}`, nil)
	r.wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	wantPublic(t, r)
	if jobs := r.list(t, "jobs"); len(jobs) != 1 || jobs[0].(map[string]any)["state"] != "active" {
		t.Errorf("body = %s", r.raw)
	}
	want := ojs.FetchRequest{Queues: []string{"email", "default"}, Count: 5, WorkerID: "w1",
		VisibilityTimeout: 30 * time.Second}
	if got := b.fake.fetchReq; !slices.Equal(got.Queues, want.Queues) || got.Count != want.Count ||
		got.WorkerID != want.WorkerID || got.VisibilityTimeout != want.VisibilityTimeout {
		t.Errorf("FetchRequest = %+v, want %+v", got, want)
	}

	b.fake.fetched = nil
	r = b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["email"]}`, nil).wantStatus(t, http.StatusOK)
	if string(r.raw) != "{\"jobs\":[]}\n" {
		t.Errorf("empty fetch = %q", r.raw)
	}
	if got := b.fake.fetchReq; got.Count != 1 || got.VisibilityTimeout != 0 {
		t.Errorf("defaults: %+v, want count 1 and no visibility override", got)
	}
}

// 10.1 and 6.2 of the worker protocol: queues is a required non-empty array
// of valid names; count an integer of at least 1 (larger than the cap is
// served up to it, see TestFetch_CountAboveCapServedUpToCap); fields are typed.
func TestFetch_Invalid_10_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for body, field := range map[string]string{
		``:                               "queues",
		`{}`:                             "queues",
		`{"queues":[]}`:                  "queues",
		`{"queues":"email"}`:             "queues",
		`{"queues":["email",3]}`:         "queues[1]",
		`{"queues":["Email"]}`:           "queues[0]",
		`{"queues":["-x"]}`:              "queues[0]",
		`{"queues":["a"],"count":0}`:     "count",
		`{"queues":["a"],"count":-1}`:    "count",
		`{"queues":["a"],"count":"5"}`:   "count",
		`{"queues":["a"],"count":1.5}`:   "count",
		`{"queues":["a"],"worker_id":7}`: "worker_id",
		`{"queues":["a"],"visibility_timeout_ms":-1}`: "visibility_timeout_ms",
	} {
		r := b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", body, nil)
		if d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false); d["field"] != field {
			t.Errorf("%s: details = %v, want field %s", body, d, field)
		}
	}
	if calls := b.fake.called(); len(calls) != 0 {
		t.Errorf("backend called: %v", calls)
	}
	// The cap follows the config.
	b2 := setup(t, Config{MaxFetchCount: 500})
	b2.do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["a"],"count":500}`, nil).
		wantStatus(t, http.StatusOK)
	if got := b2.fake.fetchReq.Count; got != 500 {
		t.Errorf("count 500 under cap 500 reached the backend as %d", got)
	}
}

// 10.2 ACK: {"acknowledged":true,"job_id","state","completed_at"}; no
// worker_id needed; result passed through verbatim.
func TestAck_10_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := ojs.NewID()
	b.fake.ackRes = &ojs.AckResult{JobID: id, State: ojs.StateCompleted, CompletedAt: ojs.NewTime(testNow)}
	r := b.do(t, http.MethodPost, "/ojs/v1/workers/ack",
		`{"job_id":"`+id+`","result":{"delivered":true,"n":1}}`, nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["acknowledged"] != true || r.body["job_id"] != id || r.body["state"] != "completed" ||
		r.body["completed_at"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("body = %s", r.raw)
	}
	if got := b.fake.ackReq; got.JobID != id || string(got.Result) != `{"delivered":true,"n":1}` || got.WorkerID != "" {
		t.Errorf("AckRequest = %+v (result %s)", got, got.Result)
	}

	// Any JSON result is passed on; null counts as none.
	b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`","result":null}`, nil).wantStatus(t, http.StatusOK)
	if b.fake.ackReq.Result != nil {
		t.Errorf("null result = %s", b.fake.ackReq.Result)
	}
	b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`","result":[1,2]}`, nil).wantStatus(t, http.StatusOK)

	// A missing job_id is 400; a job_id that is no job id is 404; a
	// conflict is 409 with expected_state.
	d := b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"result":{}}`, nil).
		wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
	if d["field"] != "job_id" {
		t.Errorf("details = %v", d)
	}
	b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"nope"}`, nil).
		wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
	b.fake.err = &ojs.StateError{JobID: id, Current: ojs.StateCompleted, Expected: ojs.StateActive, Op: "ack"}
	d = b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`"}`, nil).
		wantError(t, http.StatusConflict, ojs.CodeConflict, false)
	if d["expected_state"] != "active" {
		t.Errorf("details = %v", d)
	}
	// The attempt a result is for reaches the backend (late results, 409).
	b.fake.err = nil
	b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`","attempt":3}`, nil).wantStatus(t, http.StatusOK)
	if b.fake.ackReq.Attempt != 3 {
		t.Errorf("ack request = %+v", b.fake.ackReq)
	}
}

// 10.3 FAIL: the binding's error shape, the worker protocol's (type,
// backtrace) and a bare string are all read; the answer is the NackResult.
func TestNack_10_3(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := ojs.NewID()
	b.fake.nackRes = &ojs.NackResult{JobID: id, State: ojs.StateRetryable, Attempt: 1, MaxAttempts: 5,
		NextAttemptAt: ojs.NewTime(testNow)}
	r := b.do(t, http.MethodPost, "/ojs/v1/workers/nack", `{"job_id":"`+id+`","error":{"code":"handler_error",
		"message":"SMTP refused","retryable":true,"details":{"smtp_port":587}}}`, nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["job_id"] != id || r.body["state"] != "retryable" || r.body["attempt"] != float64(1) ||
		r.body["max_attempts"] != float64(5) || r.body["next_attempt_at"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("body = %s", r.raw)
	}
	e := b.fake.nackReq.Error
	if e.Code != "handler_error" || e.Message != "SMTP refused" || e.Retryable == nil || !*e.Retryable ||
		string(e.Details) != `{"smtp_port":587}` {
		t.Errorf("JobError = %+v", e)
	}

	b.do(t, http.MethodPost, "/ojs/v1/workers/nack", `{"job_id":"`+id+`","worker_id":"w1",
		"error":{"type":"shutdown","message":"worker shutting down","backtrace":["a.go:1"]}}`, nil).
		wantStatus(t, http.StatusOK)
	if got := b.fake.nackReq; got.WorkerID != "w1" || got.Error.Type != "shutdown" ||
		string(got.Error.Backtrace) != `["a.go:1"]` || got.Error.Retryable != nil {
		t.Errorf("NackRequest = %+v", got)
	}

	// Issue 31: a string and a number are treated alike, each taken as
	// the message (the number as written).
	for raw, msg := range map[string]string{`"boom"`: "boom", `5`: "5", `-1.5e3`: "-1.5e3", `"5"`: "5"} {
		b.do(t, http.MethodPost, "/ojs/v1/workers/nack", `{"job_id":"`+id+`","error":`+raw+`}`, nil).
			wantStatus(t, http.StatusOK)
		if e := b.fake.nackReq.Error; e.Message != msg || e.Code != "" || e.Retryable != nil {
			t.Errorf("error %s = %+v, want message %q", raw, e, msg)
		}
	}

	for body, field := range map[string]string{
		`{"job_id":"` + id + `"}`:                             "error",
		`{"job_id":"` + id + `","error":true}`:                "error",
		`{"job_id":"` + id + `","error":["x"]}`:               "error",
		`{"job_id":"` + id + `","error":{"code":1}}`:          "error.code",
		`{"job_id":"` + id + `","error":{"retryable":"yes"}}`: "error.retryable",
		`{"error":{"code":"x","message":"y"}}`:                "job_id",
		`{"job_id":"` + id + `","error":"x","attempt":0}`:     "attempt",
		`{"job_id":"` + id + `","error":"x","attempt":"2"}`:   "attempt",
	} {
		d := b.do(t, http.MethodPost, "/ojs/v1/workers/nack", body, nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v, want field %s", body, d, field)
		}
	}
}

// 10.4 BEAT and spec/README.md decision 4: active_jobs as an array of ids
// (binding) or an integer (worker protocol, with active_job_ids); answer
// {"state","jobs_extended","server_time"}.
func TestHeartbeat_10_4(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	a, c := ojs.NewID(), ojs.NewID()
	b.fake.beatRes = &ojs.HeartbeatResult{State: ojs.WorkerQuiet, Extended: []string{a}, ServerTime: testNow}

	// Binding shape.
	r := b.do(t, http.MethodPost, "/ojs/v1/workers/heartbeat",
		`{"worker_id":"w1","active_jobs":["`+a+`"],"visibility_timeout_ms":60000}`, nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if r.body["state"] != "quiet" || r.body["server_time"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("body = %s", r.raw)
	}
	if ext := r.list(t, "jobs_extended"); len(ext) != 1 || ext[0] != a {
		t.Errorf("jobs_extended = %v", ext)
	}
	if got := b.fake.beatReq; got.WorkerID != "w1" || !slices.Equal(got.JobIDs, []string{a}) ||
		got.VisibilityTimeout != time.Minute {
		t.Errorf("HeartbeatRequest = %+v", got)
	}

	// Worker protocol shape, as the Go SDK sends it; ids merged, repeats and
	// non-ids dropped.
	b.fake.beatRes = &ojs.HeartbeatResult{}
	r = b.do(t, http.MethodPost, "/ojs/v1/workers/heartbeat",
		`{"worker_id":"w1","state":"running","active_jobs":3,"active_job_ids":["`+a+`","`+c+`","`+a+`","junk"]}`, nil).
		wantStatus(t, http.StatusOK)
	if got := b.fake.beatReq; !slices.Equal(got.JobIDs, []string{a, c}) || got.VisibilityTimeout != 0 {
		t.Errorf("HeartbeatRequest = %+v", got)
	}
	if r.body["state"] != "running" || len(r.list(t, "jobs_extended")) != 0 {
		t.Errorf("defaults: body = %s", r.raw)
	}
	if _, err := time.Parse(ojs.TimeFormat, r.body["server_time"].(string)); err != nil {
		t.Errorf("server_time: %v", err)
	}

	for body, field := range map[string]string{
		`{"active_jobs":1}`:                             "worker_id",
		`{"worker_id":""}`:                              "worker_id",
		`{"worker_id":"w","active_jobs":"x"}`:           "active_jobs",
		`{"worker_id":"w","active_jobs":-1}`:            "active_jobs",
		`{"worker_id":"w","active_jobs":[1]}`:           "active_jobs[0]",
		`{"worker_id":"w","active_job_ids":"a"}`:        "active_job_ids",
		`{"worker_id":"w","state":1}`:                   "state",
		`{"worker_id":"w","visibility_timeout_ms":"1"}`: "visibility_timeout_ms",
	} {
		d := b.do(t, http.MethodPost, "/ojs/v1/workers/heartbeat", body, nil).
			wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v, want field %s", body, d, field)
		}
	}
}

// spec/README.md "What the official OJS clients send": each request of the
// Go SDK, with its headers (OJS-Version 1.0.0-rc.1, Authorization), decodes
// and answers the shape the SDK reads.
func TestGoSDKRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := ojs.NewID()
	b.fake.ackRes = &ojs.AckResult{JobID: id, State: ojs.StateCompleted, CompletedAt: ojs.NewTime(testNow)}
	b.fake.nackRes = &ojs.NackResult{JobID: id, State: ojs.StateDiscarded, Attempt: 3, MaxAttempts: 3,
		DiscardedAt: ojs.NewTime(testNow)}
	b.fake.beatRes = &ojs.HeartbeatResult{State: ojs.WorkerRunning, ServerTime: testNow}

	enqueue := `{"type":"email.send","args":["a@example.com"],"meta":{"k":"v"},"options":{"queue":"email",
		"priority":3,"timeout_ms":30000,"delay_until":"2030-01-01T12:00:00+02:00","expires_at":"2030-01-02T00:00:00-05:00",
		"retry":{"max_attempts":5,"initial_interval_ms":1000,"backoff_coefficient":2,"max_interval_ms":300000,
		"jitter":true,"non_retryable_errors":["validation"]},"unique":{"key":"k1","period_ms":60000,"on_conflict":"reject"},
		"tags":["t"],"visibility_timeout_ms":45000}}`
	r := b.do(t, http.MethodPost, "/ojs/v1/jobs", enqueue, sdkHeaders).wantStatus(t, http.StatusCreated)
	if _, ok := r.body["job"].(map[string]any); !ok {
		t.Errorf("enqueue answer = %s", r.raw)
	}
	j := b.fake.enqueued[0]
	if j.Queue != "email" || j.Priority != 3 || j.HeartbeatTimeoutMs != 45000 || j.ScheduledAt == nil ||
		!j.ScheduledAt.Equal(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("parsed job = %+v", j)
	}

	r = b.do(t, http.MethodPost, "/ojs/v1/jobs/batch", `{"jobs":[`+enqueue+`]}`, sdkHeaders).
		wantStatus(t, http.StatusCreated)
	if r.body["count"] != float64(1) {
		t.Errorf("batch answer = %s", r.raw)
	}

	b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["email","default"],"count":1,"worker_id":"w-1"}`,
		sdkHeaders).wantStatus(t, http.StatusOK)
	if got := b.fake.fetchReq; got.VisibilityTimeout != 0 || got.WorkerID != "w-1" {
		t.Errorf("fetch = %+v", got)
	}

	r = b.do(t, http.MethodPost, "/ojs/v1/workers/heartbeat",
		`{"worker_id":"w-1","state":"running","active_jobs":1,"active_job_ids":["`+id+`"]}`, sdkHeaders).
		wantStatus(t, http.StatusOK)
	if r.body["state"] != "running" {
		t.Errorf("heartbeat answer = %s", r.raw)
	}

	r = b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`","result":{"ok":true}}`, sdkHeaders).
		wantStatus(t, http.StatusOK)
	if b.fake.ackReq.WorkerID != "" || r.body["acknowledged"] != true {
		t.Errorf("ack = %+v, answer %s", b.fake.ackReq, r.raw)
	}
	b.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`"}`, sdkHeaders).wantStatus(t, http.StatusOK)

	r = b.do(t, http.MethodPost, "/ojs/v1/workers/nack",
		`{"job_id":"`+id+`","error":{"code":"handler_error","message":"boom","retryable":false}}`, sdkHeaders).
		wantStatus(t, http.StatusOK)
	if r.body["state"] != "discarded" || b.fake.nackReq.Error.Retryable == nil || *b.fake.nackReq.Error.Retryable {
		t.Errorf("nack = %+v, answer %s", b.fake.nackReq, r.raw)
	}

	r = b.do(t, http.MethodGet, "/ojs/manifest", "", sdkHeaders).wantStatus(t, http.StatusOK)
	var m struct {
		OJSVersion string   `json:"ojs_version"`
		Extensions []string `json:"extensions"`
	}
	if err := json.Unmarshal(r.raw, &m); err != nil || m.OJSVersion != "1.0" || m.Extensions == nil {
		t.Errorf("manifest as the SDK decodes it: %+v, %v", m, err)
	}
}

// ojs-priority.md 7.3: the fetch carries the consumption strategy and the
// queues' weights, as {name, weight} objects or a weights object.
func TestFetch_Strategy_PRIR002(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.do(t, http.MethodPost, "/ojs/v1/workers/fetch",
		`{"queues":[{"name":"critical","weight":5},{"name":"default","weight":2},"low"],"strategy":"weighted"}`, nil).
		wantStatus(t, http.StatusOK)
	got := b.fake.fetchReq
	if !slices.Equal(got.Queues, []string{"critical", "default", "low"}) || got.Strategy != ojs.StrategyWeighted ||
		got.Weights["critical"] != 5 || got.Weights["default"] != 2 || len(got.Weights) != 2 {
		t.Errorf("FetchRequest = %+v", got)
	}
	b.do(t, http.MethodPost, "/ojs/v1/workers/fetch",
		`{"queues":["a","b"],"strategy":"weighted","weights":{"a":3,"b":0}}`, nil).wantStatus(t, http.StatusOK)
	if got := b.fake.fetchReq; got.Weights["a"] != 3 || got.Weights["b"] != 0 {
		t.Errorf("weights object: %+v", got)
	}
	for body, field := range map[string]string{
		`{"queues":["a"],"strategy":"random"}`:                        "strategy",
		`{"queues":[{"name":"a","weight":-1}],"strategy":"weighted"}`: "queues[0].weight",
		`{"queues":[{"weight":2}]}`:                                   "queues[0].name",
		`{"queues":["a"],"weights":{"a":"x"}}`:                        "weights.a",
		`{"queues":[7]}`:                                              "queues[0]",
	} {
		r := b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", body, nil).wantStatus(t, http.StatusBadRequest)
		if !strings.Contains(string(r.raw), field) {
			t.Errorf("%s: %s, want the field %s named", body, r.raw, field)
		}
	}
}
