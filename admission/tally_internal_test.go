package admission

import (
	"maps"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// Issue 31 item 2: the count keeper moves a job from what it remembers of
// it to what the record's latest write says, so a write it never read
// (the bucket keeps one revision: a write replaced before it was read) or
// read twice changes nothing; a record gone takes the job out; a held
// ready message counts only until the claim would release it.
func TestTallyFollowsTheLatestWriteOfEachJob(t *testing.T) {
	tl := newTally(10 * time.Second)
	now := time.UnixMilli(1_800_000_000_000)
	st := func(state ojs.State, prio int, held time.Time) *jobstore.RecordStat {
		s := &jobstore.RecordStat{State: state, Priority: prio, Queue: "q"}
		if !held.IsZero() {
			s.HeldSince = held.UnixMilli()
		}
		return s
	}
	want := func(label string, w map[string]int64) {
		t.Helper()
		got := tl.numbers(now, []string{"q"})["q"]
		if !maps.Equal(got, w) {
			t.Fatalf("%s: %v, want %v", label, got, w)
		}
	}
	tl.apply("a", st(ojs.StateScheduled, 2, time.Time{}))
	tl.apply("b", st(ojs.StateScheduled, 2, time.Time{}))
	tl.apply("c", st(ojs.StatePending, 2, time.Time{}))
	want("created", map[string]int64{"scheduled": 2, "pending": 1})
	// a: scheduled -> available -> active; only the last write is read.
	tl.apply("a", st(ojs.StateActive, 1, now.Add(-2*time.Second)))
	tl.apply("a", st(ojs.StateActive, 1, now.Add(-2*time.Second))) // read twice
	want("a claimed", map[string]int64{"scheduled": 1, "pending": 1, "active": 1, "held_p001": 1})
	// b claimed 11 s ago: its lease was written and its message acked.
	tl.apply("b", st(ojs.StateActive, 2, now.Add(-11*time.Second)))
	want("b claimed long ago", map[string]int64{"pending": 1, "active": 2, "held_p001": 1})
	// a finished, c deleted, an unknown job finished (its earlier writes
	// were before this keeper's time: nothing to take away).
	tl.apply("a", st(ojs.StateCompleted, 1, time.Time{}))
	tl.apply("c", nil)
	tl.apply("z", st(ojs.StateCompleted, 2, time.Time{}))
	want("finished", map[string]int64{"active": 1})
	tl.apply("b", st(ojs.StateRetryable, 2, time.Time{}))
	tl.apply("b", st(ojs.StateAvailable, 2, time.Time{}))
	want("retried", map[string]int64{})
	if j, ok := tl.jobs["b"]; !ok || j.state != ojs.StateAvailable {
		t.Fatalf("an available job with a record is remembered (parked jobs are checked against it): %+v %v", j, ok)
	}
	tl.setParked(map[gaugeKey]int64{{"q", parkedAt(2)}: 1})
	want("parked", map[string]int64{"parked_p002": 1})
}
