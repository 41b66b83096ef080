package admission_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// A rate-limited job's waiter is dropped only when a read of the job's
// record proves the job moved on past the park, never on a read behind it
// (issue 20, found by the process-level chaos suite: with NATS nodes
// killed, a stream leader just elected answered with an older revision,
// the promoter dropped the waiter, and the job stayed available forever
// with no message to start it; RL-001's waiters must all start).
//
// The read behind is made here the other way round: a waiter is parked as
// if by a claim that read the record at a later revision than the one
// stored (with a token the record never had), and after it one parked
// from the stored revision with another token, whose job truly moved on.
// Once the slot frees, the first stays (and does not hold up the waiters
// after it), the second is dropped.
func TestWaiterKeptOnReadBehindPark(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	first, second := oneSlotTaken(t, b, "stale-read", "rlstale")
	rec, rev, err := b.svc.Store().Get(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	entry := kvlimits.KeyEntry("stale-read").Name()
	ahead := rec.Clone()
	ahead.Internal.Token, ahead.Rev = "token-of-a-later-revision", rev+1_000_000
	gone := rec.Clone()
	gone.Internal.Token, gone.Rev = "token-of-an-earlier-revision", rev
	if err := b.svc.Store().Park(ctx, entry, ahead, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Store().Park(ctx, entry, gone, time.Now()); err != nil {
		t.Fatal(err)
	}
	ack(t, b, first.ID)
	if j := fetchWithin(t, b, 15*time.Second, "rlstale"); j == nil || j.ID != second.ID {
		t.Fatalf("after the slot freed, fetch = %v, want %s", j, second.ID)
	}
	// The slot frees again: the next round reads the waiter parked ahead
	// of the record (kept, and the next one read in its place) and the
	// moved-on one (dropped).
	ack(t, b, second.ID)
	ws, err := b.js.Stream(ctx, topology.WaitStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second) // the waiting hint was not raised by these parks: the backstop round (LimitBackstop) finds them
	for {
		tokens := map[string]bool{}
		for seq := uint64(1); ; {
			m, err := ws.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(topology.WaitEntryFilter(entry)))
			if err != nil {
				break
			}
			tokens[m.Header.Get(jobstore.HeaderToken)] = true
			seq = m.Sequence + 1
		}
		if tokens["token-of-a-later-revision"] && !tokens["token-of-an-earlier-revision"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters left = %v: want the one parked ahead of the record kept and the moved-on one dropped", tokens)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oneSlotTaken enqueues two jobs on queue under key with a concurrency
// limit of 1 and fetches: the first starts (running), the second is
// refused and waits (RL-001).
func oneSlotTaken(t *testing.T, b bundle, key, queue string) (running, waiting *ojs.Job) {
	t.Helper()
	pol := `{"key":"` + key + `","concurrency":1}`
	running = enqueue(t, b, limitedJob(queue, pol, 0))
	waiting = enqueue(t, b, limitedJob(queue, pol, 1))
	if j := fetch1(t, b, queue); j == nil || j.ID != running.ID {
		t.Fatalf("first fetch = %v, want %s", j, running.ID)
	}
	if j := fetch1(t, b, queue); j != nil {
		t.Fatalf("RL-001: %s started with the only slot taken", j.ID)
	}
	return running, waiting
}
