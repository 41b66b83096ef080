package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// ownEventData is the part of a job event's data a client reads.
type ownEventData struct {
	JobType       string          `json:"job_type"`
	Queue         string          `json:"queue"`
	Attempt       *int            `json:"attempt"`
	Result        json.RawMessage `json:"result"`
	ResultOmitted bool            `json:"result_omitted"`
	ResultBytes   int             `json:"result_bytes"`
}

// eventsOf lists GET /ojs/v1/events?query, decoded as a client decodes it.
func eventsOf(c sdkClient, query string) []sdkEvent {
	c.t.Helper()
	var got sdkEvents
	c.mustCall("GET", "/ojs/v1/events?"+query, nil, &got)
	return got.Events
}

// typesAndSubjects renders evs as "type subject" lines, newest first.
func typesAndSubjects(evs []sdkEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type + " " + e.Subject
	}
	return out
}

// natsEvents asks the NATS binding for the events of query and decodes
// them as a client does.
func natsEvents(t *testing.T, s *app.Server, query map[string]any) sdkEvents {
	t.Helper()
	nc, _ := connectApp(t, s)
	subject := ""
	for _, subj := range s.NatsAPI().Subjects() {
		if strings.HasSuffix(subj, ".events.list") {
			subject = subj
		}
	}
	if subject == "" {
		t.Fatalf("the NATS binding has no events.list endpoint: %v", s.NatsAPI().Subjects())
	}
	body, _ := json.Marshal(query)
	res, err := nc.Request(subject, body, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var got sdkEvents
	if err := json.Unmarshal(res.Data, &got); err != nil {
		t.Fatalf("%s answered %s: %v", subject, res.Data, err)
	}
	return got
}

// Issue 32 events: on a single jetgate process (its embedded server, on
// which nobody listens to events, so none is sent), GET /ojs/v1/events
// right after an enqueue lists its job.enqueued, though nobody read
// events before; the NATS binding answers the same events.
func TestEventsListedRightAfterEnqueue(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := sdkClient{t: t, base: s.URL(), hc: &http.Client{Timeout: 30 * time.Second}}
	const q = "own-enqueued"
	j, err := c.enqueue(sdkEnqueue{Type: "email.send", Args: []any{"ada@example.com"}, Options: sdkOptions{Queue: q}})
	if err != nil {
		t.Fatal(err)
	}
	evs := eventsOf(c, "types=job.enqueued&queues="+q)
	if !slices.Equal(typesAndSubjects(evs), []string{"job.enqueued " + j.ID}) {
		t.Fatalf("GET /ojs/v1/events right after the enqueue: %v, want job.enqueued of %s", typesAndSubjects(evs), j.ID)
	}
	var d ownEventData
	if err := json.Unmarshal(evs[0].Data, &d); err != nil || d.Queue != q || d.JobType != "email.send" {
		t.Fatalf("job.enqueued data = %s (%v)", evs[0].Data, err)
	}
	if !strings.HasPrefix(evs[0].ID, "evt_") || !strings.HasPrefix(evs[0].Source, "ojs://jetgate/") || evs[0].Time.IsZero() {
		t.Fatalf("envelope = %+v", evs[0])
	}
	if got := natsEvents(t, s, map[string]any{"types": "job.enqueued", "queues": q}); !reflect.DeepEqual(got.Events, evs) {
		t.Fatalf("the NATS binding answers %+v\nHTTP answered %+v", got.Events, evs)
	}
}

// Issue 32 events: after a fetch and an ack, on a process where nobody
// read events before, GET /ojs/v1/events lists the job's job.completed
// (with its result), job.started and job.enqueued, newest first; the NATS
// binding answers the same events.
func TestEventsListedRightAfterAck(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := sdkClient{t: t, base: s.URL(), hc: &http.Client{Timeout: 30 * time.Second}}
	const q = "own-completed"
	j := c.enqueueFetch(q, nil)
	c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: j.ID, Result: map[string]any{"message_id": "m-1"}}, nil)
	evs := eventsOf(c, "queues="+q)
	want := []string{"job.completed " + j.ID, "job.started " + j.ID, "job.enqueued " + j.ID}
	if !slices.Equal(typesAndSubjects(evs), want) {
		t.Fatalf("GET /ojs/v1/events right after the ack: %v, want %v", typesAndSubjects(evs), want)
	}
	var d ownEventData
	if err := json.Unmarshal(evs[0].Data, &d); err != nil || d.Queue != q || d.Attempt == nil || *d.Attempt != 1 ||
		string(d.Result) != `{"message_id":"m-1"}` || d.ResultOmitted {
		t.Fatalf("job.completed data = %s (%v)", evs[0].Data, err)
	}
	if got := eventsOf(c, "types=job.completed&queues="+q); !reflect.DeepEqual(got, evs[:1]) {
		t.Fatalf("types=job.completed: %v", typesAndSubjects(got))
	}
	if got := natsEvents(t, s, map[string]any{"queues": q}); !reflect.DeepEqual(got.Events, evs) {
		t.Fatalf("the NATS binding answers %v\nHTTP answered %v", typesAndSubjects(got.Events), typesAndSubjects(evs))
	}
}

// Issue 32 events: an ack whose result makes job.completed larger than
// --events-own-bytes is listed with the result left out and flagged
// (result_omitted, result_bytes), not lost.
func TestEventsLargeResultListedWithoutIt(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := sdkClient{t: t, base: s.URL(), hc: &http.Client{Timeout: 30 * time.Second}}
	const q = "own-large"
	j := c.enqueueFetch(q, nil)
	blob := strings.Repeat("x", 8<<10)
	c.mustCall("POST", "/ojs/v1/workers/ack", sdkAck{JobID: j.ID, Result: map[string]any{"blob": blob}}, nil)
	evs := eventsOf(c, "types=job.completed&queues="+q)
	if len(evs) != 1 || evs[0].Subject != j.ID {
		t.Fatalf("job.completed of a large result: %v", typesAndSubjects(evs))
	}
	var d ownEventData
	if err := json.Unmarshal(evs[0].Data, &d); err != nil || d.Result != nil || !d.ResultOmitted || d.ResultBytes < len(blob) ||
		d.Attempt == nil || *d.Attempt != 1 {
		t.Fatalf("job.completed data = %s (%v), want attempt 1 and the result omitted and flagged", evs[0].Data, err)
	}
}

// Issue 32 events, keeping issue 17's per-job cost: with the embedded
// server and nobody listening, keeping a process's own events sends no
// event and stores nothing: messages into and out of the server and
// stored messages per job are those of a process that keeps none, while
// its first read lists every job's job.completed.
// (go test -run TestOwnEventsCostNoMessage -v logs the costs;
// JETGATE_COST_JOBS sets the job count, default 200.)
func TestOwnEventsCostNoMessage(t *testing.T) {
	t.Parallel()
	n := 200
	if v, err := strconv.Atoi(os.Getenv("JETGATE_COST_JOBS")); err == nil && v > 0 {
		n = min(v, 300) // the 1000 own events hold 333 jobs' three events
	}
	run := func(cfg app.Config) (jobCost, client) {
		s := startApp(t, cfg)
		c := client{t: t, base: s.URL()}
		_, js := connectApp(t, s)
		runJobs(t, s.Embedded().NATS(), js, c, "own", 10, false) // create the queue's assets
		return runJobs(t, s.Embedded().NATS(), js, c, "own", n, false), c
	}
	kept, ck := run(app.Config{})
	none, cn := run(app.Config{EventsOwn: -1})
	t.Logf("own events kept, %d jobs: %s", n, kept.String(n))
	t.Logf("own events not kept, %d jobs: %s", n, none.String(n))
	// The job's own writes are exact; the background (leases, counts,
	// statistics, timers) of each process adds a few messages in either.
	for _, stream := range []string{topology.KVStream(topology.JobsBucket), topology.ReadyStream, topology.EventStream} {
		if kept.stored[stream] != none.stored[stream] {
			t.Errorf("%s stored %d messages with own events, %d without", stream, kept.stored[stream], none.stored[stream])
		}
	}
	if kept.stored[topology.EventStream] != 0 {
		t.Errorf("%d events stored", kept.stored[topology.EventStream])
	}
	// An event sent would be 1 message in per event, 3 per job; what is
	// left is the background of two processes.
	perJob := func(v int64) float64 { return float64(v) / float64(n) }
	if d := perJob(int64(kept.total())) - perJob(int64(none.total())); d > 0.5 {
		t.Errorf("stored per job: %.2f with own events, %.2f without", perJob(int64(kept.total())), perJob(int64(none.total())))
	}
	if d := perJob(kept.in) - perJob(none.in); d > 0.5 {
		t.Errorf("messages in per job: %.2f with own events, %.2f without", perJob(kept.in), perJob(none.in))
	}
	if d := perJob(kept.out) - perJob(none.out); d > 0.5 {
		t.Errorf("messages out per job: %.2f with own events, %.2f without", perJob(kept.out), perJob(none.out))
	}
	if got := list(ck.must(200, "GET", "/ojs/v1/events?types=job.completed&queues=own&limit=1000", nil)["events"]); len(got) != n+10 {
		t.Errorf("first read lists %d job.completed, want the %d jobs'", len(got), n+10)
	}
	if got := list(cn.must(200, "GET", "/ojs/v1/events", nil)["events"]); len(got) != 0 {
		t.Errorf("first read without own events lists %d events, want none", len(got))
	}
}
