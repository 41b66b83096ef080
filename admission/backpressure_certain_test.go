package admission_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// unitPublishes counts the unit publishes of a queue that reach the NATS
// server, admitted or refused: a core subscription on the depth subjects
// sees both.
type unitPublishes struct {
	nc  *nats.Conn
	sub *nats.Subscription
}

func watchUnitPublishes(t *testing.T, nc *nats.Conn, queue string) unitPublishes {
	t.Helper()
	sub, err := nc.SubscribeSync(topology.DepthSubjects(queue))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return unitPublishes{nc: nc, sub: sub}
}

// count is the number of publishes so far. Every one counted was handled
// by the server before the enqueue that sent it returned, and so was sent
// to this subscriber before the flush's reply.
func (u unitPublishes) count(t *testing.T) int {
	t.Helper()
	if err := u.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	n, _, err := u.sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// BP-002, BP-004, BP-005 under overload (issue 20): while a reject queue
// is known to be full (a unit refused, no room given back since), further
// enqueues are refused without a unit publish each, with the same 429
// (max_depth, depth and bound, retry-after) and a rejected event each. A
// release of this process gives room back at once: the next enqueue is
// admitted, not refused from memory.
func TestBackpressureFullQueueRefusesWithoutRoundTrip_BP002_BP005(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, srv)
	sink := newEventSink()
	b := setupWith(t, natsConnect(t, srv), admission.Config{Events: sink}, func(s *admission.Service) {
		s.TrustRefusalsFor(time.Hour) // only release news ends the memory
	})
	bound(t, b, "full", ojs.Backpressure{MaxDepth: 2})
	body := func(i int) string { return fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"full"}}`, i) }
	enqueue(t, b, body(0))
	enqueue(t, b, body(1))
	pubs := watchUnitPublishes(t, nc, "full")

	for i := range 5 {
		_, err := tryEnqueue(t, b, body(10+i))
		fe := wantFull(t, err, "max_depth")
		if fe.Depth != 2 || fe.MaxDepth != 2 || fe.Ratio != 1 || fe.Strategy != ojs.StrategyReject {
			t.Fatalf("refusal %d: %+v, want depth 2 of 2", i, fe.Pressure)
		}
	}
	if n := pubs.count(t); n != 1 {
		t.Fatalf("5 refusals of a full queue published %d units, want 1 (the first asks JetStream, the rest know)", n)
	}
	eventually(t, 5*time.Second, "5 rejected events", func() bool { return sink.count(admission.EventBackpressureRejected) == 5 })
	// ojs-backpressure.md 10.1: backpressure.rejected carries queue,
	// depth, bound and job_type.
	for _, d := range sink.waitFor(t, admission.EventBackpressureRejected) {
		var got map[string]any
		if err := json.Unmarshal(d.(json.RawMessage), &got); err != nil {
			t.Fatalf("event data %v: %v", d, err)
		}
		if got["queue"] != "full" || got["depth"] != 2.0 || got["bound"] != 2.0 || got["job_type"] != "t" || got["bound_type"] != "max_depth" {
			t.Fatalf("rejected event data %v", got)
		}
	}

	// A claim gives a unit back; room is known the moment it is.
	if j := fetch1(t, b, "full"); j == nil {
		t.Fatal("fetch: no job")
	}
	eventually(t, 5*time.Second, "unit of the claimed job released", func() bool { n, _ := units(t, b.js, "full"); return n == 1 })
	enqueue(t, b, body(20))
	_, err := tryEnqueue(t, b, body(21))
	wantFull(t, err, "max_depth")
	if n := pubs.count(t); n != 2 {
		t.Fatalf("after the release %d unit publishes, want 2 (the admitted one; the next refusal needs none)", n)
	}
	if n, _ := units(t, b.js, "full"); n != 2 {
		t.Fatalf("units = %d, want 2", n)
	}
}

// Invariant 1 with a remembered refusal (issue 20): room made by another
// process reaches this one through the freed notice, so a refusal
// remembered here does not outlive it, however long it is trusted.
func TestBackpressureRoomFreedElsewhereEndsRefusals_BP002(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	trust := func(s *admission.Service) { s.TrustRefusalsFor(time.Hour) }
	p0 := setupWith(t, natsConnect(t, srv), admission.Config{}, trust)
	p1 := setupWith(t, natsConnect(t, srv), admission.Config{}, trust)
	ctx := testCtx(t)
	bound(t, p0, "shared", ojs.Backpressure{MaxDepth: 2})
	eventually(t, 5*time.Second, "bound seen by the second process", func() bool {
		c, _ := p1.svc.QueueConfig(ctx, "shared")
		return c.Source == "queue"
	})
	body := func(i int) string { return fmt.Sprintf(`{"type":"t","args":[%d],"options":{"queue":"shared"}}`, i) }
	enqueue(t, p0, body(0))
	enqueue(t, p0, body(1))
	_, err := tryEnqueue(t, p0, body(2))
	wantFull(t, err, "max_depth")
	_, err = tryEnqueue(t, p0, body(3))
	wantFull(t, err, "max_depth") // from memory now

	// The other process claims a job, releasing its unit.
	if j := fetch1(t, p1, "shared"); j == nil {
		t.Fatal("fetch: no job")
	}
	eventually(t, 5*time.Second, "unit released", func() bool { n, _ := units(t, p0.js, "shared"); return n == 1 })
	eventually(t, 10*time.Second, "an enqueue admitted in the first process", func() bool {
		_, err := tryEnqueue(t, p0, body(4))
		return err == nil
	})
	if n, _ := units(t, p0.js, "shared"); n != 2 {
		t.Fatalf("units = %d, want 2", n)
	}
	_, err = tryEnqueue(t, p0, body(5))
	wantFull(t, err, "max_depth")
}

// count is the number of events of a type recorded so far.
func (s *eventSink) count(eventType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events[eventType])
}
