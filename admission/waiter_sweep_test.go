package admission_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// A waiter every wake-up of which was lost still starts: the promoter's
// sweep finds the entries with waiters stored and looks at them (issue
// 20, found by the chaos suite: the process holding an entry's local
// timer was killed after its JetStream limit timer failed to be written,
// and 30 window-limited jobs waited forever on an open key; RL-001's
// waiters must all start).
//
// The lost wake-ups are made here: the process that parked the waiter
// stops (its local timer goes with it), its JetStream limit timer is
// purged (as if writing it had failed), and the waiting hint is cleared
// (as a read behind the writes can), so the release of the slot, through
// a second process, kicks nobody.
func TestSweepFindsForgottenWaiter(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	_, js := natstest.Connect(t, ns)
	ctx := testCtx(t)
	first := setupCfg(t, js, admission.Config{})
	running, waiter := oneSlotTaken(t, first, "forgotten", "rlforgot")
	entry := kvlimits.KeyEntry("forgotten")
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := first.svc.Store().WaitingCount(ctx, entry.Name())
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter of %s not stored: %d, %v", waiter.ID, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	first.svc.Stop()
	timers, err := js.Stream(ctx, topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := timers.Purge(ctx, jetstream.WithPurgeSubject(topology.TimerSchedule(topology.TimerLimit, entry.Name()))); err != nil {
		t.Fatal(err)
	}
	if err := first.svc.Limits().Update(ctx, entry, func(st *kvlimits.State) bool {
		st.Waiting = 0
		return true
	}); err != nil {
		t.Fatal(err)
	}

	second := setupWith(t, js, admission.Config{}, func(svc *admission.Service) { svc.SetLimitSweep(200 * time.Millisecond) })
	ack(t, second, running.ID)
	if j := fetchWithin(t, second, 10*time.Second, "rlforgot"); j == nil || j.ID != waiter.ID {
		t.Fatalf("after the slot freed, fetch = %v, want %s: a waiter with no wake-up left was forgotten", j, waiter.ID)
	}
}
