package httpbind

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jetgate/jetgate/admission/ojs"
)

const sdkEnqueue = `{"type":"email.send","args":["a@example.com"],"options":{"queue":"email"}}`

// ojs-http-binding.md 6.5 and 19.1: every response carries Content-Type,
// OJS-Version and a generated req_<UUIDv7> request id.
func TestHeaders_Success_6_5(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodGet, "/ojs/manifest", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
	id := r.Header.Get("X-Request-Id")
	u, err := uuid.Parse(strings.TrimPrefix(id, "req_"))
	if !strings.HasPrefix(id, "req_") || err != nil || u.Version() != 7 {
		t.Errorf("X-Request-Id = %q, want req_<UUIDv7>", id)
	}
}

// 16.1: an unknown path answers the envelope with 404 not_found.
func TestHeaders_UnknownPath_404(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, path := range []string{"/nope", "/ojs/v1/cron", "/ojs/v1/jobs/", "/ojs//v1/jobs"} {
		r := b.do(t, http.MethodGet, path, "", nil)
		d := r.wantError(t, http.StatusNotFound, ojs.CodeNotFound, false)
		wantHeaders(t, r)
		if d["resource_id"] != path {
			t.Errorf("%s: details = %v", path, d)
		}
	}
}

// A known path with the wrong method answers 405 with an Allow header and
// the allowed methods in details.
func TestHeaders_MethodNotAllowed_405(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := ojs.NewID()
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/ojs/v1/jobs", "POST"},
		{http.MethodGet, "/ojs/v1/workers/fetch", "POST"},
		{http.MethodDelete, "/ojs/v1/queues", "GET, HEAD"},
		{http.MethodPatch, "/ojs/v1/jobs/" + id, "GET, HEAD, DELETE"},
		{http.MethodGet, "/ojs/v1/dead-letter/" + id, "DELETE"},
	} {
		r := b.do(t, tc.method, tc.path, "", nil)
		d := r.wantError(t, http.StatusMethodNotAllowed, ojs.CodeInvalidRequest, false)
		wantHeaders(t, r)
		if got := r.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		if _, ok := d["allowed"].([]any); !ok {
			t.Errorf("%s %s: details = %v", tc.method, tc.path, d)
		}
	}
	if calls := b.fake.called(); len(calls) != 0 {
		t.Errorf("backend called: %v", calls)
	}
}

// Issue 31: GET /ojs/v1/jobs (a listing a new user tries first) answers
// 405 with a hint that names where jobs are listed, GET /ojs/v1/admin/jobs.
func TestIssue31GetJobsHintsAdminListing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, path := range []string{"/ojs/v1/jobs", "/ojs/v1/jobs/"} {
		r := b.do(t, http.MethodGet, path, "", nil)
		if r.StatusCode == http.StatusNotFound && path == "/ojs/v1/jobs/" {
			continue // the router does not serve the trailing slash at all
		}
		r.wantError(t, http.StatusMethodNotAllowed, ojs.CodeInvalidRequest, false)
		e, _ := r.body["error"].(map[string]any)
		if hint, _ := e["hint"].(string); !strings.Contains(hint, "GET /ojs/v1/admin/jobs") {
			t.Errorf("GET %s: hint %q does not name GET /ojs/v1/admin/jobs", path, hint)
		}
	}
	// Other 405s keep the hint about the Allow header.
	r := b.do(t, http.MethodGet, "/ojs/v1/workers/fetch", "", nil)
	r.wantError(t, http.StatusMethodNotAllowed, ojs.CodeInvalidRequest, false)
	if e, _ := r.body["error"].(map[string]any); !strings.Contains(e["hint"].(string), "Allow") {
		t.Errorf("GET /ojs/v1/workers/fetch: hint %v", e["hint"])
	}
}

// A panic in the backend answers a 500 backend_error envelope with the usual
// headers, leaks nothing, and is logged with its stack.
func TestHeaders_Panic_500(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.panicWith = "secret internals"
	r := b.do(t, http.MethodGet, "/ojs/v1/jobs/"+ojs.NewID(), "", nil)
	r.wantError(t, http.StatusInternalServerError, ojs.CodeBackendError, true)
	wantHeaders(t, r)
	if strings.Contains(string(r.raw), "secret") {
		t.Errorf("panic value leaked: %s", r.raw)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "panic serving request") || !strings.Contains(logs, "secret internals") ||
		!strings.Contains(logs, "goroutine") {
		t.Errorf("panic not logged with stack:\n%s", logs)
	}
}

// 413 payload_too_large names the limit, both when Content-Length says so
// up front and when a chunked body runs over.
func TestHeaders_TooLarge_413(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxBodyBytes: 1024, MaxBatchBodyBytes: 4096})
	big := `{"type":"email.send","args":["` + strings.Repeat("x", 2000) + `"]}`

	r := b.do(t, http.MethodPost, "/ojs/v1/jobs", big, nil)
	r.wantError(t, http.StatusRequestEntityTooLarge, ojs.CodePayloadTooLarge, false)
	wantHeaders(t, r)
	if msg := r.obj(t, "error")["message"].(string); !strings.Contains(msg, "1024") {
		t.Errorf("message %q does not name the limit", msg)
	}

	// Chunked: no Content-Length, so the limit trips while reading.
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/ojs/v1/jobs", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Content-Type", MediaType)
	r = send(t, req)
	r.wantError(t, http.StatusRequestEntityTooLarge, ojs.CodePayloadTooLarge, false)
	wantHeaders(t, r)

	// Batches have their own, larger limit.
	batch := `{"jobs":[` + big + `]}`
	b.do(t, http.MethodPost, "/ojs/v1/jobs/batch", batch, nil).wantStatus(t, http.StatusCreated)
	if calls := b.fake.called(); len(calls) != 1 || calls[0] != "EnqueueBatch" {
		t.Errorf("calls = %v", calls)
	}
}

// 4.1, 4.2: application/openjobspec+json and application/json are accepted
// with or without parameters; a JSON body without Content-Type is accepted;
// anything else is 400 naming the header.
func TestContentType_4_1(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, ct := range []string{
		"application/json",
		"application/openjobspec+json",
		"application/openjobspec+json; charset=utf-8",
		"Application/JSON; charset=UTF-8",
	} {
		b.do(t, http.MethodPost, "/ojs/v1/jobs", sdkEnqueue, map[string]string{"Content-Type": ct}).
			wantStatus(t, http.StatusCreated)
	}
	// No Content-Type at all.
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/ojs/v1/jobs", strings.NewReader(sdkEnqueue))
	send(t, req).wantStatus(t, http.StatusCreated)

	for _, ct := range []string{"text/plain", "application/xml", "application/", "multipart/form-data; boundary=x"} {
		r := b.do(t, http.MethodPost, "/ojs/v1/jobs", sdkEnqueue, map[string]string{"Content-Type": ct})
		d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false)
		wantHeaders(t, r)
		if d["field"] != "Content-Type" {
			t.Errorf("%s: details = %v", ct, d)
		}
	}
	// A POST without a body is not checked (pause sends no body).
	b.do(t, http.MethodPost, "/ojs/v1/queues/email/pause", "", map[string]string{"Content-Type": "text/plain"}).
		wantStatus(t, http.StatusOK)
}

// 19.2: a client X-Request-Id is echoed; an unsafe one is replaced.
func TestRequestID_19_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const mine = "req_client-019414d4-ffff-7000-a000-123456789abc"
	r := b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"X-Request-Id": mine})
	if got := r.Header.Get("X-Request-Id"); got != mine {
		t.Errorf("X-Request-Id = %q, want echo %q", got, mine)
	}
	r = b.do(t, http.MethodGet, "/nope", "", map[string]string{"X-Request-Id": mine})
	if e := r.obj(t, "error"); e["request_id"] != mine {
		t.Errorf("error.request_id = %v", e["request_id"])
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "tab\there"} {
		r := b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"X-Request-Id": bad})
		if got := r.Header.Get("X-Request-Id"); got == bad || !strings.HasPrefix(got, "req_") {
			t.Errorf("X-Request-Id for %q = %q, want a generated id", bad, got)
		}
	}
}

// 3.2: a requested major version other than 1 is 422 unsupported; the Go
// SDK's "1.0.0-rc.1" is accepted.
func TestVersion_3_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, v := range []string{"1.0.0-rc.1", "1.0", "1", "v1", "1.3"} {
		b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"OJS-Version": v}).
			wantStatus(t, http.StatusOK)
	}
	for _, v := range []string{"2.0", "0.9", "3"} {
		r := b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"OJS-Version": v})
		d := r.wantError(t, http.StatusUnprocessableEntity, ojs.CodeUnsupported, false)
		wantHeaders(t, r)
		if d["requested_version"] != v {
			t.Errorf("%s: details = %v", v, d)
		}
	}
	// The manifest answers whatever the version, so clients can discover it.
	b.do(t, http.MethodGet, "/ojs/manifest", "", map[string]string{"OJS-Version": "2.0"}).
		wantStatus(t, http.StatusOK)
	r := b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"OJS-Version": "banana"})
	if d := r.wantError(t, http.StatusBadRequest, ojs.CodeInvalidRequest, false); d["field"] != "OJS-Version" {
		t.Errorf("details = %v", d)
	}
}

// One debug line per request with method, path, status and request id.
func TestLogging_OneLinePerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.do(t, http.MethodGet, "/ojs/v1/health", "", map[string]string{"X-Request-Id": "req_log-test"})
	r.wantStatus(t, http.StatusOK)
	logs := b.logs.String()
	for _, want := range []string{"level=DEBUG", "method=GET", "path=/ojs/v1/health", "status=200",
		"request_id=req_log-test", "duration="} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, "req_log-test"); n != 1 {
		t.Errorf("%d log lines for one request:\n%s", n, logs)
	}
}

// HEAD is served wherever GET is (health probes).
func TestHead(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.health = ojs.Health{Status: "ok"}
	r := b.do(t, http.MethodHead, "/ojs/v1/health", "", nil).wantStatus(t, http.StatusOK)
	wantHeaders(t, r)
}

// A panic after the response has started cannot become an envelope: the
// connection is aborted so the client never mistakes a truncated body for a
// whole one, and the panic is still logged.
func TestPanicAfterWrite_Aborts(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	h, err := New(&fakeBackend{}, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.(*server).router.HandleFunc("/boom", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", MediaType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"jobs":[`))
		w.(http.Flusher).Flush()
		panic("half way")
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/boom")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("a truncated response was delivered as complete")
	}
	if !strings.Contains(logs.String(), "half way") {
		t.Errorf("panic not logged:\n%s", logs.String())
	}
}
