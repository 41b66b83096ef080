package natsbind_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 19 "Batch worker operations": one ackbatch acks many jobs, each
// item with its own result in order; an unknown job (404), a job not
// active (409) and an item without job_id (400 naming acks[i].job_id)
// fail alone while the others complete.
func TestIssue19AckBatchMixedResults(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	for range 3 {
		f.enqueue("ab")
	}
	ids := f.fetchAll("ab", 3)
	done := f.enqueue("ab-other") // available, not active
	a := f.nats("workers.ackbatch", map[string]any{"acks": []any{
		map[string]any{"job_id": ids[0], "result": map[string]any{"n": 0}},
		map[string]any{"job_id": unknownID},
		map[string]any{"job_id": ids[1]},
		map[string]any{"result": 1},
		map[string]any{"job_id": done},
		map[string]any{"job_id": ids[2]},
	}}).must(t, "ackbatch")
	res := list(a.body["results"])
	if len(res) != 6 {
		t.Fatalf("%d results for 6 items: %s", len(res), a.raw)
	}
	for _, i := range []int{0, 2, 5} {
		r := obj(res[i])
		if r["acknowledged"] != true || r["state"] != "completed" || r["job_id"] == "" {
			t.Errorf("item %d: %v, want acknowledged", i, r)
		}
	}
	for i, want := range map[int]struct {
		status float64
		code   string
		field  string
		job    string
	}{1: {404, "not_found", "", unknownID}, 3: {400, "invalid_request", "acks[3].job_id", ""}, 4: {409, "conflict", "", done}} {
		r := obj(res[i])
		e := obj(r["error"])
		if r["status"] != want.status || e["code"] != want.code || r["job_id"] != want.job || e["hint"] == "" {
			t.Errorf("item %d: %v, want %v", i, r, want)
		}
		if want.field != "" && obj(e["details"])["field"] != want.field {
			t.Errorf("item %d: field %v, want %s", i, obj(e["details"])["field"], want.field)
		}
	}
	for _, id := range ids {
		g := f.nats("jobs.get", map[string]any{"id": id}).must(t, "get")
		if s := obj(g.body["job"])["state"]; s != "completed" {
			t.Errorf("job %s: %v after ackbatch", id, s)
		}
	}
}

// Issue 19: nackbatch fails many jobs at once, per item.
func TestIssue19NackBatchMixedResults(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	for range 2 {
		f.enqueue("nb")
	}
	ids := f.fetchAll("nb", 2)
	a := f.nats("workers.nackbatch", map[string]any{"nacks": []any{
		map[string]any{"job_id": ids[0], "error": map[string]any{"message": "boom", "retryable": false}},
		map[string]any{"job_id": ids[1]},
		map[string]any{"job_id": unknownID, "error": "lost"},
	}}).must(t, "nackbatch")
	res := list(a.body["results"])
	if len(res) != 3 {
		t.Fatalf("results %s", a.raw)
	}
	if r := obj(res[0]); r["job_id"] != ids[0] || r["state"] == nil || r["error"] != nil {
		t.Errorf("item 0: %v", r)
	}
	if r := obj(res[1]); r["status"] != 400.0 || obj(obj(r["error"])["details"])["field"] != "nacks[1].error" {
		t.Errorf("item 1: %v, want 400 naming nacks[1].error", r)
	}
	if r := obj(res[2]); r["status"] != 404.0 {
		t.Errorf("item 2: %v, want 404", r)
	}
	g := f.nats("jobs.get", map[string]any{"id": ids[1]}).must(t, "get")
	if s := obj(g.body["job"])["state"]; s != "active" {
		t.Errorf("job of the refused item is %v, want still active", s)
	}
}

// Issue 19: the list of a batch call is 1..1000 items; otherwise the
// whole request is refused (400 naming the field).
func TestIssue19BatchLimits(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	big := make([]any, 1001)
	for i := range big {
		big[i] = map[string]any{"job_id": unknownID}
	}
	for _, tc := range []struct {
		op   string
		body any
		fld  string
	}{
		{"workers.ackbatch", map[string]any{"acks": big}, "acks"},
		{"workers.ackbatch", map[string]any{"acks": []any{}}, "acks"},
		{"workers.ackbatch", map[string]any{}, "acks"},
		{"workers.nackbatch", map[string]any{"nacks": "x"}, "nacks"},
	} {
		a := f.nats(tc.op, tc.body)
		if a.status != 400 || obj(obj(obj(a.body["error"]))["details"])["field"] != tc.fld {
			t.Errorf("%s: %d %s", tc.op, a.status, a.raw)
		}
	}
}

// Issue 19: fetch with wait_ms answers as soon as count jobs are claimed,
// long before the wait ends.
func TestIssue19FetchWaitReturnsWhenJobsArrive(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	type reply struct {
		a       answer
		elapsed time.Duration
	}
	got := make(chan reply, 1)
	start := time.Now()
	go func() {
		a := f.natsWithin("workers.fetch", map[string]any{"queues": []string{"fw"}, "count": 2, "wait_ms": 20000}, 30*time.Second)
		got <- reply{a, time.Since(start)}
	}()
	// Enqueue only once the fetch is waiting (in flight on its endpoint).
	f.waitFetching()
	a, b := f.enqueue("fw"), f.enqueue("fw")
	r := <-got
	r.a.must(t, "fetch")
	jobs := list(r.a.body["jobs"])
	if len(jobs) != 2 || obj(jobs[0])["id"] != a || obj(jobs[1])["id"] != b {
		t.Fatalf("fetch answered %s, want jobs %s %s", r.a.raw, a, b)
	}
	if r.elapsed > 10*time.Second {
		t.Fatalf("fetch answered after %v, not when its jobs arrived", r.elapsed)
	}
}

// Issue 19: fetch with wait_ms and no job answers an empty list once the
// wait ends (not before), and a wait above 30 s is refused naming wait_ms.
func TestIssue19FetchWaitExpiresEmpty(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	start := time.Now()
	a := f.nats("workers.fetch", map[string]any{"queues": []string{"fe"}, "wait_ms": 300}).must(t, "fetch")
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("empty fetch answered after %v, before its 300 ms wait", took)
	}
	if jobs, ok := a.body["jobs"].([]any); !ok || len(jobs) != 0 {
		t.Fatalf("empty fetch: %s, want {\"jobs\":[]}", a.raw)
	}
	a = f.nats("workers.fetch", map[string]any{"queues": []string{"fe"}, "wait_ms": 30001})
	if a.status != 400 || obj(obj(a.body["error"])["details"])["field"] != "wait_ms" {
		t.Fatalf("wait_ms 30001: %d %s", a.status, a.raw)
	}
}

// A fetch waiting when jetgate shuts down answers at once (what it has)
// instead of holding the shutdown for its whole wait.
func TestIssue19StopEndsFetchWait(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	a := f.endWaitingFetch("fs", "stop", func() { f.srv.NatsAPI().Stop() })
	a.must(t, "fetch during stop")
}

// waitFetching returns once a fetch is waiting (in flight on its
// endpoint), failing the test after 10 s.
func (f *fixture) waitFetching() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.inFlight("workers-fetch") < 1 {
		if time.Now().After(deadline) {
			f.t.Fatal("fetch never in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// endWaitingFetch starts a fetch on queue that waits up to 30 s, runs end
// (what: "stop", "kill") once the fetch is waiting, and returns the
// fetch's answer; it fails the test unless the answer comes within 10 s of
// end.
func (f *fixture) endWaitingFetch(queue, what string, end func()) answer {
	f.t.Helper()
	got := make(chan answer, 1)
	go func() {
		got <- f.natsWithin("workers.fetch", map[string]any{"queues": []string{queue}, "wait_ms": 30000}, 40*time.Second)
	}()
	f.waitFetching()
	start := time.Now()
	end()
	a := <-got
	if took := time.Since(start); took > 10*time.Second {
		f.t.Fatalf("%s took %v with a fetch waiting", what, took)
	}
	return a
}

// inFlight reads an endpoint's requests in flight from `nats micro stats`.
func (f *fixture) inFlight(name string) int {
	f.t.Helper()
	var stats micro.Stats
	f.discover(micro.StatsVerb, &stats)
	for _, e := range stats.Endpoints {
		if e.Name == name {
			var d struct {
				InFlight int `json:"in_flight"`
			}
			_ = json.Unmarshal(e.Data, &d)
			return d.InFlight
		}
	}
	f.t.Fatalf("no endpoint %s", name)
	return 0
}

// ojs-backpressure.md 7.1 over NATS: a full queue answers 429 queue_full
// with Retry-After and the X-OJS-Queue-* headers as NATS headers; an
// accepted enqueue into a bounded queue carries the pressure headers.
func TestIssue19QueueFullHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	f.nats("queues.config", map[string]any{"queue": "full", "backpressure": map[string]any{"max_depth": 1}}).must(t, "config")
	a := f.nats("jobs.enqueue", map[string]any{"type": "t.x", "queue": "full", "args": []any{}}).must(t, "enqueue")
	if a.header["X-OJS-Queue-Pressure"] == nil {
		t.Fatalf("accepted enqueue into a bounded queue without X-OJS-Queue-Pressure: %v", a.header)
	}
	a = f.nats("jobs.enqueue", map[string]any{"type": "t.x", "queue": "full", "args": []any{}})
	if a.status != 429 || a.code != "QUEUE_FULL" {
		t.Fatalf("full queue: %d %s %s", a.status, a.code, a.raw)
	}
	for _, h := range []string{"Retry-After", "X-OJS-Queue-Pressure", "X-OJS-Queue-Depth", "X-OJS-Queue-Bound"} {
		if len(a.header[h]) == 0 {
			t.Errorf("429 without %s: %v", h, a.header)
		}
	}
}

// A request over the body limit answers 413 payload_too_large, as HTTP.
func TestIssue19BodyTooLarge(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{MaxBodyBytes: 4096})
	a := f.nats("jobs.enqueue", `{"type":"t.x","queue":"q","args":["`+strings.Repeat("x", 5000)+`"]}`)
	if a.status != 413 || a.code != "payload_too_large" {
		t.Fatalf("%d %s", a.status, a.raw)
	}
}

// Kill (jetgate crashing) does not wait out a waiting fetch either.
func TestIssue19KillEndsFetchWait(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	f.endWaitingFetch("fk", "kill", func() { f.srv.NatsAPI().Kill() })
}
