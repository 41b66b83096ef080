package workers_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/workers"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The registry's watch and writer stop with Stop (STYLE item 14).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock               { c := &clock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// open starts a registry on its own connection to s, over the bucket
// topology.Ensure creates: like one jetgate process.
func open(t *testing.T, s *server.Server, cfg workers.Config) (*workers.Registry, jetstream.KeyValue) {
	t.Helper()
	_, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := workers.New(a.Workers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, a.Workers
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastSeq is the bucket's last stream sequence: one more per write.
func lastSeq(t *testing.T, kv jetstream.KeyValue) uint64 {
	t.Helper()
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
}

// Fetch is the hot path: Admit writes nothing itself; a worker's
// sightings are written at most once per Refresh by the writer, off the
// fetch's path (issue 16 constraint; ojs-worker-protocol.md 10.1 needs
// only a recent last-seen time).
func TestAdmitWritesAtMostOncePerRefresh(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	clk := newClock()
	r, kv := open(t, s, workers.Config{Refresh: 5 * time.Second, Now: clk.now})
	before := lastSeq(t, kv)
	req := ojs.FetchRequest{WorkerID: "w1", Queues: []string{"q"}}
	for range 1000 {
		if _, ok := r.Admit(req); !ok {
			t.Fatal("a running worker was refused")
		}
	}
	eventually(t, "the sighting is written", func() bool { _, err := r.Worker(context.Background(), "w1"); return err == nil })
	for range 1000 {
		r.Admit(req)
	}
	// Give a wrongly queued second write the chance to land: one more
	// worker's sighting goes through the same writer after it.
	r.Admit(ojs.FetchRequest{WorkerID: "marker"})
	eventually(t, "the marker is written", func() bool { _, err := r.Worker(context.Background(), "marker"); return err == nil })
	if got := lastSeq(t, kv) - before; got != 2 {
		t.Fatalf("2000 fetches of w1 and one of marker wrote %d entries, want 2", got)
	}
	w, _ := r.Worker(context.Background(), "w1")
	first := w.LastSeenAt.Time
	clk.add(6 * time.Second)
	r.Admit(req)
	eventually(t, "a sighting after Refresh is written", func() bool {
		w, err := r.Worker(context.Background(), "w1")
		return err == nil && w.LastSeenAt.After(first)
	})
	if w, _ := r.Worker(context.Background(), "w1"); len(w.Queues) != 1 || w.Queues[0] != "q" || w.State != ojs.WorkerRunning {
		t.Fatalf("worker seen by fetch: %+v", w)
	}
}

// Two processes: a quiet beat written by one keeps the worker from the
// other's fetches once its watch delivers it (ojs-graceful-shutdown.md
// 5.1), and an operator's directive written by one is answered by the
// other's next heartbeat at once: the heartbeat's compare-and-swap fails
// on a stale view and rereads (ojs-worker-protocol.md 4.4).
func TestTwoRegistriesShareState(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	a, _ := open(t, s, workers.Config{})
	b, _ := open(t, s, workers.Config{})
	ctx := context.Background()
	beat := func(r *workers.Registry, id, state string) string {
		return r.Beat(ctx, ojs.HeartbeatRequest{WorkerID: id, Worker: ojs.WorkerInfo{State: state, ActiveJobs: -1}})
	}
	if got := beat(a, "w", ojs.WorkerQuiet); got != ojs.WorkerQuiet {
		t.Fatalf("quiet beat answered %q", got)
	}
	eventually(t, "b refuses the quiet worker", func() bool { _, ok := b.Admit(ojs.FetchRequest{WorkerID: "w"}); return !ok })

	if got := beat(a, "v", ojs.WorkerRunning); got != ojs.WorkerRunning {
		t.Fatalf("running beat answered %q", got)
	}
	eventually(t, "b knows v", func() bool { _, err := b.Worker(ctx, "v"); return err == nil })
	if _, err := b.Directive(ctx, "v", ojs.WorkerTerminate); err != nil {
		t.Fatal(err)
	}
	if got := beat(a, "v", ojs.WorkerRunning); got != ojs.WorkerTerminate {
		t.Fatalf("a's heartbeat after b's terminate answered %q", got)
	}
	if _, err := a.Directive(ctx, "nobody", ojs.WorkerQuiet); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("directive for an unknown worker: %v", err)
	}
}

// Every change is a compare-and-swap: heartbeats racing on two processes
// with a directive never lose the directive, nor each other's fields.
func TestConcurrentBeatsKeepDirective(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	a, _ := open(t, s, workers.Config{})
	b, _ := open(t, s, workers.Config{})
	ctx := context.Background()
	a.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "w", Worker: ojs.WorkerInfo{ActiveJobs: -1}})
	var wg sync.WaitGroup
	for i, r := range []*workers.Registry{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				r.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "w", Worker: ojs.WorkerInfo{ActiveJobs: i, Hostname: "h"}})
			}
		}()
	}
	if _, err := b.Directive(ctx, "w", ojs.WorkerQuiet); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, r := range []*workers.Registry{a, b} {
		if got := r.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "w", Worker: ojs.WorkerInfo{ActiveJobs: -1}}); got != ojs.WorkerQuiet {
			t.Fatalf("after racing beats the directive reads %q", got)
		}
	}
	if w, _ := a.Worker(ctx, "w"); w.Hostname != "h" || w.Directive != ojs.WorkerQuiet {
		t.Fatalf("worker after the race: %+v", w)
	}
}

// A dead worker vanishes: its entry expires with the bucket's TTL, and
// the expiry reaches every process's view (ojs-admin-api.md 9.1 lists
// known workers; ojs-worker-protocol.md 10).
func TestExpiredWorkerVanishes(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: topology.WorkersBucket, History: 1,
		TTL: 2 * time.Second, LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, err := workers.New(kv, workers.Config{Refresh: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	r.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "gone", Worker: ojs.WorkerInfo{ActiveJobs: -1}})
	if len(r.AllWorkers()) != 1 {
		t.Fatal("the worker is not listed after its beat")
	}
	eventually(t, "the expired worker leaves the view", func() bool { return len(r.AllWorkers()) == 0 })
	if _, err := r.Worker(ctx, "gone"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("expired worker: %v", err)
	}
	// A Refresh above half the TTL would let live workers expire.
	bad, err := workers.New(kv, workers.Config{Refresh: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(ctx); err == nil {
		bad.Stop()
		t.Fatal("Start accepted a Refresh over half the TTL")
	}
}

// sink records published events.
type sink struct {
	mu     sync.Mutex
	events []string
}

func (s *sink) Publish(eventType, subject string, _ any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, eventType+" "+subject)
}

func (s *sink) count(ev string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e == ev {
			n++
		}
	}
	return n
}

// ojs-events.md 4.3: worker.started when a worker is first seen,
// worker.quiet when it becomes quiet (by its beat or a directive),
// worker.heartbeat per heartbeat; started and quiet once across two
// processes, published by the one whose compare-and-swap won.
func TestWorkerEvents_EV43(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	var ev sink
	a, kv := open(t, s, workers.Config{Events: &ev})
	b, _ := open(t, s, workers.Config{Events: &ev})
	ctx := context.Background()
	before := lastSeq(t, kv)
	a.Admit(ojs.FetchRequest{WorkerID: "w", Queues: []string{"q"}})
	b.Admit(ojs.FetchRequest{WorkerID: "w", Queues: []string{"q"}})
	eventually(t, "both sightings are written", func() bool { return lastSeq(t, kv)-before == 2 })
	b.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "w", Worker: ojs.WorkerInfo{State: ojs.WorkerRunning, ActiveJobs: 2}})
	if _, err := a.Directive(ctx, "w", ojs.WorkerQuiet); err != nil {
		t.Fatal(err)
	}
	b.Beat(ctx, ojs.HeartbeatRequest{WorkerID: "w", Worker: ojs.WorkerInfo{State: ojs.WorkerQuiet, ActiveJobs: 2}})
	if ev.count("worker.started w") != 1 || ev.count("worker.quiet w") != 1 || ev.count("worker.heartbeat w") != 2 {
		t.Fatalf("events %v", ev.events)
	}
}
