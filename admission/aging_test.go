package admission_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// ojs-priority.md 8.2 (priority aging), the priority issue's aging test:
// while fresh priority-1 jobs keep coming, an old priority-3 job in a
// queue with aging {interval 400 ms, step 1, min 0} moves ahead of them
// once it has waited Bound(3, 0) = 1.2 s (effective 0 beats the fresh
// jobs' 1), never before, and within that bound plus a generous slack;
// the next fetch then returns it, at its stored priority. Without aging
// it would wait until the fresh jobs stop.
//
// The moment is read from the order the fetch path computes (FetchLevels),
// and the fresh jobs are taken off their level's consumer directly, so
// the loop observes the aging decision itself, at every round, without
// handing out jobs.
func TestAgingMovesOldJobAhead_PRI8_2(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	aging := ojs.Aging{Interval: 400 * time.Millisecond, Step: 1, MinPriority: 0}
	if _, err := b.svc.SetQueueAging(ctx, "aged", &aging); err != nil {
		t.Fatal(err)
	}
	bound := aging.Bound(3, 0)
	start := time.Now()
	old := enqueue(t, b, `{"type":"a.t","args":["old"],"queue":"aged","priority":3}`)
	const slack = 10 * time.Second
	for i := 0; ; i++ {
		// One fresh job in, one out: the priority-1 level's head stays
		// far younger than the interval unless the machine stalls, which
		// can only make the old job later, never earlier.
		enqueue(t, b, fmt.Sprintf(`{"type":"a.t","args":[%d],"queue":"aged","priority":1}`, i))
		levels, err := b.svc.FetchLevels(ctx, "aged")
		if err != nil {
			t.Fatal(err)
		}
		waited := time.Since(start)
		if len(levels) != 2 {
			t.Fatalf("levels %v, want 1 and 3", levels)
		}
		if levels[0] == 3 {
			if waited < bound {
				t.Fatalf("the old job moved ahead after %s, before its effective priority beat 1 (%s)", waited, bound)
			}
			break
		}
		if waited > bound+slack {
			t.Fatalf("the old job did not move ahead within %s + %s", bound, slack)
		}
		takeHead(t, b, "aged", 1)
	}
	j := fetch1(t, b, "aged")
	if j == nil || j.ID != old.ID {
		t.Fatalf("fetch after the old job moved ahead returned %v, want %s", j, old.ID)
	}
	if j.Priority != 3 {
		t.Fatalf("aging changed the stored priority to %d", j.Priority)
	}
}

// ojs-priority.md 8.2: a queue's aging is set, read back and removed; a
// queue without aging reads as null, and bad parameters are refused
// naming the field.
func TestQueueAgingConfig_PRI8_2(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	if _, err := b.svc.QueueAging(ctx, "nope"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	a := ojs.Aging{Interval: time.Minute, Step: 2, MinPriority: 1}
	if _, err := b.svc.SetQueueAging(ctx, "cfgq", &a); err != nil {
		t.Fatal(err)
	}
	got, err := b.svc.QueueAging(ctx, "cfgq")
	if err != nil || got.Aging == nil || *got.Aging != a {
		t.Fatalf("aging read back %+v, %v; want %+v", got, err, a)
	}
	bad := ojs.Aging{Interval: time.Minute, Step: 0}
	var ve *ojs.ValidationError
	if _, err := b.svc.SetQueueAging(ctx, "cfgq", &bad); !errors.As(err, &ve) || ve.Field != "aging.step" {
		t.Fatalf("step 0: %v, want a validation error on aging.step", err)
	}
	if _, err := b.svc.SetQueueAging(ctx, "cfgq", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.svc.QueueAging(ctx, "cfgq"); err != nil || got.Aging != nil {
		t.Fatalf("after removal: %+v, %v", got, err)
	}
}

// takeHead removes the next message of a queue level's ready consumer.
func takeHead(t *testing.T, b bundle, queue string, prio int) {
	t.Helper()
	ctx := testCtx(t)
	// The level's own durable consumer (a work queue stream allows one
	// consumer per subject); made here if no fetch has made it yet.
	cons, err := b.js.CreateOrUpdateConsumer(ctx, topology.ReadyStream, jetstream.ConsumerConfig{
		Durable: topology.ReadyConsumer(queue, prio), FilterSubjects: topology.ReadyLevelFilters(queue, prio),
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("level %d of %s: took %d messages (%v), want 1", prio, queue, n, batch.Error())
	}
}
