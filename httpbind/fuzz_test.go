package httpbind

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// workerPaths are the endpoints whose bodies httpbind decodes itself
// (enqueue bodies are ojs.ParseJob's and fuzzed there).
var workerPaths = []string{
	"/ojs/v1/workers/fetch",
	"/ojs/v1/workers/ack",
	"/ojs/v1/workers/nack",
	"/ojs/v1/workers/heartbeat",
}

// FuzzWorkerRequests feeds arbitrary bodies to the worker endpoints: the
// answer is always a client error or success with a JSON body, never a 500
// and never a panic. Seeds: f.Add below and testdata/fuzz/FuzzWorkerRequests.
func FuzzWorkerRequests(f *testing.F) {
	id := "019414d4-8b2e-7c3a-b5d1-f0e2a3b4c5d6"
	for _, seed := range []string{
		`{"queues":["email","default"],"count":1,"worker_id":"w1"}`,
		`{"queues":["a"],"count":5,"visibility_timeout_ms":30000}`,
		`{"job_id":"` + id + `","result":{"ok":true}}`,
		`{"job_id":"` + id + `","error":{"code":"handler_error","message":"x","retryable":true}}`,
		`{"job_id":"` + id + `","error":{"type":"shutdown","message":"x","backtrace":["a"]}}`,
		`{"worker_id":"w","state":"running","active_jobs":1,"active_job_ids":["` + id + `"]}`,
		`{"worker_id":"w","active_jobs":["` + id + `"]}`,
		`{"queues":[`, `[]`, `null`, ``, `{"count":1e309}`,
	} {
		for i := range workerPaths {
			f.Add(uint8(i), seed)
		}
	}
	fake := &fakeBackend{
		ackRes:  &ojs.AckResult{State: ojs.StateCompleted},
		nackRes: &ojs.NackResult{State: ojs.StateRetryable},
		beatRes: &ojs.HeartbeatResult{State: ojs.WorkerRunning},
	}
	h, err := New(fake, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path uint8, body string) {
		p := workerPaths[int(path)%len(workerPaths)]
		req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(body))
		req.Header.Set("Content-Type", MediaType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("%s %q: status %d: %s", p, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) || rec.Header().Get("Content-Type") != MediaType {
			t.Fatalf("%s %q: not a JSON answer: %s", p, body, rec.Body)
		}
	})
}
