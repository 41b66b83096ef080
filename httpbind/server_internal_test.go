package httpbind

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// The hot requests skip the router's walk over its patterns (enqueue,
// batch, fetch, ACK, FAIL, BEAT: ojs-http-binding.md 2.1), and nothing
// else does: GET keeps HEAD with the router, and routes with variables
// need the router's vars.
func TestExactRoutesHoldTheHotRequests(t *testing.T) {
	h, err := New(&fakeBackend{health: ojs.Health{Status: "ok"}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := h.(*server)
	for _, p := range []string{"/ojs/v1/jobs", "/ojs/v1/jobs/batch", "/ojs/v1/workers/fetch",
		"/ojs/v1/workers/ack", "/ojs/v1/workers/nack", "/ojs/v1/workers/heartbeat"} {
		if s.exact[methodPath{http.MethodPost, p}] == nil {
			t.Errorf("POST %s is not served by the exact table", p)
		}
	}
	for k := range s.exact {
		if k.method == http.MethodGet || k.method == http.MethodHead {
			t.Errorf("%s %s in the exact table", k.method, k.path)
		}
	}
}

// A route the router would not pick for its own method and path, because
// an earlier pattern matches first, stays out of the table, so the table
// never answers differently from the router.
func TestExactRoutesLeaveShadowedRoutesToTheRouter(t *testing.T) {
	s := &server{router: mux.NewRouter()}
	s.router.SkipClean(true)
	hit := ""
	mk := func(name string) http.Handler {
		return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = name })
	}
	routes := []route{
		{method: http.MethodPost, path: "/x/{id}"},
		{method: http.MethodPost, path: "/x/batch"},
		{method: http.MethodPost, path: "/y"},
	}
	registered := []*mux.Route{
		s.router.Handle("/x/{id}", mk("pattern")).Methods(http.MethodPost),
		s.router.Handle("/x/batch", mk("batch")).Methods(http.MethodPost),
		s.router.Handle("/y", mk("y")).Methods(http.MethodPost),
	}
	s.exact = s.exactRoutes(routes, registered)
	if _, ok := s.exact[methodPath{http.MethodPost, "/x/batch"}]; ok {
		t.Fatal("a shadowed route is in the exact table")
	}
	h, ok := s.exact[methodPath{http.MethodPost, "/y"}]
	if !ok {
		t.Fatal("POST /y is not in the exact table")
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/y", nil))
	if hit != "y" {
		t.Fatalf("POST /y reached %q", hit)
	}
}

// 9.2 PUSH (batch): writeJobs answers a batch with the bytes
// encoding/json wrote for wire.BatchReply of the jobs' public forms
// ({"jobs": [...], "count": n}), a nil job left out of both.
func TestBatchAnswerMatchesBatchReply_9_2(t *testing.T) {
	s := &server{}
	at := ojs.NewTime(time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC))
	jobs := []*ojs.Job{
		{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "email.send", Queue: "email", Args: json.RawMessage(`["a"]`),
			State: ojs.StateAvailable, CreatedAt: at, EnqueuedAt: at, Internal: ojs.Internal{Token: "secret"}},
		nil,
		{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "email.send", Queue: "email", Args: json.RawMessage(`[{"to":"b"}]`),
			Priority: 7, State: ojs.StateScheduled, CreatedAt: at, ScheduledAt: at},
	}
	rec := httptest.NewRecorder()
	s.writeJobs(rec, httptest.NewRequest(http.MethodPost, "/ojs/v1/jobs/batch", nil), http.StatusCreated, "jobs", nil, jobs, true)
	out := wire.PublicJobs(jobs)
	want, err := json.Marshal(wire.BatchReply{Jobs: out, Count: len(out)})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != string(want)+"\n" {
		t.Fatalf("batch answer\n got %s\nwant %s", got, want)
	}
	if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != MediaType {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}
