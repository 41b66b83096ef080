package kvlimits

import (
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func conc(n int) ojs.Limits { return ojs.Limits{Concurrency: &n} }

func win(limit int, period time.Duration) *ojs.RateWindow {
	return &ojs.RateWindow{Limit: limit, Period: ojs.Duration(period)}
}

// RL-001: the lease set holds exactly the limit; a release frees one slot,
// and only for the activation that holds it.
func TestConcurrencyLeases_RL001(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey}
	for i, id := range []string{"a", "b"} {
		if _, d := s.Acquire(Request{JobID: id, Token: "t" + id, Declared: conc(2)}, t0); d != nil {
			t.Fatalf("start %d refused: %+v", i, d)
		}
	}
	if _, d := s.Acquire(Request{JobID: "c", Token: "tc", Declared: conc(2)}, t0); d == nil || d.Strategy != StrategyConcurrency || d.Current != 2 {
		t.Fatalf("third start: %+v, want a concurrency refusal at 2", d)
	}
	if s.Release("a", "stale-token") {
		t.Fatal("a release with another activation's token freed the slot")
	}
	if !s.Release("a", "ta") || len(s.Active) != 1 {
		t.Fatalf("release: active %v", s.Active)
	}
	if _, d := s.Acquire(Request{JobID: "c", Token: "tc", Declared: conc(2)}, t0); d != nil {
		t.Fatalf("start after release refused: %+v", d)
	}
}

// A job in line waits behind older waiters; a promoted one does not, and
// its promise keeps its slot from newcomers.
func TestWaitersGoFirst(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey}
	s.Acquire(Request{JobID: "a", Token: "ta", Declared: conc(1)}, t0)
	if _, d := s.Acquire(Request{JobID: "w", Token: "tw", Declared: conc(1), InLine: true}, t0); d == nil || s.Waiting != 1 {
		t.Fatalf("refusal in line should count a waiter: %+v waiting %d", d, s.Waiting)
	}
	s.Release("a", "ta")
	if n, _ := s.Promotable(t0, 10); n != 1 {
		t.Fatalf("promotable = %d, want 1", n)
	}
	s.Promise("w", 1, t0)
	if _, d := s.Acquire(Request{JobID: "new", Token: "tn", Declared: conc(1), InLine: true}, t0); d == nil {
		t.Fatal("a newcomer took the slot promised to a waiter")
	}
	if _, d := s.Acquire(Request{JobID: "w", Token: "tw2", Declared: conc(1), InLine: true, Promoted: true}, t0); d != nil {
		t.Fatalf("the promoted waiter was refused: %+v", d)
	}
}

// A released waiter stays released while its promise is kept and once a
// claim redeems it; a promise that expires unredeemed releases its wait
// sequence again, so the promoter promotes the waiter again instead of
// taking it for started (its message may never have landed; issue 20).
func TestExpiredPromiseUnreleasesWaiter(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey, Policy: conc(2)}
	s.Promise("redeemed", 7, t0)
	s.Promise("lost", 8, t0)
	if !s.WasReleased(7) || !s.WasReleased(8) {
		t.Fatalf("released %v, want 7 and 8", s.Released)
	}
	if _, d := s.Acquire(Request{JobID: "redeemed", Token: "t", Declared: conc(2), InLine: true, Promoted: true}, t0); d != nil {
		t.Fatalf("the promoted waiter was refused: %+v", d)
	}
	later := t0.Add(PromiseTTL + time.Second)
	if n, _ := s.Clone().Promotable(later, 10); n != 1 {
		t.Fatalf("promotable after the promise expired = %d, want 1 (one slot active)", n)
	}
	s.expire(later)
	if !s.WasReleased(7) {
		t.Fatal("a redeemed promise's waiter was un-released: a second copy of the job would start")
	}
	if s.WasReleased(8) || len(s.Promised) != 0 || len(s.PromisedSeq) != 0 {
		t.Fatalf("after expiry: released %v promised %v seqs %v, want 8 released no more and nothing promised",
			s.Released, s.Promised, s.PromisedSeq)
	}
}

// RL-R001: fixed windows aligned on the period; Undo gives a start back
// only in its own window.
func TestFixedWindow_RLR001(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey}
	l := ojs.Limits{Rate: win(2, time.Minute)}
	var last *Grant
	for range 2 {
		g, d := s.Acquire(Request{JobID: "x", Declared: l}, t0.Add(10*time.Second))
		if d != nil {
			t.Fatal(d)
		}
		last = g
	}
	_, d := s.Acquire(Request{JobID: "y", Declared: l}, t0.Add(59*time.Second))
	if d == nil || d.Strategy != StrategyRate || !d.RetryAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("third start in the window: %+v, want a rate refusal until the next window", d)
	}
	s.Undo(last)
	if _, d := s.Acquire(Request{JobID: "y", Declared: l}, t0.Add(59*time.Second)); d != nil {
		t.Fatalf("after undo: %+v", d)
	}
	if _, d := s.Acquire(Request{JobID: "z", Declared: l}, t0.Add(time.Minute)); d != nil {
		t.Fatalf("next window: %+v", d)
	}
}

// RL-R002: throttle starts are at least period/limit apart.
func TestThrottle_RLR002(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey}
	l := ojs.Limits{Throttle: win(10, time.Second)}
	if _, d := s.Acquire(Request{JobID: "a", Declared: l}, t0); d != nil {
		t.Fatal(d)
	}
	_, d := s.Acquire(Request{JobID: "b", Declared: l}, t0.Add(99*time.Millisecond))
	if d == nil || d.Strategy != StrategyThrottle || !d.RetryAt.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("start 99ms later: %+v", d)
	}
	if _, d := s.Acquire(Request{JobID: "b", Declared: l}, t0.Add(100*time.Millisecond)); d != nil {
		t.Fatalf("start 100ms later: %+v", d)
	}
}

// The strictest declared policy wins, per member.
func TestStrictest(t *testing.T) {
	a := ojs.Limits{Concurrency: ptr(5), Rate: win(100, time.Minute)}
	b := ojs.Limits{Concurrency: ptr(2), Rate: win(10, time.Second), Throttle: win(1, time.Second)}
	got := Strictest(a, b)
	if *got.Concurrency != 2 || got.Rate.Limit != 100 || got.Throttle.Limit != 1 {
		t.Fatalf("strictest = %+v", got)
	}
}

// An override replaces the members it names until it expires.
func TestOverride_RLR004(t *testing.T) {
	s := &State{Key: "k", Scope: ScopeKey, Policy: conc(5)}
	s.Override = &Override{Limits: conc(0), ExpiresAt: ojs.NewTime(t0.Add(time.Minute))}
	if _, d := s.Acquire(Request{JobID: "a", Declared: conc(5)}, t0); d == nil {
		t.Fatal("started under an override of 0")
	}
	if _, d := s.Acquire(Request{JobID: "a", Declared: conc(5)}, t0.Add(time.Minute)); d != nil || s.Override != nil {
		t.Fatalf("after expiry: %+v, override %+v", d, s.Override)
	}
}

func ptr(n int) *int { return &n }

// Entry names escape keys so they never inject tokens or wildcards.
func TestEntryNames(t *testing.T) {
	for _, k := range []string{"a.b", "tenant:acme:api", "x>y", "a*", "s p"} {
		e := KeyEntry(k)
		back, ok := ParseEntry(e.Name())
		if !ok || back != e {
			t.Errorf("%q: name %q parses back to %+v, %v", k, e.Name(), back, ok)
		}
		for _, bad := range []string{"*", ">", " ", ":"} {
			if containsAny(e.Name(), bad) {
				t.Errorf("%q: name %q holds %q", k, e.Name(), bad)
			}
		}
	}
}

func containsAny(s, chars string) bool {
	for _, c := range chars {
		for _, x := range s {
			if x == c {
				return true
			}
		}
	}
	return false
}

// A start promised to a released waiter is kept from newcomers under a
// throttle and a window too (RL-R001, RL-R002), not only a concurrency
// limit: a newcomer that is not in line (on_limit reschedule or drop) is
// refused, by the throttle until an interval after the promised start.
func TestPromiseReservesWindowAndThrottle_RLR001_RLR002(t *testing.T) {
	thr := ojs.Limits{Throttle: win(10, time.Second)}
	s := &State{Key: "k", Scope: ScopeKey}
	s.Acquire(Request{JobID: "a", Declared: thr}, t0)
	s.Acquire(Request{JobID: "w", Declared: thr, InLine: true}, t0)
	at := t0.Add(100 * time.Millisecond)
	if n, _ := s.Promotable(at, 10); n != 1 {
		t.Fatalf("promotable = %d, want 1", n)
	}
	s.Promise("w", 1, at)
	_, d := s.Acquire(Request{JobID: "new", Declared: thr}, at)
	if d == nil || d.Strategy != StrategyThrottle || !d.RetryAt.Equal(t0.Add(200*time.Millisecond)) {
		t.Fatalf("newcomer at the promised start: %+v, want a throttle refusal until 200ms", d)
	}
	if _, d := s.Acquire(Request{JobID: "w", Declared: thr, InLine: true, Promoted: true}, at); d != nil {
		t.Fatalf("the promoted waiter was refused: %+v", d)
	}

	l := ojs.Limits{Rate: win(2, time.Minute)}
	s = &State{Key: "k", Scope: ScopeKey}
	s.Acquire(Request{JobID: "a", Declared: l}, t0)
	s.Promise("w", 1, t0)
	if _, d := s.Acquire(Request{JobID: "new", Declared: l}, t0); d == nil || d.Strategy != StrategyRate {
		t.Fatalf("newcomer took the window's last start, promised to a waiter: %+v", d)
	}
	if _, d := s.Acquire(Request{JobID: "w", Declared: l, InLine: true, Promoted: true}, t0); d != nil {
		t.Fatalf("the promoted waiter was refused: %+v", d)
	}
}

// A promoted waiter refused by the throttle within its patience keeps its
// promise (it waits for the start itself); refused without patience, it
// loses the promise and counts as a waiter again, so the Waiting hint
// never falls behind the waiters stored.
func TestPatientWaiterKeepsPromise_RLR002(t *testing.T) {
	thr := ojs.Limits{Throttle: win(10, time.Second)}
	s := &State{Key: "k", Scope: ScopeKey}
	s.Acquire(Request{JobID: "a", Declared: thr}, t0)
	early := t0.Add(60 * time.Millisecond) // 40ms before the next start
	s.Promise("w", 1, early)
	req := Request{JobID: "w", Declared: thr, InLine: true, Promoted: true, Patient: 50 * time.Millisecond}
	if _, d := s.Acquire(req, early); d == nil || d.Strategy != StrategyThrottle {
		t.Fatalf("start 40ms early: %+v, want a throttle refusal", d)
	}
	if _, ok := s.Promised["w"]; !ok || s.Waiting != 0 {
		t.Fatalf("patient refusal: promised %v, waiting %d; want the promise kept and no waiter", s.Promised, s.Waiting)
	}
	req.Patient = 0
	if _, d := s.Acquire(req, early); d == nil {
		t.Fatal("start 40ms early admitted")
	}
	if _, ok := s.Promised["w"]; ok || s.Waiting != 1 {
		t.Fatalf("impatient refusal: promised %v, waiting %d; want no promise and one waiter", s.Promised, s.Waiting)
	}
}
