package httpbind

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// wantPublic fails if server bookkeeping reached the client (job.Public).
func wantPublic(t *testing.T, r response) {
	t.Helper()
	if strings.Contains(string(r.raw), "x_jetgate") || strings.Contains(string(r.raw), "secret-token") {
		t.Errorf("server bookkeeping leaked: %s", r.raw)
	}
}

// 9.1 PUSH: 201, Location, {"job": ...} with the job as stored.
func TestEnqueue_9_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, "/ojs/v1/jobs",
		`{"type":"email.send","args":["a@example.com",{"locale":"en"}],"meta":{"trace_id":"t1"},
		  "options":{"queue":"email","priority":1,"tags":["x"]},"unknown_field":1}`, nil)
	r.wantStatus(t, http.StatusCreated)
	wantHeaders(t, r)
	wantPublic(t, r)
	job := r.obj(t, "job")
	if job["type"] != "email.send" || job["queue"] != "email" || job["state"] != "available" {
		t.Errorf("job = %v", job)
	}
	id, _ := job["id"].(string)
	if ojs.ValidID(id) != nil {
		t.Errorf("job.id = %q", id)
	}
	if loc := r.Header.Get("Location"); loc != "/ojs/v1/jobs/"+id {
		t.Errorf("Location = %q, want /ojs/v1/jobs/%s", loc, id)
	}
	if job["created_at"] != "2026-02-12T10:30:00.123Z" {
		t.Errorf("created_at = %v, want RFC 3339 UTC ms", job["created_at"])
	}
	if len(b.fake.enqueued) != 1 || b.fake.enqueued[0].Priority != 1 || b.fake.enqueued[0].Queue != "email" {
		t.Errorf("enqueued %+v", b.fake.enqueued)
	}
}

// 9.1: validation errors from ojs.ParseJob are 400 naming the field; the
// backend is not called.
func TestEnqueue_Invalid_9_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for body, field := range map[string]string{
		`{"type":"email.send","args":{"a":1}}`: "args",
		`{"args":[]}`:                          "type",
		`[1,2]`:                                "body",
		`{"type":"email.send","args":[],"options":{"queue":"Bad Queue"}}`: "options.queue",
	} {
		r := b.do(t, http.MethodPost, "/ojs/v1/jobs", body, nil)
		d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidPayload, false)
		if d["field"] != field {
			t.Errorf("%s: details = %v, want field %s", body, d, field)
		}
	}
	if calls := b.fake.called(); len(calls) != 0 {
		t.Errorf("backend called: %v", calls)
	}
}

// 9.2 PUSH (batch): 201 {"jobs": [...], "count": n}; an invalid job fails
// the whole batch with its index in the field path.
func TestEnqueueBatch_9_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodPost, "/ojs/v1/jobs/batch", `{"jobs":[
		{"type":"email.send","args":["a"],"options":{"queue":"email"}},
		{"type":"email.send","args":["b"],"options":{"queue":"email"}}]}`, nil)
	r.wantStatus(t, http.StatusCreated)
	wantHeaders(t, r)
	wantPublic(t, r)
	if jobs := r.list(t, "jobs"); len(jobs) != 2 || r.body["count"] != float64(2) {
		t.Errorf("body = %s", r.raw)
	}

	r = b.do(t, http.MethodPost, "/ojs/v1/jobs/batch", `{"jobs":[{"type":"a.b","args":[]},{"args":[]}]}`, nil)
	if d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidPayload, false); d["field"] != "jobs[1].type" {
		t.Errorf("details = %v", d)
	}
}

// 9.3 INFO: {"job": ...}; an id that is not a UUIDv7 is 404 without a
// backend call.
func TestGetJob_9_3(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.job = newJob(ojs.StateCompleted)
	r := b.do(t, http.MethodGet, "/ojs/v1/jobs/"+b.fake.job.ID, "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	wantPublic(t, r)
	if job := r.obj(t, "job"); job["id"] != b.fake.job.ID || job["state"] != "completed" {
		t.Errorf("job = %v", job)
	}
	if b.fake.id != b.fake.job.ID {
		t.Errorf("backend got id %q", b.fake.id)
	}

	r = b.do(t, http.MethodGet, "/ojs/v1/jobs/not-a-job", "", nil)
	d := r.wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
	if d["resource_type"] != "job" || d["resource_id"] != "not-a-job" {
		t.Errorf("details = %v", d)
	}
	if calls := b.fake.called(); len(calls) != 1 {
		t.Errorf("calls = %v", calls)
	}
}

// 9.4 CANCEL: {"job": {..., "state":"cancelled","cancelled_at","previous_state"}};
// a terminal job is 409 conflict (ojs-errors.md 4.1 INVALID_STATE_TRANSITION).
func TestCancelJob_9_4(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	j := newJob(ojs.StateCancelled)
	j.CancelledAt = ojs.NewTime(testNow)
	b.fake.job, b.fake.prev = j, ojs.StateAvailable
	r := b.do(t, http.MethodDelete, "/ojs/v1/jobs/"+j.ID, "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	wantPublic(t, r)
	job := r.obj(t, "job")
	if job["state"] != "cancelled" || job["previous_state"] != "available" || job["cancelled_at"] == nil {
		t.Errorf("job = %v", job)
	}
	if j.Extra != nil {
		t.Errorf("the backend's job was modified: %v", j.Extra)
	}

	b.fake.err = &ojs.StateError{JobID: j.ID, Current: ojs.StateCompleted, Op: "cancel"}
	d := b.do(t, http.MethodDelete, "/ojs/v1/jobs/"+j.ID, "", nil).
		wantError(t, http.StatusConflict, ojs.CodeConflict, false)
	if d["current_state"] != "completed" || d["job_id"] != j.ID {
		t.Errorf("details = %v", d)
	}
}

// 9.5 ACTIVATE: {"job": {..., "state":"available","previous_state":"pending"}}.
func TestActivateJob_9_5(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.job = newJob(ojs.StateAvailable)
	r := b.do(t, http.MethodPost, "/ojs/v1/jobs/"+b.fake.job.ID+"/activate", "", sdkHeaders).
		wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	if job := r.obj(t, "job"); job["state"] != "available" || job["previous_state"] != "pending" {
		t.Errorf("job = %v", job)
	}
	if calls := b.fake.called(); len(calls) != 1 || calls[0] != "Activate" {
		t.Errorf("calls = %v", calls)
	}
}

// 16.2: malformed JSON is 400 naming the byte offset, code invalid_payload
// (ojs-errors.md 4.1: "malformed JSON").
func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, path := range []string{"/ojs/v1/workers/fetch", "/ojs/v1/workers/ack"} {
		r := b.do(t, http.MethodPost, path, `{"queues": ["a",}`, nil)
		r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidPayload, false)
		if msg := r.obj(t, "error")["message"].(string); !strings.Contains(msg, "offset 17") {
			t.Errorf("%s: message %q does not name the offset", path, msg)
		}
	}
	for _, body := range []string{`[1]`, `"x"`, `null`, `{} {}`} {
		r := b.do(t, http.MethodPost, "/ojs/v1/workers/ack", body, nil)
		if d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidPayload, false); d["field"] != "body" {
			t.Errorf("%s: details = %v", body, d)
		}
	}
}
