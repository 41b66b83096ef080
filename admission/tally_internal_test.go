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

// Issue 31 item 2: a held claim past the lease deferral is remembered
// lapsedKeep longer; when a process died holding messages (suspect), the
// claims past the deferral or about to be are checked, one whose message
// is still in the ready stream counts held until a check finds it gone,
// one whose message is gone is forgotten, and a claim replaced since the
// check is left alone.
func TestTallyHeldClaimsOfADeadProcess(t *testing.T) {
	tl := newTally(10 * time.Second)
	tl.lapsedKeep = 9 * time.Second
	start := time.UnixMilli(1_800_000_000_000)
	held := func(at time.Time) *jobstore.RecordStat {
		return &jobstore.RecordStat{State: ojs.StateActive, Priority: 1, Queue: "q", HeldSince: at.UnixMilli()}
	}
	heldAt := func(now time.Time) int64 { return tl.numbers(now, []string{"q"})["q"]["held_p001"] }
	tl.apply("a", held(start))
	tl.apply("b", held(start))
	tl.apply("c", held(start.Add(5*time.Second)))
	if n := heldAt(start.Add(time.Second)); n != 3 {
		t.Fatalf("3 claims within the deferral: held %d", n)
	}
	// Nothing suspect: nothing to check, and past the deferral no claim
	// of a and b counts.
	if got := tl.heldToCheck(start.Add(11*time.Second), false, 2*time.Second); len(got) != 0 {
		t.Fatalf("checked without a dead process: %v", got)
	}
	if n := heldAt(start.Add(11 * time.Second)); n != 1 {
		t.Fatalf("11 s after: held %d, want 1 (c)", n)
	}
	// A process died: a and b (lapsed) and c (lapsing within 2 s of 13 s
	// after) are checked; a's message is there, b's is gone, and c is
	// claimed again meanwhile.
	now := start.Add(13 * time.Second)
	asked := tl.heldToCheck(now, true, 2*time.Second)
	if len(asked) != 3 {
		t.Fatalf("checked %v, want a, b and c", asked)
	}
	tl.apply("c", held(now))
	tl.heldChecked(asked, map[string]bool{"a": true, "c": true})
	if n := heldAt(now); n != 2 {
		t.Fatalf("after the check: held %d, want 2 (a found, c's new claim)", n)
	}
	if _, ok := tl.held["b"]; ok {
		t.Fatal("b, whose message is gone, is still remembered")
	}
	// a stays held long past lapsedKeep, checked even when nothing is
	// suspect any more, until its message is gone.
	later := start.Add(60 * time.Second)
	if n := heldAt(later); n != 1 {
		t.Fatalf("a minute after: held %d, want 1 (a)", n)
	}
	asked = tl.heldToCheck(later, false, 2*time.Second)
	if _, ok := asked["a"]; !ok || len(asked) != 1 {
		t.Fatalf("checked %v, want a alone", asked)
	}
	tl.heldChecked(asked, nil)
	if n := heldAt(later); n != 0 || tl.present != 0 {
		t.Fatalf("a acked: held %d, %d found present", n, tl.present)
	}
	if got := tl.heldToCheck(later, false, 2*time.Second); got != nil {
		t.Fatalf("nothing suspect nor found: checked %v", got)
	}
	// A lapsed claim no check found is forgotten after lapsedKeep.
	tl.apply("d", held(later))
	_ = heldAt(later.Add(15 * time.Second))
	if _, ok := tl.held["d"]; !ok {
		t.Fatal("d forgotten within lapsedKeep of its deferral")
	}
	_ = heldAt(later.Add(20 * time.Second))
	if _, ok := tl.held["d"]; ok {
		t.Fatal("d remembered past lapsedKeep")
	}
}

// Issue 31 item 2: a ready message that no record accounts for (an
// orphan, orphans.go) counts orphan_pNNN while its job's record is not
// available with its token at its level; its record landing after all
// makes it a job again (forgotten), a claim's held message is counted
// held and not twice, and what the records account for per level is the
// available jobs less the parked plus the held and the orphans.
func TestTallyCountsOrphansUntilARecordAccountsForThem(t *testing.T) {
	tl := newTally(10 * time.Second)
	now := time.UnixMilli(1_800_000_000_000)
	orphan := func(id, token string, prio int32) orphanMsg {
		return orphanMsg{queue: "q", prio: prio, id: id, token: token, subject: "s-" + id}
	}
	tl.apply("a", &jobstore.RecordStat{State: ojs.StateAvailable, Priority: 2, Queue: "q", Token: "ta"})
	tl.apply("h", &jobstore.RecordStat{State: ojs.StateActive, Priority: 2, Queue: "q", HeldSince: now.Add(-time.Second).UnixMilli()})
	for _, o := range []orphanMsg{orphan("a", "ta", 2), orphan("h", "th", 2)} {
		if tl.unaccounted(o, now) {
			t.Fatalf("%+v: accounted for by its record, taken for an orphan", o)
		}
	}
	for _, o := range []orphanMsg{orphan("a", "old", 2), orphan("a", "ta", 3), orphan("x", "tx", 2)} {
		if !tl.unaccounted(o, now) {
			t.Fatalf("%+v: no record accounts for it, not taken for an orphan", o)
		}
	}
	// y's subject holds two (an enqueue tried twice).
	tl.setOrphans("q", 2, map[uint64]orphanMsg{1: orphan("x", "tx", 2), 2: orphan("y", "ty", 2),
		3: orphan("y", "ty2", 2), 4: orphan("h", "th", 2)})
	got := tl.numbers(now, []string{"q"})["q"]
	if want := map[string]int64{"active": 1, "held_p002": 1, "orphan_p002": 3}; !maps.Equal(got, want) {
		t.Fatalf("with orphans: %v, want %v", got, want)
	}
	if acc := tl.accounted("q", now); acc[2] != 1+1+3 || tl.orphansAt("q", 2) != 4 {
		t.Fatalf("accounted at level 2: %v, want 5 (1 available, 1 held, 3 orphans)", acc)
	}
	// x's record lands (a slow write); y's message is gone.
	tl.apply("x", &jobstore.RecordStat{State: ojs.StateAvailable, Priority: 2, Queue: "q", Token: "tx"})
	tl.orphansGone([]string{"s-y"}, map[string]bool{})
	got = tl.numbers(now, []string{"q"})["q"]
	if want := map[string]int64{"active": 1, "held_p002": 1}; !maps.Equal(got, want) {
		t.Fatalf("record landed, message gone: %v, want %v", got, want)
	}
	if len(tl.orphans) != 1 { // h's: held, kept until gone
		t.Fatalf("orphans remembered: %v", tl.orphans)
	}
}
