package admission_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// holderCfg makes leases deferrable with a short ack wait: a claim holds
// its ready message for 1 s before writing the lease timer, a process's
// sentinel fires 4.5 s after its last renewal, and a job whose worker is
// silent stalls 3 s after it started.
var holderCfg = admission.Config{ClaimAckWait: 3 * time.Second, DefaultHeartbeatTimeout: 3 * time.Second}

// enforcedBy is when the lease of a job started at started must have been
// enforced at the latest: its deadline (started + 3 s) plus one ack wait
// of the ready consumers (issue 31 item 1), plus a margin for a loaded
// machine.
func enforcedBy(started time.Time) time.Time {
	return started.Add(holderCfg.DefaultHeartbeatTimeout + holderCfg.ClaimAckWait + 8*time.Second)
}

// awaitLeft waits until job id left active, reading it through b (never
// fetching), and returns it; it fails the test once by passes.
func awaitLeft(t *testing.T, b bundle, id string, by time.Time) *ojs.Job {
	t.Helper()
	for {
		j, err := b.svc.Get(testCtx(t), id)
		if err == nil && j.State != ojs.StateActive {
			return j
		}
		if time.Now().After(by) {
			t.Fatalf("job %s still %v %s past its deadline + the ack wait (err %v)", id, j.State,
				time.Since(by.Add(-8*time.Second)).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 31 item 1: the process that fetched a job dies (in-process: its
// service stops as a crash would, writing nothing) before writing the
// deferred lease; nobody fetches that queue again. The job's lease is
// enforced all the same, within one ack wait after its deadline, by the
// other process on the same NATS: retryable while attempts remain,
// discarded at the last one.
func TestLeaseOfKilledProcessIsEnforcedWithoutFetch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempts int
		want     ojs.State
	}{{3, ojs.StateRetryable}, {1, ojs.StateDiscarded}} {
		t.Run(string(tc.want), func(t *testing.T) {
			t.Parallel()
			a, b := twoProcesses(t, holderCfg)
			q := "dies" + string(tc.want)
			j := enqueue(t, a, fmt.Sprintf(`{"type":"t.a","args":[],"queue":%q,"options":{"retry":{"max_attempts":%d,"initial_interval":"PT1M"}}}`,
				q, tc.attempts))
			got := fetch1(t, a, q)
			if got == nil || got.ID != j.ID || got.Internal.HeldAck == "" {
				t.Fatalf("the claim should hold its ready message: %+v", got)
			}
			a.svc.Kill() // before its deferred lease write (1 s)
			if tok := leaseTimer(t, b.js, j.ID); tok != "" {
				t.Skipf("the machine is too slow: the killed process wrote the lease (%s) before it died", tok)
			}
			left := awaitLeft(t, b, j.ID, enforcedBy(got.StartedAt.Time))
			if left.State != tc.want || left.Error == nil || left.Error.Type != "stalled" {
				t.Fatalf("job of the killed process: state %s error %+v, want %s stalled", left.State, left.Error, tc.want)
			}
		})
	}
}

// Issue 31 item 1, the embedded default: the process dies with its NATS
// server, so the ready consumers, which keep their state in memory, are
// gone when it starts again, and every message not acked comes back as
// new. A fresh process on the restarted server frees the dead one's jobs
// without any fetch of their queue, among them one claimed past the
// sentinel's first bound (the claim had to publish a sentinel with a
// higher bound before its record was written); the job left available is
// still handed out, once, after them.
func TestLeaseOfProcessDeadWithItsServer(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, jsA := natstest.Connect(t, s)
	a := setupCfg(t, jsA, holderCfg)
	q := "withserver"
	retry := `"retry":{"max_attempts":3,"initial_interval":"PT1M"}`
	first := enqueue(t, a, `{"type":"t.a","args":[1],"queue":"`+q+`","options":{`+retry+`}}`)
	got1 := fetch1(t, a, q)
	if got1 == nil || got1.ID != first.ID || got1.Internal.HeldAck == "" {
		t.Fatalf("first claim: %+v", got1)
	}
	// Past the first claim's bound (it runs a few hundred sequences
	// ahead): the second claim needs a new sentinel.
	var batch []*ojs.Job
	for i := range 400 {
		batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"t.f","args":[%d],"queue":"filler"}`, i)))
	}
	if _, err := a.svc.EnqueueBatch(testCtx(t), batch); err != nil {
		t.Fatal(err)
	}
	second := enqueue(t, a, `{"type":"t.a","args":[2],"queue":"`+q+`","options":{`+retry+`}}`)
	waiting := enqueue(t, a, `{"type":"t.a","args":[3],"queue":"`+q+`"}`)
	got2 := fetch1(t, a, q)
	if got2 == nil || got2.ID != second.ID || got2.Internal.HeldAck == "" {
		t.Fatalf("second claim: %+v", got2)
	}
	a.svc.Kill()
	if tok := leaseTimer(t, jsA, got2.ID); tok != "" {
		t.Skipf("the machine is too slow: the second claim's lease (%s) was written before the process died", tok)
	}
	s = natstest.RestartServer(t, s)
	_, jsB := natstest.Connect(t, s)
	b := setupCfg(t, jsB, holderCfg)
	for _, got := range []*ojs.Job{got1, got2} {
		left := awaitLeft(t, b, got.ID, enforcedBy(time.Now().Add(-holderCfg.DefaultHeartbeatTimeout)))
		if left.State != ojs.StateRetryable || left.Error == nil || left.Error.Type != "stalled" {
			t.Fatalf("job %s of the dead process: %s %+v", got.ID, left.State, left.Error)
		}
	}
	next := waitFetch(t, b, q, 10*time.Second)
	if next.ID != waiting.ID || next.Attempt != 1 {
		t.Fatalf("after the dead process's jobs: %+v, want %s", next, waiting.ID)
	}
	if jobs, err := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{q}, WorkerID: "w2"}); err != nil || len(jobs) != 0 {
		t.Fatalf("a job was handed out twice: %v %+v", err, jobs)
	}
}

// Issue 31 item 1: a process that stops cleanly (SIGTERM) writes every
// lease it deferred before it exits, acks the ready messages it held, and
// cancels its sentinel.
func TestStopWritesEveryDeferredLease(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	// Deferral 10 s: the leases are still deferred when Stop comes.
	b := setupCfg(t, js, admission.Config{})
	ctx := testCtx(t)
	var held []*ojs.Job
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"t.a","args":[%d],"queue":"sigterm"}`, i))
		got := fetch1(t, b, "sigterm")
		if got == nil || got.Internal.HeldAck == "" {
			t.Fatalf("claim %d should hold its ready message: %+v", i, got)
		}
		if tok := leaseTimer(t, js, got.ID); tok != "" {
			t.Fatalf("lease of %s written at claim", got.ID)
		}
		held = append(held, got)
	}
	if n := holderSchedules(t, js); n != 1 {
		t.Fatalf("%d holder sentinels while the process holds messages, want 1", n)
	}
	b.svc.Stop()
	for _, j := range held {
		if tok := leaseTimer(t, js, j.ID); tok != j.Internal.Token {
			t.Errorf("lease of %s after Stop: token %q, want %q", j.ID, tok, j.Internal.Token)
		}
	}
	cons, err := js.Consumer(ctx, topology.ReadyStream, topology.ReadyConsumer("sigterm", 2))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := holderSchedules(t, js)
		if info.NumAckPending == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Stop: %d ready messages still held, %d holder sentinels", info.NumAckPending, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holderSchedules counts the holder sentinels scheduled in OJS_TIMERS.
func holderSchedules(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(testCtx(t), topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(testCtx(t), jetstream.WithSubjectFilter(fmt.Sprintf(topology.TimerSchedulePattern, topology.TimerHolder, "*")))
	if err != nil {
		t.Fatal(err)
	}
	return len(info.State.Subjects)
}

// Issue 31 item 1: a process that keeps holding ready messages keeps
// renewing its sentinel, which therefore never fires while it runs (its
// walk would log "leases of a stopped process secured"), and cancels it
// once it holds nothing any more.
func TestHolderSentinelRenewedWhileHoldingCancelledWhenIdle(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	var log lockedBuffer
	cfg := holderCfg
	cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := setupCfg(t, js, cfg)
	// Longer than a sentinel takes to fire after its last renewal (4.5 s).
	until := time.Now().Add(6 * time.Second)
	var prev *ojs.Job
	for time.Now().Before(until) {
		enqueue(t, b, `{"type":"t.a","args":[],"queue":"renewed"}`)
		got := fetch1(t, b, "renewed")
		if got == nil || got.Internal.HeldAck == "" {
			t.Fatalf("claim should hold its ready message: %+v", got)
		}
		if prev != nil {
			ack(t, b, prev.ID)
		}
		prev = got
		if n := holderSchedules(t, js); n != 1 {
			t.Fatalf("%d holder sentinels while the process holds messages, want 1", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ack(t, b, prev.ID)
	deadline := time.Now().Add(10 * time.Second)
	for holderSchedules(t, js) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sentinel of a process that holds nothing any more was not cancelled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(log.String(), "leases of a stopped process secured") {
		t.Fatalf("the sentinel of a live process fired:\n%s", log.String())
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
