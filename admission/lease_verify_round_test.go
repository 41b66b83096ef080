package admission_test

import (
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/kvlimits"
)

// RL-001: a concurrency slot whose release was lost (its job is gone or
// no longer active with the lease's token) is reclaimed by the rounds
// that look at the entry's waiters, not only when the entry's JetStream
// limit timer fires (issue 20, found by the chaos suite: two leases of
// finished jobs held a full key for minutes while the processes' rounds
// ran every 15 s, until a process started afresh reclaimed them).
//
// The slot is held here by a lease older than StaleLeaseAge for a job that
// does not exist; the job's claim is refused and parks it, the park wakes
// a round, which must reclaim the slot and start the waiter well before
// the entry's limit timer (LimitBackstop and a second after the park)
// could fire.
func TestLostReleaseReclaimedByRound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	entry := kvlimits.KeyEntry("lost-release")
	one := 1
	if err := b.svc.Limits().Update(ctx, entry, func(st *kvlimits.State) bool {
		st.Acquire(kvlimits.Request{JobID: "ghost-job", Token: "ghost-token", Declared: ojs.Limits{Concurrency: &one}},
			time.Now().Add(-admission.StaleLeaseAge-time.Minute))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, b, limitedJob("rllostrel", `{"key":"lost-release","concurrency":1}`, 0))
	if got := fetchWithin(t, b, admission.LimitBackstop/2, "rllostrel"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch = %v, want %s: the slot of a lost release was not reclaimed by the waiter's round", got, j.ID)
	}
}
