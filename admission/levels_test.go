package admission_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 4 ("priority levels in use cost resources only while they hold
// jobs"): a level's durable consumer is removed by JetStream once it has
// been idle for ConsumerIdle, and a later fetch from that level works.
func TestIdleLevelConsumerGoesAway(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{ConsumerIdle: 500 * time.Millisecond})
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"i.t","args":[],"queue":"idleq","priority":7}`)
	if got := fetch1(t, b, "idleq"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch %v", got)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	name := topology.ReadyConsumer("idleq", 7)
	if _, err := js.Consumer(ctx, topology.ReadyStream, name); err != nil {
		t.Fatalf("the level's consumer should exist after a fetch: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := js.Consumer(ctx, topology.ReadyStream, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s of an idle level still exists: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	j2 := enqueue(t, b, `{"type":"i.t","args":[],"queue":"idleq","priority":7}`)
	if got := fetch1(t, b, "idleq"); got == nil || got.ID != j2.ID {
		t.Fatalf("fetch after the consumer went away: %v, want %s", got, j2.ID)
	}
}

// PRI-004: a fetch returns the highest-priority ready job. One old
// priority-3 job waits behind a backlog of priority-1 jobs that one
// enqueue and one fetch per round keep at three; no fetch may return the
// priority-3 job. Before levels.go, a level consumer's no-wait pull came
// back empty now and then while the level held messages (nats-server's
// cached pending count lagging), and the fetch fell through to level 3:
// this test failed within a few hundred rounds.
func TestFetchNeverSkipsAReadyLevel_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	low := enqueue(t, b, `{"type":"l.t","args":["low"],"queue":"skipq","priority":3}`)
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"l.t","args":[%d],"queue":"skipq","priority":1}`, -i))
	}
	for i := range 1500 {
		enqueue(t, b, fmt.Sprintf(`{"type":"l.t","args":[%d],"queue":"skipq","priority":1}`, i))
		j := fetch1(t, b, "skipq")
		if j == nil || j.ID == low.ID {
			t.Fatalf("round %d: fetch returned %v while priority-1 jobs were ready", i, j)
		}
	}
}
