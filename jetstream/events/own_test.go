package events

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// ids returns the subjects of evs, in order.
func evSubjects(evs []ojs.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Subject
	}
	return out
}

// Issue 32 events: a Publisher lists the events it emitted itself on its
// first read, even when nobody on NATS heard them (none was sent: the
// per-job cost of issue 17 holds), newest first.
func TestOwnEventsListedWithoutListenerOrPriorRead(t *testing.T) {
	t.Parallel()
	p, _ := setupCapture(t, Config{OwnEvents: DefaultOwnEvents, Listening: func(string) bool { return false }})
	job := &ojs.Job{ID: "job-1", Type: "email.send", Queue: "email", State: ojs.StateAvailable}
	p.PublishJob(TypeJobEnqueued, job, nil)
	done := *job
	done.State, done.Attempt, done.Result = ojs.StateCompleted, 1, json.RawMessage(`{"ok":true}`)
	p.PublishJob(TypeJobCompleted, &done, nil)
	if st := p.Stats(); st.Published != 0 || st.Unheard != 2 {
		t.Fatalf("stats = %+v, want nothing published and 2 unheard", st)
	}
	evs, err := p.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Type != TypeJobCompleted || evs[1].Type != TypeJobEnqueued || evs[0].Subject != "job-1" {
		t.Fatalf("first read = %+v, want job.completed then job.enqueued of job-1", evs)
	}
	var d struct {
		Queue  string          `json:"queue"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(evs[0].Data, &d); err != nil || d.Queue != "email" || string(d.Result) != `{"ok":true}` {
		t.Fatalf("job.completed data = %s (%v)", evs[0].Data, err)
	}
	if evs[0].Source != testSource || evs[0].SpecVersion != SpecVersion || !strings.HasPrefix(evs[0].ID, IDPrefix) {
		t.Fatalf("envelope = %+v", evs[0])
	}
}

// Issue 32 events: the own ring joins the capture of other processes'
// events. Events of this process are listed once though the capture also
// received them; the filters and the limit apply to the merged list,
// which is newest first.
func TestOwnEventsMergeWithCapture(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	s := natstest.RunServer(t)
	ncA, _ := natstest.Connect(t, s)
	ncB, _ := natstest.Connect(t, s)
	a, err := New(ncA, nil, Config{Source: "ojs://jetgate/a", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := New(ncB, nil, Config{Source: "ojs://jetgate/b", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// Each publish reaches the server before the next one: the capture
	// lists in arrival order, which two connections do not keep.
	enq := func(p *Publisher, id, queue string) {
		clock.Add(time.Millisecond)
		p.PublishJob(TypeJobEnqueued, &ojs.Job{ID: id, Type: "t." + queue, Queue: queue}, nil)
		if err := p.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	enq(a, "a1", "q1") // before any read: only a's ring has it
	enq(b, "b1", "q1") // before any read: nobody on a's process has it
	got, err := a.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || !slices.Equal(evSubjects(got), []string{"a1"}) {
		t.Fatalf("first read on a = %v, %v; want a's own a1", evSubjects(got), err)
	}
	enq(a, "a2", "q2")
	enq(b, "b2", "q2")
	enq(a, "a3", "q1")
	a.PublishJob(TypeJobCompleted, &ojs.Job{ID: "a3", Type: "t.q1", Queue: "q1", Attempt: 1}, nil)
	waitCaptured(t, a, 4) // a2, b2, a3, a3's completion
	want := []string{"a3", "a3", "b2", "a2", "a1"}
	got, err = a.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || !slices.Equal(evSubjects(got), want) {
		t.Fatalf("read on a = %v, %v; want %v (each once, newest first)", evSubjects(got), err, want)
	}
	if got[0].Type != TypeJobCompleted {
		t.Fatalf("newest = %s, want job.completed", got[0].Type)
	}
	ids := map[string]bool{}
	for _, e := range got {
		if ids[e.ID] {
			t.Fatalf("event %s listed twice", e.ID)
		}
		ids[e.ID] = true
	}
	for _, c := range []struct {
		q    ojs.EventQuery
		want []string
	}{
		{ojs.EventQuery{Queues: []string{"q1"}}, []string{"a3", "a3", "a1"}},
		{ojs.EventQuery{Types: []string{TypeJobEnqueued}}, []string{"a3", "b2", "a2", "a1"}},
		{ojs.EventQuery{JobTypes: []string{"t.q2"}}, []string{"b2", "a2"}},
		{ojs.EventQuery{Limit: 2}, []string{"a3", "a3"}},
		{ojs.EventQuery{Types: []string{"job.*"}, Limit: 4}, []string{"a3", "a3", "b2", "a2"}},
		{ojs.EventQuery{Since: got[3].Time.Time}, []string{"a3", "a3", "b2", "a2"}},
	} {
		got, err := a.Recent(testCtx(t), c.q)
		if err != nil || !slices.Equal(evSubjects(got), c.want) {
			t.Errorf("Recent(%+v) = %v, %v; want %v", c.q, evSubjects(got), err, c.want)
		}
	}
}

// Issue 32 events: the ring keeps the newest OwnEvents events, each at
// most OwnEventBytes long: a larger one is kept with its result left out,
// or cut down to its small fields, and says so.
func TestOwnEventsBounded(t *testing.T) {
	t.Parallel()
	p, _ := setupCapture(t, Config{OwnEvents: 5, OwnEventBytes: 1024, Listening: func(string) bool { return false }})
	for i := range 10 {
		p.PublishJob(TypeJobEnqueued, &ojs.Job{ID: "j" + string(rune('0'+i)), Type: "t", Queue: "q"}, nil)
	}
	if n := p.own.len(); n != 5 {
		t.Fatalf("ring holds %d events, want 5", n)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 5000) + `"`)
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "big", Type: "t", Queue: "q", Attempt: 1, Result: big}, nil)
	huge := &ojs.Job{ID: "failed", Type: "t", Queue: "q", Attempt: 2, State: ojs.StateRetryable, Result: big,
		Error: &ojs.JobError{Code: "boom", Message: strings.Repeat("m", 3000), Backtrace: json.RawMessage(`"` + strings.Repeat("s", 3000) + `"`)}}
	p.PublishJob(TypeJobFailed, huge, nil)
	if b := p.own.bytes(); b > 5*1024 {
		t.Fatalf("ring buffers hold %d bytes, over 5 × 1024", b)
	}
	evs, err := p.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"failed", "big", "j9", "j8", "j7"}
	if !slices.Equal(evSubjects(evs), want) {
		t.Fatalf("Recent = %v, want %v", evSubjects(evs), want)
	}
	var completed struct {
		Attempt       int             `json:"attempt"`
		Result        json.RawMessage `json:"result"`
		ResultOmitted bool            `json:"result_omitted"`
		ResultBytes   int             `json:"result_bytes"`
		DataTruncated bool            `json:"data_truncated"`
	}
	if err := json.Unmarshal(evs[1].Data, &completed); err != nil || completed.Result != nil || !completed.ResultOmitted ||
		completed.ResultBytes != len(big) || completed.Attempt != 1 || completed.DataTruncated {
		t.Fatalf("kept job.completed data = %s (%v), want attempt 1, no result, result_omitted and result_bytes %d", evs[1].Data, err, len(big))
	}
	var failed struct {
		Queue         string `json:"queue"`
		Attempt       int    `json:"attempt"`
		DataTruncated bool   `json:"data_truncated"`
		EventBytes    int    `json:"event_bytes"`
		Error         struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			StackTrace string `json:"stack_trace"`
		} `json:"error"`
	}
	if err := json.Unmarshal(evs[0].Data, &failed); err != nil || !failed.DataTruncated || failed.EventBytes <= 6000 ||
		failed.Error.Code != "boom" || failed.Error.Message != "" || failed.Error.StackTrace != "" || failed.Attempt != 2 || failed.Queue != "q" {
		t.Fatalf("kept job.failed data = %s (%v), want its code, attempt and queue, data_truncated and event_bytes", evs[0].Data, err)
	}
	if st := p.Stats(); st.Reduced != 2 || st.Dropped != 0 {
		t.Fatalf("stats = %+v, want 2 reduced, none dropped", st)
	}
}

// Issue 32 events: a job.completed whose result makes the event larger
// than the server's max_payload is published with the result left out
// (result_omitted, result_bytes) instead of being dropped; a smaller one
// keeps its result.
func TestEventBeyondMaxPayloadIsReduced(t *testing.T) {
	t.Parallel()
	s := natstest.RunServerOpts(t, func(o *server.Options) { o.MaxPayload = 16 << 10 })
	nc, _ := natstest.Connect(t, s)
	p, err := New(nc, nil, Config{Source: testSource, OwnEvents: -1})
	if err != nil {
		t.Fatal(err)
	}
	ch := subscribe(t, nc)
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 20<<10) + `"}`)
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "big", Type: "t", Queue: "q", Attempt: 1, Result: big,
		Meta: json.RawMessage(`{"traceparent":"` + tp + `"}`)}, nil)
	p.PublishJob(TypeJobCompleted, &ojs.Job{ID: "small", Type: "t", Queue: "q", Attempt: 1, Result: json.RawMessage(`[1]`)}, nil)
	m := receive(t, ch)
	ev, data := decodeEnvelope(t, m.Data)
	if ev.Subject != "big" || data["result"] != nil || data["result_omitted"] != true || data["result_bytes"] != float64(len(big)) {
		t.Fatalf("event beyond max_payload: %s", m.Data)
	}
	if m.Header.Get("traceparent") != tp {
		t.Fatalf("reduced event lost its traceparent header: %v", m.Header)
	}
	m = receive(t, ch)
	if ev, data := decodeEnvelope(t, m.Data); ev.Subject != "small" || data["result_omitted"] != nil || data["result"] == nil {
		t.Fatalf("event within max_payload: %s", m.Data)
	}
	if st := p.Stats(); st.Published != 2 || st.Dropped != 0 || st.Reduced != 1 {
		t.Fatalf("stats = %+v, want 2 published, 1 reduced, none dropped", st)
	}
}

// Issue 32 events: with the event stream, an event is listed at once from
// the own ring, before the stream has stored it, and once after.
func TestOwnEventsWithStream(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{Stream: true})
	p.PublishJob(TypeJobEnqueued, &ojs.Job{ID: "j1", Type: "t", Queue: "q"}, nil)
	got, err := p.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || !slices.Equal(evSubjects(got), []string{"j1"}) {
		t.Fatalf("Recent right after publishing = %v, %v", evSubjects(got), err)
	}
	// Once the stream has it, it is still listed once.
	q := ojs.EventQuery{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		evs, err := p.recentStream(testCtx(t), q, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream never stored the event")
		}
	}
	got, err = p.Recent(testCtx(t), q)
	if err != nil || !slices.Equal(evSubjects(got), []string{"j1"}) {
		t.Fatalf("Recent once stored = %v, %v", evSubjects(got), err)
	}
}

// BenchmarkUnheardJobEvents measures a job's three events when nobody on
// NATS listens (the embedded server's usual case): skipped entirely
// without the own ring, built and copied into it with (issue 32 events).
// Neither sends a NATS message.
//
//	go test -run '^$' -bench UnheardJobEvents ./jetstream/events
func BenchmarkUnheardJobEvents(b *testing.B) {
	s := natstest.RunServer(b)
	nc, _ := natstest.Connect(b, s)
	now := ojs.NewTime(time.Now())
	job := &ojs.Job{ID: "019abcde-f012-7345-8678-9abcdef01234", Type: "email.send", Queue: "email", Attempt: 1, StartedAt: now,
		CompletedAt: now, WorkerID: "worker-1", Result: json.RawMessage(`{"message_id":"msg_abc123"}`)}
	for _, c := range []struct {
		name string
		own  int
	}{{"no ring", -1}, {"ring", DefaultOwnEvents}} {
		p, err := New(nc, nil, Config{Source: testSource, OwnEvents: c.own, Listening: func(string) bool { return false }})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				p.PublishJob(TypeJobEnqueued, job, nil)
				p.PublishJob(TypeJobStarted, job, nil)
				p.PublishJob(TypeJobCompleted, job, nil)
			}
		})
		p.Close()
	}
}

// Issue 32 events: a job event kept unencoded (nobody heard it) reads
// back byte for byte as it would have been published, for every event
// type and field of the encoding corpus, and shares nothing with the job:
// a job changed after the event keeps its event as it was.
func TestOwnLazyEventsEncodeAsPublished(t *testing.T) {
	t.Parallel()
	p := testPublisher(testSource)
	p.own = newOwn(4, DefaultOwnEventBytes)
	lazy := 0
	for i, c := range encodeCorpus(t) {
		if len(c.extra) > 0 {
			continue
		}
		var d jobData
		p.fillJobData(&d, c.eventType, c.job)
		env := envFields{id: p.ids.Next(), typ: c.eventType, source: testSource, subject: c.job.ID, at: testNow.Add(time.Duration(i))}
		want, err := appendEvent(nil, &env, &d, nil)
		if err != nil || !p.own.lazyFits(c.job.ID, &d) {
			continue
		}
		lazy++
		p.own.keepJob("ojs.events.x", &env, &d)
		// Change everything the event was made from.
		c.job.Priority, c.job.Attempt, c.job.MaxAttempts, c.job.WorkerID = 99, 99, 99, "other"
		for _, tp := range []*ojs.Time{c.job.ScheduledAt, c.job.NextAttemptAt, c.job.Internal.LeaseUntil, c.job.CreatedAt} {
			if tp != nil {
				tp.Time = tp.Add(time.Hour)
			}
		}
		for i := range c.job.Result {
			c.job.Result[i] = ' '
		}
		src := p.own.source(p, ojs.EventQuery{})
		if !src.fill() {
			t.Fatal("nothing kept")
		}
		last, err := src.chunk[0].encoded(nil, p, p.own.maxBytes)
		if err != nil || string(last) != string(want) {
			t.Errorf("%s %s: kept\n%s (%v)\nwant\n%s", c.eventType, c.name, last, err, want)
		}
	}
	if lazy < 20 {
		t.Fatalf("only %d events of the corpus were kept unencoded", lazy)
	}
}

// BenchmarkOwnRead measures what a read costs the ring: a copy of its
// newest ownChunk events under its lock (copy), and a read of the
// default 100 newest of its 1000, encoded and decoded outside the lock
// (read 100).
//
//	go test -run '^$' -bench OwnRead ./jetstream/events
func BenchmarkOwnRead(b *testing.B) {
	p := testPublisher(testSource)
	p.own = newOwn(DefaultOwnEvents, DefaultOwnEventBytes)
	now := ojs.NewTime(time.Now())
	job := &ojs.Job{ID: "019abcde-f012-7345-8678-9abcdef01234", Type: "email.send", Queue: "email", Attempt: 1, StartedAt: now,
		CompletedAt: now, WorkerID: "worker-1", Result: json.RawMessage(`{"message_id":"msg_abc123"}`)}
	for i := range DefaultOwnEvents {
		var d jobData
		typ := []string{TypeJobEnqueued, TypeJobStarted, TypeJobCompleted}[i%3]
		p.fillJobData(&d, typ, job)
		p.own.keepJob("ojs.events."+typ, &envFields{id: p.ids.Next(), typ: typ, source: testSource, subject: job.ID, at: time.Now()}, &d)
	}
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		src := p.own.source(p, ojs.EventQuery{})
		for range b.N {
			src.top = uint64(DefaultOwnEvents)
			if !src.fill() || len(src.chunk) != ownChunk {
				b.Fatalf("%d events", len(src.chunk))
			}
		}
	})
	b.Run("read 100", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if got := mergeNewest(DefaultRecentLimit, p.own.source(p, ojs.EventQuery{})); len(got) != DefaultRecentLimit {
				b.Fatalf("%d events", len(got))
			}
		}
	})
}

// Issue 32 events: a read of more events than one copy out of the ring
// holds lists them all, newest first, each once; a read whose next events
// were overwritten meanwhile ends there instead of listing newer ones out
// of order; reads while events are being kept are safe (-race).
func TestOwnEventsReadAcrossChunks(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	p, _ := setupCapture(t, Config{OwnEvents: 300, Now: clock.Now, Listening: func(string) bool { return false }})
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			clock.Add(time.Millisecond)
			p.PublishJob(TypeJobEnqueued, &ojs.Job{ID: strconv.Itoa(i), Type: "t", Queue: "q"}, nil)
		}
	}
	publish(0, 400)
	got, err := p.Recent(testCtx(t), ojs.EventQuery{Limit: 1000})
	if err != nil || len(got) != 300 {
		t.Fatalf("Recent = %d events, %v; want the 300 kept", len(got), err)
	}
	for i, e := range got {
		if want := strconv.Itoa(399 - i); e.Subject != want {
			t.Fatalf("event %d is %s, want %s", i, e.Subject, want)
		}
	}

	src := p.own.source(p, ojs.EventQuery{})
	var seen []string
	for range ownChunk {
		ev, ok := src.next()
		if !ok {
			t.Fatal("the first chunk ended early")
		}
		seen = append(seen, ev.Subject)
	}
	publish(400, 700) // overwrites every event the read has not reached
	if ev, ok := src.next(); ok {
		t.Fatalf("after its events were overwritten the read goes on with %s", ev.Subject)
	}
	if seen[0] != "399" || seen[len(seen)-1] != strconv.Itoa(400-ownChunk) {
		t.Fatalf("first chunk = %s..%s", seen[0], seen[len(seen)-1])
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		publish(700, 1500)
	}()
	for range 20 {
		if _, err := p.Recent(testCtx(t), ojs.EventQuery{Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

// Issue 32 events: a job event kept unencoded shares no pointer with the
// job data it was made from, for every pointer and slice field of jobData
// (a field added later must be copied by adoptJob too, or this
// fails), nor does a read's copy share one with the ring.
func TestOwnLazyEventsShareNothing(t *testing.T) {
	t.Parallel()
	var src jobData
	v := reflect.ValueOf(&src).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Pointer && f.Type() != reflect.TypeFor[*errorData](): // errors are never kept unencoded
			f.Set(reflect.New(f.Type().Elem()))
		case f.Kind() == reflect.Slice:
			f.Set(reflect.ValueOf(json.RawMessage(`[1]`)).Convert(f.Type()))
		}
	}
	o := newOwn(2, DefaultOwnEventBytes)
	if !o.lazyFits("j", &src) {
		t.Fatal("the job data does not fit unencoded")
	}
	o.keepJob("ojs.events.x", &envFields{}, &src)
	p := testPublisher(testSource)
	s := o.source(p, ojs.EventQuery{})
	if !s.fill() {
		t.Fatal("nothing kept")
	}
	kept, read := reflect.ValueOf(o.slots[0].jd), reflect.ValueOf(s.chunk[0].jd)
	for i := range v.NumField() {
		name, f := v.Type().Field(i).Name, v.Field(i)
		if f.Kind() != reflect.Pointer && f.Kind() != reflect.Slice || f.IsNil() {
			continue
		}
		if kept.Field(i).IsNil() || kept.Field(i).Pointer() == f.Pointer() {
			t.Errorf("the kept event's %s is lost or shared with the job data", name)
		}
		if read.Field(i).IsNil() || read.Field(i).Pointer() == kept.Field(i).Pointer() {
			t.Errorf("the read's copy of %s is lost or shared with the ring", name)
		}
	}
}
