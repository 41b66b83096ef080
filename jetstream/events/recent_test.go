package events

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// waitStored polls until the event stream holds n messages.
func waitStored(t *testing.T, b bundle, n uint64) {
	t.Helper()
	ctx := testCtx(t)
	s, err := b.js.Stream(ctx, topology.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream holds %d events, want %d", info.State.Msgs, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publishN publishes n events; event i has type types[i%len(types)] and
// subject "s<offset+i>".
func publishN(p *Publisher, offset, n int, types ...string) {
	for i := range n {
		p.Publish(types[i%len(types)], fmt.Sprintf("s%d", offset+i), map[string]any{"i": offset + i})
	}
}

func subjects(evs []ojs.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Subject
	}
	return out
}

// want returns "s<i>" for i from hi down to lo step step.
func want(hi, lo, step int) []string {
	var out []string
	for i := hi; i >= lo; i -= step {
		out = append(out, fmt.Sprintf("s%d", i))
	}
	return out
}

func TestRecent(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true})
	ctx := testCtx(t)
	// s0 enqueued, s1 started, s2 completed, s3 enqueued, ...
	publishN(p, 0, 300, TypeJobEnqueued, TypeJobStarted, TypeJobCompleted)
	p.PublishQueue(TypeQueuePaused, "q", "ops") // subject "q", newest
	waitStored(t, b, 301)

	tests := []struct {
		name string
		q    ojs.EventQuery
		want []string
	}{
		{"default limit", ojs.EventQuery{}, append([]string{"q"}, want(299, 201, 1)...)},
		{"limit", ojs.EventQuery{Limit: 3}, []string{"q", "s299", "s298"}},
		{"one type", ojs.EventQuery{Types: []string{TypeJobCompleted}, Limit: 4}, want(299, 290, 3)},
		{"two types", ojs.EventQuery{Types: []string{TypeJobStarted, TypeQueuePaused}, Limit: 3}, []string{"q", "s298", "s295"}},
		{"wildcard", ojs.EventQuery{Types: []string{"job.*", TypeJobCompleted}, Limit: 2}, []string{"s299", "s298"}},
		{"all", ojs.EventQuery{Types: []string{"*"}, Limit: 1}, []string{"q"}},
		{"absent type", ojs.EventQuery{Types: []string{TypeJobExpired}}, []string{}},
		{"oldest reachable", ojs.EventQuery{Types: []string{TypeJobEnqueued}, Limit: 1000}, want(297, 0, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Recent(ctx, tt.q)
			if err != nil {
				t.Fatalf("Recent: %v", err)
			}
			if !slices.Equal(subjects(got), tt.want) {
				t.Errorf("got %v\nwant %v", subjects(got), tt.want)
			}
		})
	}
	got, err := p.Recent(ctx, ojs.EventQuery{Limit: 5000})
	if err != nil || len(got) != 301 {
		t.Errorf("limit above max: %d events, %v", len(got), err)
	}
	got, err = p.Recent(ctx, ojs.EventQuery{Limit: 1})
	if err != nil || len(got) != 1 || got[0].Type != TypeQueuePaused || got[0].SpecVersion != "1.0" ||
		got[0].Source != testSource || string(got[0].Data) != `{"queue":"q","paused_by":"ops"}` {
		t.Errorf("decoded event = %+v, %v", got, err)
	}
}

func TestRecentReadsFromTail(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true})
	ctx := testCtx(t)
	// One job.cancelled in every 100 events.
	types := make([]string, 100)
	for i := range types {
		types[i] = TypeJobStarted
	}
	types[99] = TypeJobCancelled
	publishN(p, 0, 5000, types...)
	waitStored(t, b, 5000)

	before := p.read.Load()
	got, err := p.Recent(ctx, ojs.EventQuery{Limit: 10})
	if err != nil || !slices.Equal(subjects(got), want(4999, 4990, 1)) {
		t.Fatalf("Recent = %v, %v", subjects(got), err)
	}
	if n := p.read.Load() - before; n != 10 {
		t.Errorf("read %d messages for the last 10", n)
	}

	before = p.read.Load()
	got, err = p.Recent(ctx, ojs.EventQuery{Types: []string{TypeJobCancelled}, Limit: 5})
	if err != nil || !slices.Equal(subjects(got), want(4999, 4599, 100)) {
		t.Fatalf("Recent cancelled = %v, %v", subjects(got), err)
	}
	if n := p.read.Load() - before; n > 10 {
		t.Errorf("read %d messages for 5 sparse events", n)
	}
}

func TestRecentSince(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true})
	ctx := testCtx(t)
	publishN(p, 0, 20, TypeJobEnqueued)
	waitStored(t, b, 20)
	// since is a millisecond boundary after every earlier event; wait for
	// the clock to pass it so that later events are not before it.
	since := time.Now().Add(time.Millisecond).Truncate(time.Millisecond)
	time.Sleep(time.Until(since))
	publishN(p, 20, 30, TypeJobEnqueued, TypeJobCompleted)
	waitStored(t, b, 50)

	tests := []struct {
		name string
		q    ojs.EventQuery
		want []string
	}{
		{"fits in limit", ojs.EventQuery{Since: since}, want(49, 20, 1)},
		{"more than limit", ojs.EventQuery{Since: since, Limit: 4}, want(49, 46, 1)},
		{"filtered", ojs.EventQuery{Since: since, Types: []string{TypeJobCompleted}}, want(49, 21, 2)},
		{"future", ojs.EventQuery{Since: time.Now().Add(time.Hour)}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Recent(ctx, tt.q)
			if err != nil {
				t.Fatalf("Recent: %v", err)
			}
			if !slices.Equal(subjects(got), tt.want) {
				t.Errorf("got %v\nwant %v", subjects(got), tt.want)
			}
		})
	}
}

func TestRecentCleansUp(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true})
	ctx := testCtx(t)
	publishN(p, 0, 50, TypeJobStarted, TypeJobCompleted)
	waitStored(t, b, 50)
	for _, q := range []ojs.EventQuery{{}, {Types: []string{TypeJobCompleted}, Limit: 3}, {Since: time.Now().Add(-time.Hour)}} {
		if _, err := p.Recent(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.js.Stream(ctx, topology.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("%d reader consumers left behind", n)
	}
}

func TestRecentEmptyAndMissing(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{Stream: true})
	got, err := p.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty stream: %v, %v", got, err)
	}

	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	p2, err := New(nc, js, Config{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Recent(testCtx(t), ojs.EventQuery{}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("missing stream: %v", err)
	}
}

func TestFilterSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		types []string
		want  []string
	}{
		{nil, nil},
		{[]string{"*"}, nil},
		{[]string{"job.completed", "*"}, nil},
		{[]string{""}, nil},
		{[]string{"job.completed"}, []string{"ojs.events.job.completed"}},
		{[]string{"job.failed", "job.completed", "job.failed"}, []string{"ojs.events.job.completed", "ojs.events.job.failed"}},
		{[]string{"job.completed", "job.*", "queue.paused"}, []string{"ojs.events.job.>", "ojs.events.queue.paused"}},
		{[]string{"job.*", "job.*"}, []string{"ojs.events.job.>"}},
		{[]string{"job", "job.*"}, []string{"ojs.events.job", "ojs.events.job.>"}},
		{[]string{"job.>"}, []string{"ojs.events.job.=3E"}},
	}
	for _, tt := range tests {
		if got := filterSubjects(tt.types); !slices.Equal(got, tt.want) {
			t.Errorf("filterSubjects(%q) = %q, want %q", tt.types, got, tt.want)
		}
	}
}

func TestNextSize(t *testing.T) {
	t.Parallel()
	if got := nextSize(10, 0, 10); got != 80 {
		t.Errorf("no match: %d", got)
	}
	if got := nextSize(100, 2, 8); got != 501 {
		t.Errorf("sparse: %d", got)
	}
	if got := nextSize(100, 1, 1000); got != 1600 {
		t.Errorf("capped growth: %d", got)
	}
	if got := nextSize(maxWindow, 0, 10); got != maxWindow {
		t.Errorf("capped window: %d", got)
	}
}

// ojs-events.md 6.4: queues and job_types filter on the data of events
// (EventQuery.Match), with the types' subject filters. Sparse matches are
// found by stepping back with windows sized by the density of kept events,
// so a rare queue costs a few windows, not one per event.
func TestRecentQueuesAndJobTypes_6_4(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Stream: true})
	ctx := testCtx(t)
	// 3000 job.started events; every 200th is on queue "rare" (type
	// r.x), the rest on "busy" (type b.x).
	for i := range 3000 {
		q, typ := "busy", "b.x"
		if i%200 == 0 {
			q, typ = "rare", "r.x"
		}
		p.PublishJob(TypeJobStarted, &ojs.Job{ID: fmt.Sprintf("s%d", i), Type: typ, Queue: q}, nil)
	}
	p.PublishQueue(TypeQueuePaused, "rare", "ops") // subject "rare", newest
	waitStored(t, b, 3001)

	got, err := p.Recent(ctx, ojs.EventQuery{Types: []string{TypeJobStarted}, Queues: []string{"rare"}, Limit: 5})
	if err != nil || !slices.Equal(subjects(got), want(2800, 2000, 200)) {
		t.Fatalf("Recent rare = %v, %v", subjects(got), err)
	}
	got, err = p.Recent(ctx, ojs.EventQuery{Queues: []string{"rare"}, Limit: 2})
	if err != nil || !slices.Equal(subjects(got), []string{"rare", "s2800"}) {
		t.Fatalf("Recent rare, any type = %v, %v", subjects(got), err)
	}
	before := p.read.Load()
	got, err = p.Recent(ctx, ojs.EventQuery{JobTypes: []string{"r.x"}, Limit: 100})
	if err != nil || !slices.Equal(subjects(got), want(2800, 0, 200)) {
		t.Fatalf("Recent job type r.x = %v, %v", subjects(got), err)
	}
	if n := p.read.Load() - before; n > 3001 {
		t.Errorf("read %d messages of 3001", n)
	}
	got, err = p.Recent(ctx, ojs.EventQuery{Queues: []string{"none"}, Limit: 10})
	if err != nil || len(got) != 0 {
		t.Fatalf("Recent of a queue without events = %v, %v", subjects(got), err)
	}
}
