package events

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// setupCapture is setup without the event stream (the default), and
// closes the publisher at the end of the test. The own ring is off unless
// cfg sets it: these tests observe the capture alone.
func setupCapture(t *testing.T, cfg Config) (*Publisher, bundle) {
	t.Helper()
	cfg.Stream = false
	if cfg.OwnEvents == 0 {
		cfg.OwnEvents = -1
	}
	p, b := setup(t, cfg)
	t.Cleanup(p.Close)
	return p, b
}

// arm makes the first read, which starts the capture and lists nothing.
func arm(t *testing.T, p *Publisher) {
	t.Helper()
	got, err := p.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("first read = %v, %v; want an empty list", subjects(got), err)
	}
	if !p.cap.state().running {
		t.Fatal("the first read did not start the capture")
	}
}

// waitCaptured polls until the capture has received n events since it
// started (kept or pushed out by its bounds).
func waitCaptured(t *testing.T, p *Publisher, n int) captureState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := p.cap.state()
		if uint64(st.events)+st.dropped >= uint64(n) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("capture received %d events (%d kept), want %d", uint64(st.events)+st.dropped, st.events, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClock is an injectable Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// expireNow runs the capture's idle check as its timer would.
func expireNow(p *Publisher) {
	p.cap.mu.Lock()
	buf := p.cap.buf
	p.cap.mu.Unlock()
	p.cap.expire(buf)
}

// Issue 17, "events are not stored per job by default": without
// Config.Stream, Ensure creates no event stream, every event is still
// published on ojs.events.<type>, and the first read starts a capture that
// lists only the events published after it.
func TestCaptureStartsOnFirstRead(t *testing.T) {
	t.Parallel()
	p, b := setupCapture(t, Config{})
	ctx := testCtx(t)
	if _, err := b.js.Stream(ctx, topology.EventStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("event stream without Config.Stream: %v", err)
	}
	live := subscribe(t, b.nc)

	// Before any read: published, not captured (nobody listens).
	publishN(p, 0, 3, TypeJobEnqueued)
	for range 3 {
		receive(t, live)
	}
	if st := p.cap.state(); st.running || st.starts != 0 {
		t.Fatalf("capture runs before any read: %+v", st)
	}
	base := b.nc.NumSubscriptions()
	arm(t, p)
	if n := b.nc.NumSubscriptions(); n != base+1 {
		t.Fatalf("the first read made %d subscriptions, want 1", n-base)
	}

	publishN(p, 3, 5, TypeJobEnqueued, TypeJobCompleted)
	waitCaptured(t, p, 5)
	got, err := p.Recent(ctx, ojs.EventQuery{})
	if err != nil || !slices.Equal(subjects(got), want(7, 3, 1)) {
		t.Fatalf("after the first read = %v, %v; want %v (s0..s2 came before it)", subjects(got), err, want(7, 3, 1))
	}
	if got[0].Type != TypeJobEnqueued || got[0].Source != testSource || got[0].SpecVersion != "1.0" ||
		string(got[0].Data) != `{"i":7}` {
		t.Errorf("decoded event = %+v", got[0])
	}
	if _, err := b.js.Stream(ctx, topology.EventStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("reading created an event stream: %v", err)
	}
}

// ojs-events.md 6.4: the capture applies the same filters as the stream
// (types with "job.*" and "*", limit and its maximum, since, queues,
// job_types), newest first.
func TestCaptureFilters_6_4(t *testing.T) {
	t.Parallel()
	p, _ := setupCapture(t, Config{})
	ctx := testCtx(t)
	arm(t, p)
	// s0 enqueued, s1 started, s2 completed, s3 enqueued, ...
	publishN(p, 0, 300, TypeJobEnqueued, TypeJobStarted, TypeJobCompleted)
	p.PublishQueue(TypeQueuePaused, "q", "ops") // subject "q"
	waitCaptured(t, p, 301)
	// since is a millisecond boundary after every earlier event.
	since := time.Now().Add(time.Millisecond).Truncate(time.Millisecond)
	time.Sleep(time.Until(since))
	for i := range 40 {
		q, typ := "busy", "b.x"
		if i%10 == 0 {
			q, typ = "rare", "r.x"
		}
		p.PublishJob(TypeJobStarted, &ojs.Job{ID: fmt.Sprintf("j%d", i), Type: typ, Queue: q}, nil)
	}
	waitCaptured(t, p, 341)

	tests := []struct {
		name string
		q    ojs.EventQuery
		want []string
	}{
		{"limit", ojs.EventQuery{Limit: 3}, []string{"j39", "j38", "j37"}},
		{"one type", ojs.EventQuery{Types: []string{TypeJobCompleted}, Limit: 4}, want(299, 290, 3)},
		{"two types", ojs.EventQuery{Types: []string{TypeJobEnqueued, TypeQueuePaused}, Limit: 3}, []string{"q", "s297", "s294"}},
		{"wildcard", ojs.EventQuery{Types: []string{"job.*", TypeJobCompleted}, Limit: 2}, []string{"j39", "j38"}},
		{"all", ojs.EventQuery{Types: []string{"*"}, Limit: 1}, []string{"j39"}},
		{"absent type", ojs.EventQuery{Types: []string{TypeJobExpired}}, []string{}},
		{"oldest reachable", ojs.EventQuery{Types: []string{TypeJobEnqueued}, Limit: 1000}, want(297, 0, 3)},
		{"since", ojs.EventQuery{Since: since, Types: []string{TypeJobStarted}, Queues: []string{"rare"}}, []string{"j30", "j20", "j10", "j0"}},
		{"queue", ojs.EventQuery{Queues: []string{"rare"}, Limit: 2}, []string{"j30", "j20"}},
		{"job type", ojs.EventQuery{JobTypes: []string{"r.x"}, Types: []string{"job.*"}}, []string{"j30", "j20", "j10", "j0"}},
		{"queue of a queue event", ojs.EventQuery{Queues: []string{"q"}}, []string{"q"}},
		{"no match", ojs.EventQuery{Queues: []string{"none"}}, []string{}},
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
	got, err := p.Recent(ctx, ojs.EventQuery{})
	if err != nil || len(got) != DefaultRecentLimit || got[0].Subject != "j39" {
		t.Errorf("default limit: %d events, %v", len(got), err)
	}
	got, err = p.Recent(ctx, ojs.EventQuery{Limit: 5000})
	if err != nil || len(got) != 341 {
		t.Errorf("limit above max: %d events, %v", len(got), err)
	}
}

// The buffer is bounded by count and by bytes; the oldest events go
// first, and an event larger than the whole buffer is not kept.
func TestCaptureBoundedDropsOldest(t *testing.T) {
	t.Parallel()
	t.Run("count", func(t *testing.T) {
		t.Parallel()
		p, _ := setupCapture(t, Config{BufferEvents: 10})
		arm(t, p)
		publishN(p, 0, 25, TypeJobStarted)
		st := waitCaptured(t, p, 25)
		if st.events != 10 || st.dropped != 15 {
			t.Fatalf("state = %+v, want 10 kept and 15 dropped", st)
		}
		got, err := p.Recent(testCtx(t), ojs.EventQuery{Limit: 100})
		if err != nil || !slices.Equal(subjects(got), want(24, 15, 1)) {
			t.Fatalf("Recent = %v, %v", subjects(got), err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		const maxBytes = 4096
		p, _ := setupCapture(t, Config{BufferBytes: maxBytes})
		arm(t, p)
		pad := strings.Repeat("x", 200)
		for i := range 100 {
			p.Publish(TypeJobStarted, fmt.Sprintf("s%d", i), map[string]any{"pad": pad})
		}
		st := waitCaptured(t, p, 100)
		if st.bytes > maxBytes || st.events < 5 || st.events >= 100 || uint64(st.events)+st.dropped != 100 {
			t.Fatalf("state = %+v, want at most %d bytes", st, maxBytes)
		}
		got, err := p.Recent(testCtx(t), ojs.EventQuery{Limit: 1000})
		if err != nil || !slices.Equal(subjects(got), want(99, 100-st.events, 1)) {
			t.Fatalf("Recent = %v, %v", subjects(got), err)
		}
		// Larger than the whole buffer: dropped, the rest stays.
		p.Publish(TypeJobStarted, "huge", map[string]any{"pad": strings.Repeat("x", maxBytes)})
		p.Publish(TypeJobStarted, "s100", map[string]any{"i": 100})
		waitCaptured(t, p, 102)
		got, err = p.Recent(testCtx(t), ojs.EventQuery{Limit: 2})
		if err != nil || !slices.Equal(subjects(got), []string{"s100", "s99"}) {
			t.Fatalf("after a huge event = %v, %v", subjects(got), err)
		}
	})
}

// The capture stops after BufferIdle without a read, counted from the
// last read (injectable clock, the idle check run by hand): it
// unsubscribes and frees its buffer, and the next read starts afresh,
// missing what was published meanwhile.
func TestCaptureStopsWhenIdle(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)}
	p, b := setupCapture(t, Config{BufferIdle: 10 * time.Minute, Now: clock.Now})
	ctx := testCtx(t)
	base := b.nc.NumSubscriptions()
	arm(t, p)
	publishN(p, 0, 3, TypeJobStarted)
	waitCaptured(t, p, 3)

	clock.Add(6 * time.Minute)
	expireNow(p)
	if st := p.cap.state(); !st.running || st.events != 3 {
		t.Fatalf("stopped 6 min after a read: %+v", st)
	}
	if _, err := p.Recent(ctx, ojs.EventQuery{}); err != nil { // a read at 6 min
		t.Fatal(err)
	}
	clock.Add(9 * time.Minute) // 15 min after the first read, 9 after the last
	expireNow(p)
	if st := p.cap.state(); !st.running {
		t.Fatalf("stopped 9 min after the last read: %+v", st)
	}
	clock.Add(time.Minute)
	expireNow(p)
	if st := p.cap.state(); st.running || st.events != 0 || b.nc.NumSubscriptions() != base {
		t.Fatalf("10 min after the last read: %+v, %d subscriptions left", st, b.nc.NumSubscriptions()-base)
	}

	// Published while stopped: missed by the next read, which restarts.
	publishN(p, 3, 2, TypeJobStarted)
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	arm(t, p)
	publishN(p, 5, 1, TypeJobStarted)
	waitCaptured(t, p, 1)
	got, err := p.Recent(ctx, ojs.EventQuery{})
	if err != nil || !slices.Equal(subjects(got), []string{"s5"}) || p.cap.state().starts != 2 {
		t.Fatalf("after a restart = %v, %v, %+v", subjects(got), err, p.cap.state())
	}
}

// The idle timer itself stops the capture (a short BufferIdle, polled
// with a deadline), while reads and publishes run concurrently (-race).
func TestCaptureIdleTimer(t *testing.T) {
	t.Parallel()
	p, b := setupCapture(t, Config{BufferIdle: 50 * time.Millisecond})
	ctx := testCtx(t)
	base := b.nc.NumSubscriptions()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				p.Publish(TypeJobStarted, fmt.Sprintf("w%d-%d", w, i), map[string]any{"i": i})
				if _, err := p.Recent(ctx, ojs.EventQuery{Limit: 10}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for p.cap.state().running {
		if time.Now().After(deadline) {
			t.Fatal("capture still running long after its idle time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.nc.NumSubscriptions(); n != base {
		t.Errorf("%d subscriptions left after the capture stopped", n-base)
	}
}

// The capture subscribes to ojs.events.>, so it lists the events of other
// jetgate processes (another connection, another publisher) too.
func TestCaptureSeesOtherProcesses(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ncA, jsA := natstest.Connect(t, s)
	ncB, jsB := natstest.Connect(t, s)
	a, err := New(ncA, jsA, Config{Source: "ojs://jetgate/a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	bp, err := New(ncB, jsB, Config{Source: "ojs://jetgate/b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bp.Close)
	arm(t, a)
	bp.PublishQueue(TypeQueuePaused, "q", "ops")
	a.PublishQueue(TypeQueueResumed, "q", "ops")
	waitCaptured(t, a, 2)
	got, err := a.Recent(testCtx(t), ojs.EventQuery{})
	if err != nil || len(got) != 2 {
		t.Fatalf("Recent = %v, %v", got, err)
	}
	sources := map[string]string{}
	for _, ev := range got {
		sources[ev.Type] = ev.Source
	}
	if sources[TypeQueuePaused] != "ojs://jetgate/b" || sources[TypeQueueResumed] != "ojs://jetgate/a" {
		t.Errorf("sources = %v", sources)
	}
	if bp.cap.state().running {
		t.Error("a process that was never read captures events")
	}
}

// Close stops the capture for good: no subscription left, reads fail;
// twice is fine, and publishing goes on.
func TestCaptureClose(t *testing.T) {
	t.Parallel()
	p, b := setupCapture(t, Config{})
	base := b.nc.NumSubscriptions()
	arm(t, p)
	p.Close()
	p.Close()
	if b.nc.NumSubscriptions() != base || p.cap.state().running {
		t.Fatalf("after Close: %d subscriptions left, %+v", b.nc.NumSubscriptions()-base, p.cap.state())
	}
	if _, err := p.Recent(testCtx(t), ojs.EventQuery{}); !errors.Is(err, errClosed) {
		t.Errorf("Recent after Close: %v", err)
	}
	live := subscribe(t, b.nc)
	p.Publish(TypeJobStarted, "s0", map[string]any{})
	receive(t, live)
}

// Without Config.Stream, Ensure leaves an existing event stream alone and
// warns that it still stores every event; with it, Ensure creates it.
func TestEnsureWithoutStreamWarns(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	p, err := New(nc, js, Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx := testCtx(t)
	if err := p.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	quiet := logs.Len() == 0
	mu.Unlock()
	if !quiet {
		t.Errorf("warned without a stream: %s", logs.String())
	}
	ps, err := New(nc, js, Config{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, topology.EventStream); err != nil {
		t.Errorf("Ensure without Stream touched the stream: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "nats stream rm OJS_EVENTS") {
		t.Errorf("no warning about the leftover stream: %s", logs.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// On a cluster the capture sees the events of processes connected to other
// servers once its subscription's interest has reached them (the docs say
// which events a first read may miss for that reason): after one marker
// event of the other process arrived, every later one does.
func TestCaptureSeesOtherServersOfACluster(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	ncA, _ := natstest.ConnectURL(t, cl.Servers[0].ClientURL())
	ncB, _ := natstest.ConnectURL(t, cl.Servers[2].ClientURL())
	a, err := New(ncA, nil, Config{Source: "ojs://jetgate/a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	bp, err := New(ncB, nil, Config{Source: "ojs://jetgate/b"})
	if err != nil {
		t.Fatal(err)
	}
	arm(t, a)
	start := time.Now()
	for deadline := start.Add(10 * time.Second); a.cap.state().events == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no event of the process on another server reached the capture")
		}
		bp.Publish(TypeWorkerHeartbeat, "marker", map[string]any{})
	}
	t.Logf("interest reached the other server within %s", time.Since(start))
	publishN(bp, 0, 50, TypeJobStarted)
	waitCapturedType(t, a, TypeJobStarted, 50)
	got, err := a.Recent(testCtx(t), ojs.EventQuery{Types: []string{TypeJobStarted}})
	if err != nil || !slices.Equal(subjects(got), want(49, 0, 1)) {
		t.Fatalf("Recent = %v, %v", subjects(got), err)
	}
}

// waitCapturedType polls until Recent lists n events of type typ.
func waitCapturedType(t *testing.T, p *Publisher, typ string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := p.Recent(testCtx(t), ojs.EventQuery{Types: []string{typ}, Limit: MaxRecentLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s events captured, want %d", len(got), typ, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
