package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 32, "Jobs and errors": each test drives a real jetgate over HTTP
// with the official clients' request shapes and decodes the answers into
// types shaped as theirs (below, nothing from jetgate's packages), then
// runs the same steps over the NATS binding and checks that it answers
// the same bodies (ids, times and request ids aside).

// i32JobError is a job's error as the clients type it: ojs-core.md 8's
// type and message, with the binding's code and retryable.
type i32JobError struct {
	Code      string `json:"code"`
	Type      string `json:"type"`
	Message   string `json:"message"`
	Retryable *bool  `json:"retryable"`
	Attempt   int    `json:"attempt"`
}

// i32Job is the job the clients decode from fetch and GET.
type i32Job struct {
	ID           string        `json:"id"`
	State        string        `json:"state"`
	Attempt      int           `json:"attempt"`
	MaxAttempts  int           `json:"max_attempts"`
	StartedAt    *time.Time    `json:"started_at"`
	CompletedAt  *time.Time    `json:"completed_at"`
	DiscardedAt  *time.Time    `json:"discarded_at"`
	RetryDelayMS *int64        `json:"retry_delay_ms"`
	Error        *i32JobError  `json:"error"`
	Errors       []i32JobError `json:"errors"`
}

type i32JobAnswer struct {
	Job i32Job `json:"job"`
}

type i32FetchAnswer struct {
	Jobs []i32Job `json:"jobs"`
}

// i32NackAnswer is the answer to a nack.
type i32NackAnswer struct {
	ID            string     `json:"id"`
	JobID         string     `json:"job_id"`
	State         string     `json:"state"`
	Attempt       int        `json:"attempt"`
	MaxAttempts   int        `json:"max_attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	RetryDelayMS  *int64     `json:"retry_delay_ms"`
	DiscardedAt   *time.Time `json:"discarded_at"`
	CompletedAt   *time.Time `json:"completed_at"`
	Requeued      bool       `json:"requeued"`
}

// i32ErrorEnvelope is the error envelope as the clients parse it, with
// openapi.yaml's type and the docs link.
type i32ErrorEnvelope struct {
	Error struct {
		Code      string         `json:"code"`
		Type      string         `json:"type"`
		Message   string         `json:"message"`
		Retryable bool           `json:"retryable"`
		Details   map[string]any `json:"details"`
		RequestID string         `json:"request_id"`
		DocsURL   string         `json:"docs_url"`
	} `json:"error"`
}

// binding32 sends one operation over HTTP (nc nil) or over the NATS
// binding, where the path's values travel as body fields.
type binding32 struct {
	t    *testing.T
	name string
	base string
	nc   *nats.Conn
}

// bindings32 starts a jetgate and returns its two bindings.
func bindings32(t *testing.T) (h, n binding32) {
	t.Helper()
	s := startApp(t, app.Config{})
	nc, _ := connectApp(t, s)
	return binding32{t: t, name: "HTTP", base: s.URL()}, binding32{t: t, name: "NATS", nc: nc}
}

// do sends body (plus pathVals over NATS) and returns the status (over
// NATS its Nats-Service-Error-Code, 200 on success) and the raw answer.
func (b binding32) do(method, path, op string, body, pathVals map[string]any) (int, []byte) {
	b.t.Helper()
	if b.nc != nil {
		m := map[string]any{}
		for k, v := range body {
			m[k] = v
		}
		for k, v := range pathVals {
			m[k] = v
		}
		data, err := json.Marshal(m)
		if err != nil {
			b.t.Fatal(err)
		}
		res, err := b.nc.Request("ojs.v1."+op, data, 30*time.Second)
		if err != nil {
			b.t.Fatalf("NATS %s: %v", op, err)
		}
		status := http.StatusOK
		if h := res.Header.Get(micro.ErrorCodeHeader); h != "" {
			if status, err = strconv.Atoi(h); err != nil {
				b.t.Fatalf("NATS %s: error code header %q", op, h)
			}
		}
		return status, res.Data
	}
	var in any
	if body != nil {
		in = body
	}
	res, raw := ojsHTTP(b.t, nil, method, b.base+path, in)
	return res.StatusCode, raw
}

// must is do for a step that must succeed, decoding the answer into out.
func (b binding32) must(method, path, op string, body, pathVals map[string]any, out any) []byte {
	b.t.Helper()
	status, raw := b.do(method, path, op, body, pathVals)
	if status/100 != 2 {
		b.t.Fatalf("%s %s: status %d: %s", b.name, op, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s %s: the clients cannot decode the answer into %T: %v\n%s", b.name, op, out, err, raw)
		}
	}
	return raw
}

// refused is do for a step that must fail with status, decoding the
// envelope as the clients do.
func (b binding32) refused(status int, method, path, op string, body, pathVals map[string]any) (i32ErrorEnvelope, []byte) {
	b.t.Helper()
	got, raw := b.do(method, path, op, body, pathVals)
	var env i32ErrorEnvelope
	if got != status {
		b.t.Fatalf("%s %s: status %d, want %d: %s", b.name, op, got, status, raw)
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Code == "" {
		b.t.Fatalf("%s %s: not the OJS error envelope: %v %s", b.name, op, err, raw)
	}
	return env, raw
}

func (b binding32) enqueue(job map[string]any) string {
	b.t.Helper()
	var a i32JobAnswer
	b.must("POST", "/ojs/v1/jobs", "jobs.enqueue", job, nil, &a)
	return a.Job.ID
}

// fetchWithin polls fetch as the clients' poll loop does until a job
// comes, and returns it with the raw answer.
func (b binding32) fetchWithin(queue string, within time.Duration) (i32Job, []byte) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var a i32FetchAnswer
		raw := b.must("POST", "/ojs/v1/workers/fetch", "workers.fetch",
			map[string]any{"queues": []string{queue}, "count": 1, "worker_id": "w-32"}, nil, &a)
		if len(a.Jobs) == 1 {
			return a.Jobs[0], raw
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: no job on %s within %s", b.name, queue, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b binding32) nack(body map[string]any) (i32NackAnswer, []byte) {
	b.t.Helper()
	var a i32NackAnswer
	raw := b.must("POST", "/ojs/v1/workers/nack", "workers.nack", body, nil, &a)
	return a, raw
}

func (b binding32) get(id string) (i32Job, []byte) {
	b.t.Helper()
	var a i32JobAnswer
	raw := b.must("GET", "/ojs/v1/jobs/"+id, "jobs.get", nil, map[string]any{"id": id}, &a)
	return a.Job, raw
}

// volatile32 are the keys whose values differ between two runs of the
// same steps (ids, times, request ids); sameBody compares only whether
// they are present.
func volatile32(key string) bool {
	switch key {
	case "id", "job_id", "request_id", "existing_job_id", "resource_id":
		return true
	}
	return strings.HasSuffix(key, "_at")
}

// mask replaces the values of volatile keys (and of the extra keys) by a
// marker, at any depth.
func mask(v any, extra map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if volatile32(k) || extra[k] {
				out[k] = "<set>"
				continue
			}
			out[k] = mask(e, extra)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mask(e, extra)
		}
		return out
	}
	return v
}

// sameBody checks that the NATS binding answered the body HTTP answered
// for the same step: the same keys, the same values but for ids, times,
// request ids and the extra keys named.
func sameBody(t *testing.T, step string, h, n []byte, extra ...string) {
	t.Helper()
	ex := map[string]bool{}
	for _, k := range extra {
		ex[k] = true
	}
	var hv, nv any
	if err := json.Unmarshal(h, &hv); err != nil {
		t.Fatalf("%s: HTTP answer: %v %s", step, err, h)
	}
	if err := json.Unmarshal(n, &nv); err != nil {
		t.Fatalf("%s: NATS answer: %v %s", step, err, n)
	}
	if hm, nm := mask(hv, ex), mask(nv, ex); !reflect.DeepEqual(hm, nm) {
		hb, _ := json.Marshal(hm)
		nb, _ := json.Marshal(nm)
		t.Errorf("%s: the NATS binding answers another body than HTTP\nHTTP: %s\nNATS: %s", step, hb, nb)
	}
}

// retry32 is the official clients' retry policy shape, with a fixed
// backoff so that delays are exact.
func retry32(maxAttempts int, initialMS int64) map[string]any {
	return map[string]any{"max_attempts": maxAttempts, "initial_interval_ms": initialMS,
		"backoff_coefficient": 2, "max_interval_ms": 60_000, "jitter": false, "non_retryable_errors": []string{}}
}

func job32(queue string, retry map[string]any) map[string]any {
	return map[string]any{"type": "email.send", "args": []any{"ada@example.com"},
		"options": map[string]any{"queue": queue, "retry": retry}}
}

// Issue 32: a job that reaches discarded carries completed_at, the time of
// its terminal state (its discarded_at), in the nack answer and in GET
// /ojs/v1/jobs/{id}, as a completed job does; over NATS alike.
func TestIssue32DiscardedJobCarriesCompletedAt(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	run := func(b binding32) (nackRaw, getRaw []byte) {
		id := b.enqueue(job32("i32-discard", retry32(1, 100)))
		if j, _ := b.fetchWithin("i32-discard", 10*time.Second); j.ID != id {
			b.t.Fatalf("%s: fetched %s, want %s", b.name, j.ID, id)
		}
		before := time.Now().Add(-time.Second)
		a, nackRaw := b.nack(map[string]any{"job_id": id, "error": map[string]any{"code": "handler_error", "message": "boom", "retryable": true}})
		if a.State != "discarded" || a.CompletedAt == nil || a.DiscardedAt == nil || !a.CompletedAt.Equal(*a.DiscardedAt) ||
			a.CompletedAt.Before(before) || a.CompletedAt.After(time.Now().Add(time.Second)) {
			b.t.Fatalf("%s: discarding nack answers %s, want state discarded with completed_at = discarded_at (now)", b.name, nackRaw)
		}
		j, getRaw := b.get(id)
		if j.State != "discarded" || j.CompletedAt == nil || !j.CompletedAt.Equal(*a.CompletedAt) || j.DiscardedAt == nil || !j.DiscardedAt.Equal(*j.CompletedAt) {
			b.t.Fatalf("%s: GET of the discarded job: %s, want completed_at %v = discarded_at", b.name, getRaw, a.CompletedAt)
		}
		return nackRaw, getRaw
	}
	hNack, hGet := run(h)
	nNack, nGet := run(n)
	sameBody(t, "nack that discards", hNack, nNack)
	sameBody(t, "GET of a discarded job", hGet, nGet)
}

// Issue 32: a nack's error keeps a type, the one the worker sent, else its
// code (else handler_error for a bare message), in job.error and in each
// entry of the errors history. The same attempts carry retry_delay_ms when
// fetched as retries (TestIssue32FetchedRetryCarriesRetryDelay).
func TestIssue32NackErrorKeepsType(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	run := func(b binding32) []byte {
		const q = "i32-type"
		id := b.enqueue(job32(q, retry32(3, 50)))
		nacks := []any{
			map[string]any{"code": "E_CONN", "message": "connection refused", "retryable": true},
			map[string]any{"type": "ConnectionTimeout", "code": "handler_error", "message": "timed out", "retryable": true},
			"out of memory", // a bare message: the type of a handler error
		}
		wantTypes := []string{"E_CONN", "ConnectionTimeout", "handler_error"}
		for i, e := range nacks {
			j, _ := b.fetchWithin(q, 10*time.Second)
			if j.ID != id || j.Attempt != i+1 {
				b.t.Fatalf("%s: fetched %s attempt %d, want %s attempt %d", b.name, j.ID, j.Attempt, id, i+1)
			}
			b.nack(map[string]any{"job_id": id, "error": e})
			got, raw := b.get(id)
			if got.Error == nil || got.Error.Type != wantTypes[i] || len(got.Errors) != i+1 {
				b.t.Fatalf("%s: after nack %d the job reads %s, want error.type %q and %d history entries", b.name, i+1, raw, wantTypes[i], i+1)
			}
			for k, he := range got.Errors {
				if he.Type != wantTypes[k] || he.Attempt != k+1 {
					b.t.Fatalf("%s: errors[%d] = %+v, want type %q attempt %d", b.name, k, he, wantTypes[k], k+1)
				}
			}
		}
		_, raw := b.get(id)
		return raw
	}
	sameBody(t, "GET of a job with three typed errors", run(h), run(n))
}

// Issue 32: a fetched job that is a retry carries retry_delay_ms, the
// backoff that preceded this attempt (here exact: no jitter, 80 ms then
// 160 ms); a first attempt carries none.
func TestIssue32FetchedRetryCarriesRetryDelay(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	run := func(b binding32) [][]byte {
		const q = "i32-delay"
		id := b.enqueue(job32(q, retry32(3, 80)))
		var raws [][]byte
		for attempt, want := range []int64{0, 80, 160} {
			j, raw := b.fetchWithin(q, 10*time.Second)
			raws = append(raws, raw)
			if j.ID != id || j.Attempt != attempt+1 {
				b.t.Fatalf("%s: fetched %s attempt %d, want %s attempt %d", b.name, j.ID, j.Attempt, id, attempt+1)
			}
			switch {
			case want == 0 && j.RetryDelayMS != nil:
				b.t.Fatalf("%s: the first attempt carries retry_delay_ms: %s", b.name, raw)
			case want != 0 && (j.RetryDelayMS == nil || *j.RetryDelayMS != want):
				b.t.Fatalf("%s: retry attempt %d: %s, want retry_delay_ms %d", b.name, j.Attempt, raw, want)
			}
			b.nack(map[string]any{"job_id": id, "error": map[string]any{"code": "E_FLAKY", "message": "try again", "retryable": true}})
		}
		return raws
	}
	hr, nr := run(h), run(n)
	for i := range hr {
		sameBody(t, fmt.Sprintf("fetch of attempt %d", i+1), hr[i], nr[i])
	}
}

// Issue 32: "id": "" is refused like any other malformed id (it was 201),
// single and in a batch, with the same envelope over NATS.
func TestIssue32EmptyIDRefused(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	run := func(b binding32) (single, batch []byte) {
		j := job32("i32-id", nil)
		delete(j["options"].(map[string]any), "retry")
		j["id"] = ""
		env, single := b.refused(http.StatusBadRequest, "POST", "/ojs/v1/jobs", "jobs.enqueue", j, nil)
		j["id"] = "job-1"
		other, _ := b.refused(http.StatusBadRequest, "POST", "/ojs/v1/jobs", "jobs.enqueue", j, nil)
		if env.Error.Code != other.Error.Code || env.Error.Code != "invalid_payload" || env.Error.Details["field"] != "id" ||
			env.Error.Details["rule"] != other.Error.Details["rule"] || !strings.Contains(env.Error.Message, "'id'") {
			b.t.Fatalf("%s: \"id\":\"\" answers %s, want it refused as \"job-1\" is: %+v", b.name, single, other.Error)
		}
		j["id"] = ""
		benv, batch := b.refused(http.StatusBadRequest, "POST", "/ojs/v1/jobs/batch", "jobs.batch",
			map[string]any{"jobs": []any{job32("i32-id", nil), j}}, nil)
		if benv.Error.Details["field"] != "jobs[1].id" {
			b.t.Fatalf("%s: batch with an empty id answers %s, want jobs[1].id named", b.name, batch)
		}
		if _, raw := b.fetchWithinOrNone("i32-id"); raw != nil {
			b.t.Fatalf("%s: a refused job was stored: %s", b.name, raw)
		}
		return single, batch
	}
	hs, hb := run(h)
	ns, nb := run(n)
	sameBody(t, "enqueue with an empty id", hs, ns)
	sameBody(t, "batch with an empty id", hb, nb)
}

// fetchWithinOrNone fetches once and returns the raw answer when it held
// a job.
func (b binding32) fetchWithinOrNone(queue string) (i32Job, []byte) {
	b.t.Helper()
	var a i32FetchAnswer
	raw := b.must("POST", "/ojs/v1/workers/fetch", "workers.fetch", map[string]any{"queues": []string{queue}, "count": 1}, nil, &a)
	if len(a.Jobs) == 0 {
		return i32Job{}, nil
	}
	return a.Jobs[0], raw
}

// Issue 32 (ojs-retry.md 11.1): a retry policy out of range is 422 with
// error.type validation_error and a message naming the field, single and
// in a batch; a retry that is not an object stays 400.
func TestIssue32RetryPolicyOutOfRangeIs422(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	cases := []struct {
		name, field string
		retry       map[string]any
	}{
		{"max_attempts below 0", "options.retry.max_attempts", map[string]any{"max_attempts": -1}},
		{"backoff_coefficient below 1", "options.retry.backoff_coefficient", map[string]any{"max_attempts": 3, "backoff_coefficient": 0.5}},
		{"max_interval below initial_interval", "options.retry.max_interval_ms", map[string]any{"initial_interval_ms": 5000, "max_interval_ms": 1000}},
		{"on_exhaustion unknown", "options.retry.on_exhaustion", map[string]any{"on_exhaustion": "forever"}},
	}
	run := func(b binding32) [][]byte {
		var raws [][]byte
		for _, c := range cases {
			env, raw := b.refused(http.StatusUnprocessableEntity, "POST", "/ojs/v1/jobs", "jobs.enqueue", job32("i32-retry", c.retry), nil)
			if env.Error.Type != "validation_error" || env.Error.Code != "invalid_payload" || env.Error.Retryable ||
				env.Error.Details["field"] != c.field || !strings.Contains(env.Error.Message, "'"+c.field+"'") {
				b.t.Errorf("%s: %s answers %s, want 422 type validation_error naming %s", b.name, c.name, raw, c.field)
			}
			raws = append(raws, raw)
		}
		env, raw := b.refused(http.StatusUnprocessableEntity, "POST", "/ojs/v1/jobs/batch", "jobs.batch",
			map[string]any{"jobs": []any{job32("i32-retry", nil), job32("i32-retry", map[string]any{"max_attempts": -1})}}, nil)
		if env.Error.Type != "validation_error" || env.Error.Details["field"] != "jobs[1].options.retry.max_attempts" {
			b.t.Errorf("%s: batch answers %s, want 422 validation_error naming jobs[1].options.retry.max_attempts", b.name, raw)
		}
		raws = append(raws, raw)
		j := job32("i32-retry", nil)
		j["options"].(map[string]any)["retry"] = 5
		env, raw = b.refused(http.StatusBadRequest, "POST", "/ojs/v1/jobs", "jobs.enqueue", j, nil)
		if env.Error.Type != "invalid_payload" {
			b.t.Errorf("%s: a retry that is not an object answers %s, want 400 invalid_payload", b.name, raw)
		}
		if _, got := b.fetchWithinOrNone("i32-retry"); got != nil {
			b.t.Fatalf("%s: a refused job was stored: %s", b.name, got)
		}
		return append(raws, raw)
	}
	hr, nr := run(h), run(n)
	for i := range hr {
		sameBody(t, fmt.Sprintf("refusal %d", i), hr[i], nr[i])
	}
}

// Issue 32: every error envelope carries docs_url, a link to the section
// of docs/reference.md for its code, over HTTP and NATS: an error of each
// kind a client meets, and the section exists in the reference.
func TestIssue32ErrorEnvelopesLinkTheirDocs(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	doc, err := os.ReadFile("../../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	const unknown = "019a0000-0000-7000-8000-000000000000"
	type call struct {
		status               int
		method, path, op     string
		body, pathVals       map[string]any
		code, heading, field string
	}
	calls := []call{
		{404, "GET", "/ojs/v1/jobs/" + unknown, "jobs.get", nil, map[string]any{"id": unknown}, "not_found", "### Error `not_found`", ""},
		{400, "POST", "/ojs/v1/workers/fetch", "workers.fetch", map[string]any{"queues": []string{"q"}, "count": 0}, nil, "invalid_request", "### Error `invalid_request`", "count"},
		{400, "POST", "/ojs/v1/jobs", "jobs.enqueue", map[string]any{"args": []any{}}, nil, "invalid_payload", "### Error `invalid_payload`", "type"},
		{422, "POST", "/ojs/v1/jobs", "jobs.enqueue", job32("q", map[string]any{"max_attempts": -1}), nil, "invalid_payload", "### Error `invalid_payload`", "options.retry.max_attempts"},
		{404, "POST", "/ojs/v1/workers/ack", "workers.ack", map[string]any{"job_id": unknown}, nil, "not_found", "### Error `not_found`", ""},
	}
	for _, c := range calls {
		if !strings.Contains(string(doc), "\n"+c.heading+"\n") {
			t.Fatalf("docs/reference.md has no section %q", c.heading)
		}
		want := "https://github.com/jetgate/jetgate/blob/main/docs/reference.md#error-" + strings.ToLower(c.code)
		var raws [][]byte
		for _, b := range []binding32{h, n} {
			env, raw := b.refused(c.status, c.method, c.path, c.op, c.body, c.pathVals)
			if env.Error.Code != c.code || env.Error.DocsURL != want || env.Error.Type == "" {
				t.Errorf("%s %s: %s, want code %s with docs_url %s", b.name, c.op, raw, c.code, want)
			}
			if c.field != "" && env.Error.Details["field"] != c.field {
				t.Errorf("%s %s: %s, want details.field %s", b.name, c.op, raw, c.field)
			}
			raws = append(raws, raw)
		}
		sameBody(t, c.method+" "+c.path, raws[0], raws[1])
	}
	// A 405 and an unknown route exist over HTTP only.
	for _, c := range []call{{405, "PUT", "/ojs/v1/workers/fetch", "", nil, nil, "invalid_request", "", ""},
		{404, "GET", "/ojs/v1/nowhere", "", nil, nil, "not_found", "", ""}} {
		env, raw := h.refused(c.status, c.method, c.path, "", nil, nil)
		if want := "https://github.com/jetgate/jetgate/blob/main/docs/reference.md#error-" + c.code; env.Error.DocsURL != want {
			t.Errorf("%s %s: %s, want docs_url %s", c.method, c.path, raw, want)
		}
	}
}

// Issue 32: a nack with "requeue": true (a worker handing a job back at
// shutdown) makes the job available at once; its attempt is not a failure:
// the attempt count is given back, no error enters the history, no backoff
// waits. With max_attempts 1, a counted failure would have discarded it.
func TestIssue32RequeueHandsTheJobBack(t *testing.T) {
	t.Parallel()
	h, n := bindings32(t)
	run := func(b binding32) [][]byte {
		const q = "i32-requeue"
		id := b.enqueue(job32(q, retry32(1, 60_000)))
		j, _ := b.fetchWithin(q, 10*time.Second)
		if j.ID != id || j.Attempt != 1 {
			b.t.Fatalf("%s: fetched %s attempt %d", b.name, j.ID, j.Attempt)
		}
		a, nackRaw := b.nack(map[string]any{"job_id": id, "requeue": true,
			"error": map[string]any{"type": "shutdown", "message": "worker stopping"}})
		if a.State != "available" || !a.Requeued || a.Attempt != 0 || a.NextAttemptAt != nil || a.RetryDelayMS != nil {
			b.t.Fatalf("%s: requeue answers %s, want available, requeued, attempt 0, no retry", b.name, nackRaw)
		}
		got, getRaw := b.get(id)
		if got.State != "available" || got.Attempt != 0 || got.Error != nil || len(got.Errors) != 0 || got.CompletedAt != nil {
			b.t.Fatalf("%s: the requeued job reads %s, want available, attempt 0, no error history", b.name, getRaw)
		}
		// Available at once: the very next fetch gets it, attempt 1 again.
		var fa i32FetchAnswer
		fetchRaw := b.must("POST", "/ojs/v1/workers/fetch", "workers.fetch",
			map[string]any{"queues": []string{q}, "count": 1, "worker_id": "w-32"}, nil, &fa)
		if len(fa.Jobs) != 1 || fa.Jobs[0].ID != id || fa.Jobs[0].Attempt != 1 {
			b.t.Fatalf("%s: the fetch right after the requeue answers %s, want %s attempt 1", b.name, fetchRaw, id)
		}
		// A requeue needs no error; a second one gives the attempt back too.
		if a, raw := b.nack(map[string]any{"job_id": id, "requeue": true}); a.State != "available" || a.Attempt != 0 {
			b.t.Fatalf("%s: requeue without error answers %s", b.name, raw)
		}
		if j, raw := b.fetchWithin(q, 10*time.Second); j.Attempt != 1 {
			b.t.Fatalf("%s: fetch after the second requeue: %s", b.name, raw)
		}
		// The one real failure it is allowed discards it: no attempt was used before.
		d, discardRaw := b.nack(map[string]any{"job_id": id, "error": map[string]any{"code": "E", "message": "failed"}})
		if d.State != "discarded" || d.Attempt != 1 {
			b.t.Fatalf("%s: the failure after two requeues answers %s, want discarded at attempt 1", b.name, discardRaw)
		}
		final, finalRaw := b.get(id)
		if len(final.Errors) != 1 || final.Errors[0].Type != "E" {
			b.t.Fatalf("%s: history %s, want the one failure only", b.name, finalRaw)
		}
		// A requeue of a job that is not active is a 409, as a late nack is.
		b.refused(http.StatusConflict, "POST", "/ojs/v1/workers/nack", "workers.nack", map[string]any{"job_id": id, "requeue": true}, nil)
		return [][]byte{nackRaw, getRaw, fetchRaw, discardRaw, finalRaw}
	}
	hr, nr := run(h), run(n)
	for i, step := range []string{"requeue answer", "GET of the requeued job", "fetch after requeue", "failure after requeues", "GET at the end"} {
		sameBody(t, step, hr[i], nr[i])
	}
}
