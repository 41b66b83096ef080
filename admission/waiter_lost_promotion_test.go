package admission_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// A waiter whose promotion was promised but whose ready message never
// landed still starts, also after its promise expired (issue 20, found by
// the process-level chaos suite: the promoter writes the promise, then
// publishes the ready message; with a NATS node killed the publish went
// unanswered, the promise held the key's capacity so no round published
// it again, and once the promise expired the next round took the waiter
// for released and started, dropped it, and the job stayed available
// forever with no message; RL-001's waiters must all start).
//
// The state the failed promotion leaves is written here directly: the
// waiter stored, released in the entry's state with a promise, and no
// ready message. With the promise still in force, the round the release
// wakes publishes the message again although the promise keeps the slot
// (fresh); with the promise past kvlimits.PromiseTTL, the waiter is
// promoted again (expired).
func TestWaiterStartsAfterLostPromotion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		age    time.Duration
		within time.Duration
	}{
		{"fresh", 0, kvlimits.PromiseTTL / 2},
		{"expired", kvlimits.PromiseTTL + time.Second, 20 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			waiterStartsAfterLostPromotion(t, c.name, c.age, c.within)
		})
	}
}

func waiterStartsAfterLostPromotion(t *testing.T, name string, age, within time.Duration) {
	b := setup(t)
	ctx := testCtx(t)
	key, queue := "lost-promotion-"+name, "rllost"+name
	first, second := oneSlotTaken(t, b, key, queue)
	entry := kvlimits.KeyEntry(key)
	ws, err := b.js.Stream(ctx, topology.WaitStream)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	deadline := time.Now().Add(10 * time.Second)
	for seq == 0 {
		m, err := ws.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(topology.WaitEntryFilter(entry.Name())))
		switch {
		case err == nil && m.Header.Get(jobstore.HeaderJobID) == second.ID:
			seq = m.Sequence
		case time.Now().After(deadline):
			t.Fatalf("no waiter of %s stored: %v", second.ID, err)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := b.svc.Limits().Update(ctx, entry, func(st *kvlimits.State) bool {
		st.Promise(second.ID, seq, time.Now().Add(-age))
		st.Waiting = 1 // so the release below wakes the entry at once
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ack(t, b, first.ID)
	if j := fetchWithin(t, b, within, queue); j == nil || j.ID != second.ID {
		t.Fatalf("after the slot freed, fetch = %v, want %s: a waiter released by a promotion that never landed was lost", j, second.ID)
	}
}
