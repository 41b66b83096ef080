package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// eventSubjects returns the subjects of GET /ojs/v1/events?query.
func eventSubjects(c client, query string) []string {
	c.t.Helper()
	var out []string
	for _, e := range list(c.must(200, "GET", "/ojs/v1/events?"+query, nil)["events"]) {
		out = append(out, obj(e)["subject"].(string))
	}
	return out
}

// Issue 17, "events are not stored per job by default": every lifecycle
// event is still published on ojs.events.<type>, no OJS_EVENTS stream
// exists, /ready answers without it, and GET /ojs/v1/events lists the
// events published after its first read on that process, by any jetgate
// process on the NATS system. Issue 32 events: it also lists, from the
// first read, the events that process emitted itself; another process's
// events before that first read are missed.
func TestHTTPEventsWithoutStream(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	a := startApp(t, app.Config{NatsURL: ns.ClientURL(), InstanceName: "a"})
	b := startApp(t, app.Config{NatsURL: ns.ClientURL(), InstanceName: "b"})
	ca, cb := client{t: t, base: a.URL()}, client{t: t, base: b.URL()}
	nc, js := natstest.ConnectURL(t, ns.ClientURL())
	live, err := nc.SubscribeSync("ojs.events.job.enqueued")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	enq := func(c client) string {
		r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "ev.x", "args": []any{}, "options": map[string]any{"queue": "ev17"}})
		return obj(r["job"])["id"].(string)
	}

	before := enq(ca)
	m, err := live.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("job.enqueued of %s on NATS: %v", before, err)
	}
	var ev map[string]any
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev["subject"] != before || ev["type"] != "job.enqueued" || ev["source"] != "ojs://jetgate/a" {
		t.Fatalf("event on %s: %s (%v)", m.Subject, m.Data, err)
	}
	if got := eventSubjects(ca, ""); !slices.Equal(got, []string{before}) {
		t.Fatalf("first read lists %v; want only %s, enqueued on this process", got, before)
	}
	onA, onB := enq(ca), enq(cb)
	want := []string{before, onA, onB}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) < 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = eventSubjects(ca, "queues=ev17")
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the first read: %v, want the jobs enqueued after it on both processes and this process's own %v", got, want)
	}
	if got := eventSubjects(cb, ""); !slices.Equal(got, []string{onB}) {
		t.Fatalf("first read on the other process lists %v, want only its own %s", got, onB)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, topology.EventStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("%s without --events-stream: %v", topology.EventStream, err)
	}
	if r := ca.do("GET", "/ready", nil); r.status != 200 {
		t.Errorf("/ready without the events stream: %d %s", r.status, r.raw)
	}
}

// Issue 17: with --events-stream, OJS_EVENTS keeps every event within its
// own retention, and GET /ojs/v1/events lists events published before any
// read.
func TestHTTPEventsStream(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{EventsStream: true, EventsMaxAge: time.Hour, EventsMaxMsgs: 5000, EventsMaxBytes: 8 << 20})
	c := client{t: t, base: s.URL()}
	r := c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "ev.x", "args": []any{}, "options": map[string]any{"queue": "ev17"}})
	id := obj(r["job"])["id"].(string)
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = eventSubjects(c, "types=job.enqueued")
	}
	if !slices.Equal(got, []string{id}) {
		t.Fatalf("events = %v, want the job enqueued before any read (%s)", got, id)
	}
	_, js := natstest.ConnectURL(t, s.NatsURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, topology.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.MaxAge != time.Hour || cfg.MaxMsgs != 5000 || cfg.MaxBytes != 8<<20 ||
		cfg.Storage != jetstream.MemoryStorage {
		t.Errorf("%s config = %+v", topology.EventStream, cfg)
	}
}

// Issue 20 (memory under load): jetgate serve keeps the marker a finished
// record leaves at the end of its retention for min(1 h, --retention), so
// a short retention bounds the server's memory of finished jobs.
func TestShortRetentionShortensRecordMarkers(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{Retention: 2 * time.Minute})
	_, js := natstest.ConnectURL(t, s.NatsURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, topology.KVStream(topology.JobsBucket))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.SubjectDeleteMarkerTTL; got != 2*time.Minute {
		t.Fatalf("record markers kept %s with --retention 2m, want 2m", got)
	}
}
