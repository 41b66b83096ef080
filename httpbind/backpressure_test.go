package httpbind

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// liveServer is the binding over a real admission service and a real
// JetStream server, listening on a loopback port.
type liveServer struct {
	url string
	svc *admission.Service
}

func setupLive(t *testing.T) liveServer {
	t.Helper()
	return setupLiveCfg(t, Config{Extensions: []string{ExtBackpressure}})
}

// setupLiveCfg is setupLive with the binding's cfg.
func setupLiveCfg(tb testing.TB, cfg Config) liveServer {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	_, js := natstest.Connect(tb, natstest.RunServer(tb))
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := admission.New(js.Conn(), js, assets, admission.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Stop)
	h, err := New(svc, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(h)
	tb.Cleanup(ts.Close)
	return liveServer{url: ts.URL, svc: svc}
}

type liveResponse struct {
	status int
	header http.Header
	body   map[string]any
}

func (l liveServer) do(t *testing.T, method, path, body string, hdr map[string]string) liveResponse {
	t.Helper()
	req, err := http.NewRequest(method, l.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", MediaType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := liveResponse{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return out
}

func (r liveResponse) want(t *testing.T, status int) liveResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %v", r.status, status, r.body)
	}
	return r
}

func jobBody(queue string, i int) string {
	return `{"type":"t","args":[` + strconv.Itoa(i) + `],"options":{"queue":"` + queue + `"}}`
}

// BP-003 (6.2): the queue config endpoint accepts the extension's shape,
// the .txt's capacity shape and the queue-config spec's fields, and reads
// back the effective config.
func TestQueueConfigEndpoint_BP003(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	r := l.do(t, http.MethodPut, "/ojs/v1/admin/queues/email/config",
		`{"backpressure":{"max_depth":100,"strategy":"block","warning_threshold":0.7}}`, nil).want(t, http.StatusOK)
	bp := r.body["backpressure"].(map[string]any)
	if bp["max_depth"] != float64(100) || bp["strategy"] != "block" || bp["warning_threshold"] != 0.7 || r.body["source"] != "queue" {
		t.Fatalf("put: %v", r.body)
	}
	r = l.do(t, http.MethodGet, "/ojs/v1/admin/queues/email/config", "", nil).want(t, http.StatusOK)
	if bp := r.body["backpressure"].(map[string]any); bp["max_depth"] != float64(100) {
		t.Fatalf("get: %v", r.body)
	}
	r = l.do(t, http.MethodPut, "/ojs/v1/admin/queues/email/config",
		`{"capacity":{"max_depth":50000,"max_size_bytes":52428800,"on_overflow":"drop_oldest"}}`, nil).want(t, http.StatusOK)
	if bp := r.body["backpressure"].(map[string]any); bp["max_depth"] != float64(50000) || bp["max_size_bytes"] != float64(52428800) ||
		bp["strategy"] != "drop_oldest" || bp["warning_threshold"] != 0.8 {
		t.Fatalf("capacity shape: %v", r.body)
	}
	r = l.do(t, http.MethodPut, "/ojs/v1/queues/email/config", `{"max_size":7,"overflow_policy":"reject"}`, nil).want(t, http.StatusOK)
	if bp := r.body["backpressure"].(map[string]any); bp["max_depth"] != float64(7) || bp["strategy"] != "reject" {
		t.Fatalf("queue-config shape: %v", r.body)
	}
	r = l.do(t, http.MethodPut, "/ojs/v1/admin/queues/email/config", `{"backpressure":{"max_depth":10,"count_active":true}}`, nil).want(t, http.StatusOK)
	if bp := r.body["backpressure"].(map[string]any); bp["max_depth"] != float64(10) || bp["count_active"] != true {
		t.Fatalf("count_active: %v", r.body)
	}
	r = l.do(t, http.MethodPut, "/ojs/v1/admin/queues/email/config", `{"backpressure":null}`, nil).want(t, http.StatusOK)
	if r.body["source"] != "none" {
		t.Fatalf("cleared: %v", r.body)
	}
	for body, field := range map[string]string{
		`{"backpressure":{"strategy":"drop_newest"}}`:    "backpressure.strategy",
		`{"capacity":{"on_overflow":"x"}}`:               "capacity.on_overflow",
		`{"backpressure":{"max_depth":-1}}`:              "backpressure.max_depth",
		`{"backpressure":{"warning_threshold":2}}`:       "backpressure.warning_threshold",
		`{"backpressure":{"tenant_max_depth":3}}`:        "backpressure.tenant_key",
		`{"backpressure":{"count_active":"yes"}}`:        "backpressure.count_active",
		`{"backpressure":{},"capacity":{"max_depth":1}}`: "backpressure",
		`{}`: "backpressure",
	} {
		r := l.do(t, http.MethodPut, "/ojs/v1/admin/queues/email/config", body, nil).want(t, http.StatusBadRequest)
		if d := r.body["error"].(map[string]any)["details"].(map[string]any); d["field"] != field {
			t.Errorf("%s: field %v, want %s", body, d["field"], field)
		}
	}
}

// BP-002, BP-005, BP-R004, 7.1-7.3: pressure headers on every enqueue
// into a bounded queue, and 429 with Retry-After, depth, bound and
// pressure once full; the error envelope is retryable.
func TestBoundedEnqueueHeaders_BP002_BP005(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	l.do(t, http.MethodPut, "/ojs/v1/admin/queues/hq/config", `{"backpressure":{"max_depth":4}}`, nil).want(t, http.StatusOK)
	for i := range 4 {
		r := l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("hq", i), nil).want(t, http.StatusCreated)
		if r.header.Get(HeaderQueueMaxDepth) != "4" || r.header.Get(HeaderQueueBound) != "4" || r.header.Get(HeaderQueuePressure) == "" {
			t.Fatalf("enqueue %d headers: %v", i, r.header)
		}
	}
	r := l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("hq", 9), nil).want(t, http.StatusTooManyRequests)
	for h, want := range map[string]string{"Retry-After": "1", HeaderQueueDepth: "4", HeaderQueueMaxDepth: "4",
		HeaderQueueBound: "4", HeaderQueuePressure: "1"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	e := r.body["error"].(map[string]any)
	d := e["details"].(map[string]any)
	// ojs-backpressure.md 7.1: code QUEUE_FULL with queue, depth, bound and
	// strategy beside it; details keep them too.
	if e["code"] != ojs.CodeQueueFull || e["retryable"] != true || d["reason"] != "QUEUE_FULL" || d["queue"] != "hq" ||
		d["depth"] != float64(4) || d["bound"] != float64(4) || d["strategy"] != "reject" ||
		e["queue"] != "hq" || e["depth"] != float64(4) || e["bound"] != float64(4) || e["strategy"] != "reject" || e["hint"] == "" {
		t.Fatalf("envelope: %v", r.body)
	}
	// A batch that does not fit is refused whole (9.3).
	l.do(t, http.MethodPost, "/ojs/v1/jobs/batch", `{"jobs":[`+jobBody("hq", 1)+`]}`, nil).want(t, http.StatusTooManyRequests)
	// Unbounded queues carry no pressure headers.
	r = l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("free", 1), nil).want(t, http.StatusCreated)
	if r.header.Get(HeaderQueuePressure) != "" {
		t.Fatalf("unbounded queue answered pressure %q", r.header.Get(HeaderQueuePressure))
	}
	// Queue stats expose depth, bound and pressure.
	r = l.do(t, http.MethodGet, "/ojs/v1/queues/hq/stats", "", nil).want(t, http.StatusOK)
	if bp := r.body["backpressure"].(map[string]any); bp["depth"] != float64(4) || bp["max_depth"] != float64(4) || bp["pressure"] != float64(1) {
		t.Fatalf("stats: %v", r.body)
	}
	// The manifest declares the extension.
	r = l.do(t, http.MethodGet, "/ojs/manifest", "", nil).want(t, http.StatusOK)
	if caps := r.body["capabilities"].(map[string]any); caps["backpressure"] != true {
		t.Fatalf("manifest: %v", r.body)
	}
}

// BP-R002: OJS-Block-Timeout holds the request until room frees (201),
// or answers 429 when it runs out; a malformed header is 400.
func TestBlockTimeoutHeader_BPR002(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	l.do(t, http.MethodPut, "/ojs/v1/admin/queues/bq/config", `{"backpressure":{"max_depth":1,"strategy":"block"}}`, nil).want(t, http.StatusOK)
	l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("bq", 0), nil).want(t, http.StatusCreated)
	start := time.Now()
	r := l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("bq", 1), map[string]string{HeaderBlockTimeout: "0.2"}).want(t, http.StatusTooManyRequests)
	if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("answered after %s, before the block timeout", time.Since(start))
	}
	if d := r.body["error"].(map[string]any)["details"].(map[string]any); d["waited_ms"] == nil {
		t.Fatalf("details: %v", d)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var blocked liveResponse
	go func() {
		defer wg.Done()
		blocked = l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("bq", 2), map[string]string{HeaderBlockTimeout: "20"})
	}()
	// Free the room: a worker fetches and acks the first job.
	f := l.do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["bq"],"worker_id":"w"}`, nil).want(t, http.StatusOK)
	id := f.body["jobs"].([]any)[0].(map[string]any)["id"].(string)
	l.do(t, http.MethodPost, "/ojs/v1/workers/ack", `{"job_id":"`+id+`"}`, nil).want(t, http.StatusOK)
	wg.Wait()
	blocked.want(t, http.StatusCreated)
	for _, v := range []string{"x", "-1", "1e9"} {
		l.do(t, http.MethodPost, "/ojs/v1/jobs", jobBody("bq", 3), map[string]string{HeaderBlockTimeout: v}).want(t, http.StatusBadRequest)
	}
}
