package admission_test

import (
	"errors"
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
