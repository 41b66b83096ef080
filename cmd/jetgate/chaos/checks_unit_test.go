package chaos

import (
	"strings"
	"testing"
	"time"
)

// The checks run on synthetic records here, so each is known to catch what
// it names (and to stay quiet on what only might have happened). Issue 20:
// "concurrency, window and throttle limits were never exceeded", "no job is
// completed twice", "every accepted job ends in exactly one terminal state",
// "queue bounds never exceeded".

var t0 = time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// held is an attempt fetched in [sent, recv] and acked at end.
func held(job string, attempt, sent, recv, end int) *hold {
	return &hold{job: job, worker: "w-" + job, attempt: attempt, fetchSent: at(sent), fetchRecv: at(recv),
		endSent: at(end), execTimeout: time.Hour, hbTimeout: time.Hour}
}

func wantViolations(t *testing.T, got []violation, n int, contains string) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d violations, want %d: %v", len(got), n, got)
	}
	for _, v := range got {
		if !strings.Contains(v.String(), contains) {
			t.Errorf("violation %q does not say %q", v, contains)
		}
	}
}

func TestHeldUntilIsTheEarliestEnd(t *testing.T) {
	h := held("a", 1, 0, 10, 5000)
	h.hbTimeout = 2 * time.Second
	if got := h.heldUntil(); !got.Equal(at(2000)) {
		t.Errorf("heartbeat timeout bound: heldUntil = %s, want %s", stamp(got), stamp(at(2000)))
	}
	h.lastExt = at(1500)
	if got := h.heldUntil(); !got.Equal(at(3500)) {
		t.Errorf("after an extension: heldUntil = %s, want %s", stamp(got), stamp(at(3500)))
	}
	h.execTimeout = time.Second
	if got := h.heldUntil(); !got.Equal(at(1000)) {
		t.Errorf("execution timeout bound: heldUntil = %s, want %s", stamp(got), stamp(at(1000)))
	}
	open := &hold{fetchSent: at(0), fetchRecv: at(1), execTimeout: time.Hour, hbTimeout: time.Hour}
	if !open.heldUntil().IsZero() {
		t.Errorf("an attempt still running has no end yet")
	}
	open.killed = at(700)
	if got := open.heldUntil(); !got.Equal(at(700)) {
		t.Errorf("killed worker: heldUntil = %s, want %s", stamp(got), stamp(at(700)))
	}
}

func TestCheckConcurrencyReportsThreeHoldersOfTwoSlots(t *testing.T) {
	holds := []*hold{held("a", 1, 0, 10, 500), held("b", 1, 0, 20, 500), held("c", 1, 100, 120, 300)}
	wantViolations(t, checkConcurrency("k", 2, holds), 1, "concurrency limit 2 exceeded: 3 attempts")
	// c fetched as a ended: touching is not overlapping.
	holds = []*hold{held("a", 1, 0, 10, 100), held("b", 1, 0, 20, 500), held("c", 1, 90, 100, 300)}
	wantViolations(t, checkConcurrency("k", 2, holds), 0, "")
	// a's heartbeat deadline passed before c was fetched: the server may
	// have ended it, so no overlap is certain.
	a := held("a", 1, 0, 10, 5000)
	a.hbTimeout = 2 * time.Second
	holds = []*hold{a, held("b", 1, 0, 20, 5000), held("c", 1, 2500, 2600, 3000)}
	wantViolations(t, checkConcurrency("k", 2, holds), 0, "")
}

func TestCheckWindowCountsOnlyStartsCertainlyInTheWindow(t *testing.T) {
	var holds []*hold
	for i := range 5 {
		holds = append(holds, held(string(rune('a'+i)), 1, 100*i, 100*i+50, 100*i+60))
	}
	wantViolations(t, checkWindow("k", 4, time.Second, holds), 1, "window limit 4 per 1s exceeded: 5 starts")
	// The fifth fetch straddles the boundary: its start may be in the next window.
	holds[4] = held("e", 1, 990, 1010, 1020)
	wantViolations(t, checkWindow("k", 4, time.Second, holds), 0, "")
}

func TestCheckThrottleReportsStartsCertainlyTooClose(t *testing.T) {
	holds := []*hold{held("a", 1, 0, 10, 20), held("b", 1, 100, 110, 120)}
	wantViolations(t, checkThrottle("k", 5, time.Second, holds), 1, "one start every 200ms")
	// b's fetch took long enough that its start may be 200 ms after a's.
	holds = []*hold{held("a", 1, 0, 10, 20), held("b", 1, 100, 300, 320)}
	wantViolations(t, checkThrottle("k", 5, time.Second, holds), 0, "")
	// Two jobs in one quick fetch.
	holds = []*hold{held("a", 1, 0, 30, 40), held("b", 1, 0, 30, 40)}
	wantViolations(t, checkThrottle("k", 5, time.Second, holds), 1, "at most 30ms apart")
}

func TestCheckBoundReportsMoreUnfetchedJobsThanTheBound(t *testing.T) {
	var jobs []*jobRec
	for i := range 3 {
		jobs = append(jobs, &jobRec{id: string(rune('a' + i)), queue: "q", enqueue: enqAccepted, acceptedAt: at(10 * i),
			holds: []*hold{held(string(rune('a'+i)), 1, 1000, 1010, 1020)}})
	}
	wantViolations(t, checkBound("q", 2, jobs, nil), 1, "bound 2 exceeded: 3 jobs")
	// A fetch with no answer at 15 ms may have taken job a: nothing is certain.
	wantViolations(t, checkBound("q", 2, jobs, []time.Time{at(15)}), 0, "")
	// The third job was fetched before the second: never 3 at once.
	jobs[0].holds[0] = held("a", 1, 15, 16, 20)
	wantViolations(t, checkBound("q", 2, jobs, nil), 0, "")
}

func TestCheckJobsReportsEachBrokenPromise(t *testing.T) {
	far := at(1_000_000)
	cases := []struct {
		name string
		job  *jobRec
		want string
	}{
		{"not terminal", &jobRec{id: "j", enqueue: enqAccepted, final: "active"}, "not terminal after the drain"},
		{"refused handed out", &jobRec{id: "j", enqueue: enqRefused, final: "completed",
			holds: []*hold{held("j", 1, 0, 10, 20)}}, "refused with 429"},
		{"attempt twice", &jobRec{id: "j", enqueue: enqAccepted, final: "completed",
			holds: []*hold{held("j", 1, 0, 10, 20), held("j", 1, 5, 15, 20)}}, "attempt 1 handed out 2 times"},
		{"completed twice", &jobRec{id: "j", enqueue: enqAccepted, final: "completed",
			acks: []ack{{attempt: 1, sent: at(10), received: at(20)}, {attempt: 2, sent: at(30), received: at(40)}}},
			"completed twice"},
		{"acked but discarded", &jobRec{id: "j", enqueue: enqAccepted, final: "discarded",
			acks: []ack{{attempt: 1, sent: at(10), received: at(20)}}}, `but the job reads "discarded"`},
		{"handed out after ack", &jobRec{id: "j", enqueue: enqAccepted, final: "completed",
			holds: []*hold{held("j", 1, 0, 5, 10), held("j", 2, 30, 40, 50)},
			acks:  []ack{{attempt: 1, sent: at(10), received: at(20)}}}, "handed out again as attempt 2"},
		{"superseded ack", &jobRec{id: "j", enqueue: enqAccepted, final: "completed",
			holds: []*hold{held("j", 1, 0, 5, 100), held("j", 2, 10, 20, 30)},
			acks:  []ack{{attempt: 1, sent: at(100), received: at(110)}}}, "attempt 2 had already been handed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantViolations(t, checkJobs([]*jobRec{c.job}, far), 1, c.want)
		})
	}
	ok := &jobRec{id: "j", enqueue: enqAccepted, final: "completed",
		holds: []*hold{held("j", 1, 0, 5, 10), held("j", 2, 3000, 3010, 3020)},
		acks:  []ack{{attempt: 2, sent: at(3020), received: at(3030)}}}
	wantViolations(t, checkJobs([]*jobRec{ok}, far), 0, "")
	young := &jobRec{id: "j", enqueue: enqAccepted, final: "active", submitted: at(10)}
	wantViolations(t, checkJobs([]*jobRec{young}, at(5)), 0, "")
}

func TestCheckEventsReportsTwoTerminalEventsOrTheWrongOne(t *testing.T) {
	jobs := []*jobRec{
		{id: "twice", enqueue: enqAccepted, final: "completed", events: map[string]int{"job.completed": 2}},
		{id: "wrong", enqueue: enqAccepted, final: "completed", events: map[string]int{"job.discarded": 1}},
		{id: "fine", enqueue: enqAccepted, final: "discarded", events: map[string]int{"job.discarded": 1}},
		{id: "missing", enqueue: enqAccepted, final: "completed"},
	}
	got, missing := checkEvents(jobs)
	if len(got) != 2 || !strings.Contains(got[0].String(), "more than one terminal event") ||
		!strings.Contains(got[1].String(), `the job reads "completed"`) {
		t.Errorf("violations = %v", got)
	}
	if missing != 1 {
		t.Errorf("missing = %d, want 1", missing)
	}
}

func TestPeaksMeasureHowCloseTheLoadCame(t *testing.T) {
	holds := []*hold{held("a", 1, 0, 10, 500), held("b", 1, 0, 20, 500), held("c", 1, 600, 610, 700)}
	if got := peakConcurrency(holds); got != 2 {
		t.Errorf("peakConcurrency = %d, want 2", got)
	}
	if got := peakWindow(holds, time.Second); got != 3 {
		t.Errorf("peakWindow = %d, want 3", got)
	}
	if got := closestStarts(holds); got != 20*time.Millisecond {
		t.Errorf("closestStarts = %s, want 20ms", got)
	}
}
