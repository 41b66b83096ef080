package admission_test

import (
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// countsWithin is how long the numbers may take to come back to the truth
// (issue 31 item 2: within 10 s after any crash).
const countsWithin = 10 * time.Second

// wantCounts polls b's stats of queue until they equal want (states) and
// levels (available per priority, nil: not checked), failing after within.
// Every answer on the way is checked for numbers below zero.
func wantCounts(t *testing.T, b bundle, queue string, within time.Duration, want map[ojs.State]int64, levels map[string]int64) {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(within)
	for {
		n, err := b.svc.StateCounts(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := b.svc.PriorityStats(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		for st, v := range n {
			if v < 0 {
				t.Fatalf("%s: %d jobs %s, below zero", queue, v, st)
			}
		}
		ok := ps.Total == n[ojs.StateAvailable]
		for st, v := range want {
			ok = ok && n[st] == v
		}
		if levels != nil {
			ok = ok && maps.Equal(ps.CountsByPriority, levels)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s: counts %v, per priority %v (total %d); want %v, per priority %v",
				queue, within, n, ps.CountsByPriority, ps.Total, want, levels)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// incr adds by to counter name of queue, as a process of an earlier
// version (or one that lost its last second of changes) left it.
func incr(t *testing.T, js jetstream.JetStream, queue, name string, by int) {
	t.Helper()
	m := nats.NewMsg(topology.CountSubject(queue, name))
	m.Header.Set("Nats-Incr", strconv.Itoa(by))
	if _, err := js.PublishMsg(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
}

// Issue 31 item 2: a process that dies leaves no number wrong. Process A
// enqueues and is never stopped (as after kill -9: nothing it kept in
// memory reaches JetStream); the counters hold leftovers below and above
// the truth. Process B reports the truth within 10 s: available jobs are
// the ready stream's (per priority too), scheduled and pending the
// records'. A claim's held ready message is not available, a cancelled
// job's message goes, and the jobs enqueued afterwards all show.
func TestCountsAreTheTruthAfterAProcessDies(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc1, js1 := natstest.Connect(t, s)
	_, js2 := natstest.Connect(t, s)
	ctx := testCtx(t)
	assets, err := topology.Ensure(ctx, js1, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := admission.New(nc1, js1, assets, admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop) // never started: nothing is flushed
	pa := bundle{svc: a, js: js1}
	const q = "crashq"
	var avail []string
	for i := range 20 {
		avail = append(avail, enqueue(t, pa, fmt.Sprintf(`{"type":"c.t","args":[%d],"queue":%q,"priority":%d}`, i, q, 1+2*(i%2))).ID)
	}
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range 5 {
		enqueue(t, pa, fmt.Sprintf(`{"type":"c.t","args":[%d],"queue":%q,"scheduled_at":%q}`, i, q, at))
	}
	for i := range 2 {
		enqueue(t, pa, fmt.Sprintf(`{"type":"c.t","args":[%d],"queue":%q,"options":{"pending":true}}`, i, q))
	}
	// Leftovers of counters that lost changes: what the issue saw.
	incr(t, js2, q, "available", -20)
	incr(t, js2, q, "active", -7)
	incr(t, js2, q, "scheduled", 4)
	incr(t, js2, q, "held_p001", 3)

	b := setupCfg(t, js2, admission.Config{})
	wantCounts(t, b, q, countsWithin, map[ojs.State]int64{
		ojs.StateAvailable: 20, ojs.StateScheduled: 5, ojs.StatePending: 2, ojs.StateActive: 0,
	}, map[string]int64{"1": 10, "3": 10})

	// Four claims (the default visibility timeout defers their leases:
	// their ready messages stay held), two cancels, three new jobs.
	jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{q}, Count: 4, WorkerID: "w1"})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("fetch 4: %d jobs, %v", len(jobs), err)
	}
	for _, id := range avail[18:] {
		if _, _, err := b.svc.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		enqueue(t, pa, fmt.Sprintf(`{"type":"c.t","args":[%d],"queue":%q,"priority":3}`, 100+i, q))
	}
	wantCounts(t, b, q, countsWithin, map[ojs.State]int64{
		ojs.StateAvailable: 17, ojs.StateScheduled: 5, ojs.StatePending: 2, ojs.StateActive: 4, ojs.StateCancelled: 2,
	}, map[string]int64{"1": 5, "3": 12})
}

// Issue 31 item 2: the process that keeps the counts dies (its lease is
// left to lapse). The other process takes the role over within the
// lease's TTL, reads every record again, and its numbers are the truth,
// changes made while no one kept them included.
func TestCountKeeperIsReplacedWhenItsProcessDies(t *testing.T) {
	t.Parallel()
	p1, p2 := twoProcesses(t, admission.Config{})
	const q = "keeperq"
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range 3 {
		enqueue(t, p1, fmt.Sprintf(`{"type":"k.t","args":[%d],"queue":%q,"scheduled_at":%q}`, i, q, at))
	}
	// Read at once in both processes, the keeper and the one asking it:
	// the keeper answers once it has read every record written before the
	// question.
	for _, p := range []bundle{p1, p2} {
		n, err := p.svc.StateCounts(testCtx(t), q)
		if err != nil || n[ojs.StateScheduled] != 3 {
			t.Fatalf("counts right after the enqueues: %v, %v; want 3 scheduled", n, err)
		}
	}
	keeper, other := p1, p2
	if !p1.svc.KeepsCounts() {
		keeper, other = p2, p1
	}
	if !keeper.svc.KeepsCounts() {
		t.Fatal("neither process keeps the counts")
	}
	keeper.svc.KillCountKeeper()
	for i := range 4 {
		enqueue(t, other, fmt.Sprintf(`{"type":"k.t","args":[%d],"queue":%q,"options":{"pending":true}}`, i, q))
	}
	j := enqueue(t, other, fmt.Sprintf(`{"type":"k.t","args":[9],"queue":%q}`, q))
	if got := fetch1(t, other, q); got == nil || got.ID != j.ID {
		t.Fatalf("fetch: %v", got)
	}
	wantCounts(t, other, q, topology.LeaseTTL+countsWithin, map[ojs.State]int64{
		ojs.StateScheduled: 3, ojs.StatePending: 4, ojs.StateActive: 1, ojs.StateAvailable: 0,
	}, map[string]int64{})
	if !other.svc.KeepsCounts() {
		t.Fatal("the surviving process does not keep the counts")
	}
}

// RL-003 with issue 31 item 2: jobs waiting on a rate limit are available
// (parked: their ready messages are gone) and counted so, per priority.
func TestParkedJobsCountAsAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "parkq"
	pol := `{"key":"parkcount","concurrency":1}`
	for i := range 4 {
		enqueue(t, b, limitedJob(q, pol, i))
	}
	if fetch1(t, b, q) == nil {
		t.Fatal("first fetch: nothing")
	}
	if j := fetch1(t, b, q); j != nil {
		t.Fatalf("%s started beyond concurrency 1", j.ID)
	}
	st, err := b.svc.RateLimit(testCtx(t), "parkcount")
	if err != nil || st.WaitingCount != 3 {
		t.Fatalf("rate limit status %+v, %v: want 3 waiting", st, err)
	}
	wantCounts(t, b, q, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 3, ojs.StateActive: 1},
		map[string]int64{"2": 3})
}

// Issue 31 item 2: a process dies (in-process: stopped as a crash would,
// writing nothing) right after claims whose leases it deferred, so each
// still holds its ready message; those messages stay in the ready stream
// until the dead process's holder sentinel fires and the other process
// walks them. The claims count active and not available all along: from
// the time the dead process's sentinel looks stale (and the deferral ran
// out) until well after the walk, the numbers stay the truth; a reading
// may cross an ack, so a difference must be gone within 1.5 s. Before,
// the held messages counted available from the end of the deferral until
// the walk.
func TestCountsHoldClaimsOfAKilledProcess(t *testing.T) {
	t.Parallel()
	// Deferral 3 s, sentinel renewed every 1.5 s, stale after 4 s, due
	// 11.5 s after its last renewal.
	cfg := admission.Config{ClaimAckWait: 9 * time.Second}
	a, b := twoProcesses(t, cfg)
	ctx := testCtx(t)
	const q = "heldq"
	for i := range 6 {
		enqueue(t, a, fmt.Sprintf(`{"type":"c.t","args":[%d],"queue":%q,"priority":%d}`, i, q, 1+2*(i%2)))
	}
	jobs, err := a.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{q}, Count: 4, WorkerID: "w1", VisibilityTimeout: 10 * time.Minute})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("fetch 4: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Internal.HeldAck == "" {
			t.Fatalf("claim of %s holds no ready message", j.ID)
		}
	}
	a.svc.Kill()
	killed := time.Now()
	want := map[ojs.State]int64{ojs.StateAvailable: 2, ojs.StateActive: 4}
	wantCounts(t, b, q, countsWithin, want, nil)

	readyLeft := func() int {
		info, err := b.js.Stream(ctx, topology.ReadyStream)
		if err != nil {
			t.Fatal(err)
		}
		in, err := info.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyQueueFilter(q)))
		if err != nil {
			t.Fatal(err)
		}
		return len(in.State.Subjects)
	}
	// The sentinel is stale 4 s after the kill at the latest; a keeper
	// taking over reads every record within 5 s, and looks every second.
	for time.Since(killed) < 7*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	var wrongSince, end time.Time
	for end.IsZero() || time.Now().Before(end) || !wrongSince.IsZero() {
		if end.IsZero() && readyLeft() == 2 {
			end = time.Now().Add(2 * time.Second) // walked: the held messages are acked
		}
		if end.IsZero() && time.Since(killed) > 60*time.Second {
			t.Fatalf("the held messages of the killed process were not walked in 60 s (%d ready messages)", readyLeft())
		}
		n, err := b.svc.StateCounts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for st, v := range want {
			ok = ok && n[st] == v
		}
		switch {
		case ok:
			wrongSince = time.Time{}
		case wrongSince.IsZero():
			wrongSince = time.Now()
		case time.Since(wrongSince) > 1500*time.Millisecond:
			t.Fatalf("%s after the kill, wrong for %s: %v, want %v", time.Since(killed).Round(time.Millisecond),
				time.Since(wrongSince).Round(time.Millisecond), n, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// orphanReady publishes a ready message of a job of queue at priority
// prio that has no record, as a process killed between a transition's
// ready message and its record write leaves it (an enqueue into a bounded
// queue, a batch that is not all seeds): a token that matches no record.
// It returns the message's stream sequence.
func orphanReady(t *testing.T, b bundle, queue string, prio int) uint64 {
	t.Helper()
	seq, _ := orphanJob(t, b, queue, prio)
	return seq
}

// orphanJob is orphanReady, and returns the job whose record never came
// too.
func orphanJob(t *testing.T, b bundle, queue string, prio int) (uint64, *ojs.Job) {
	t.Helper()
	now := ojs.NewTime(time.Now())
	j := &ojs.Job{ID: ojs.NewID(), Type: "o.t", Args: []byte(`[]`), Queue: queue, Priority: prio, State: ojs.StateAvailable,
		SpecVersion: ojs.SpecVersion, CreatedAt: now, EnqueuedAt: now, MaxAttempts: 3,
		Internal: ojs.Internal{Token: jobstore.NewToken()}}
	ack, err := b.js.PublishMsg(testCtx(t), jobstore.ReadyMsg(j))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence, j
}

// Issue 31 item 2: the ready message of a transition whose record write
// never came (its process died in between) is not a job, and counts
// available nowhere within 10 s, though nobody fetches its level: in a
// bounded queue (every job has a record) and in an unbounded one, whose
// jobs are seeds (stored as their ready message alone, no record) and
// still count. Before, such messages counted available until a fetch met
// them, and for good while nobody fetched. They are not deleted (a write
// that was only slow must not lose its job); one removed counts nowhere
// at once, and later jobs count. One whose record write was only slow
// counts again once the record lands.
func TestCountsLeaveOutReadyMessagesWithoutARecord(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	nc, js := natstest.Connect(t, srv)
	b := setupCfg(t, js, admission.Config{})
	ctx := testCtx(t)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store := jobstore.New(nc, js, assets)
	const bq, sq = "orphanbq", "orphansq"
	bound(t, b, bq, ojs.Backpressure{MaxDepth: 100, Strategy: ojs.StrategyReject})
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[%d],"queue":%q,"priority":2}`, i, bq))
		enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[%d],"queue":%q,"priority":2}`, i, sq))
	}
	enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[9],"queue":%q,"priority":4}`, bq))
	var orphans []uint64
	for i := range 5 {
		orphans = append(orphans, orphanReady(t, b, bq, 2+2*(i%2)))
	}
	orphanReady(t, b, sq, 2)
	_, slow := orphanJob(t, b, bq, 4)
	// An enqueue tried again after an answer that never came: a second
	// orphan on one subject.
	_, twice := orphanJob(t, b, bq, 2)
	again := *twice
	again.Internal.Token = jobstore.NewToken()
	if _, err := b.js.PublishMsg(ctx, jobstore.ReadyMsg(&again)); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, b, bq, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 4},
		map[string]int64{"2": 3, "4": 1})
	wantCounts(t, b, sq, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 3}, map[string]int64{"2": 3})

	// Left in the ready stream: 4 jobs and 8 orphans.
	in, err := b.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyQueueFilter(bq)))
	var left uint64
	for _, n := range info.State.Subjects {
		left += n
	}
	if err != nil || left != 12 {
		t.Fatalf("ready messages of %s: %v, %v; want 12 (orphans not deleted)", bq, info.State.Subjects, err)
	}
	// The slow write lands: its job counts, at once.
	if _, err := store.Create(ctx, slow); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, b, bq, 0, map[ojs.State]int64{ojs.StateAvailable: 5}, map[string]int64{"2": 3, "4": 2})
	// One orphan gone (a fetch dropped it after its window): the next
	// answer is exact, not one short.
	if err := in.DeleteMsg(ctx, orphans[0]); err != nil {
		t.Fatal(err)
	}
	n, err := b.svc.StateCounts(ctx, bq)
	if err != nil || n[ojs.StateAvailable] != 5 {
		t.Fatalf("counts of %s with an orphan gone: %v, %v; want 5 available", bq, n, err)
	}
	for i := range 2 {
		enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[%d],"queue":%q,"priority":4}`, 10+i, bq))
	}
	wantCounts(t, b, bq, 0, map[ojs.State]int64{ojs.StateAvailable: 7},
		map[string]int64{"2": 3, "4": 4})

	// Later orphans, in levels the keeper has read already and with no
	// crash suspected (a producer that held no ready message died): found
	// by the excess that stays, within 10 s too.
	orphanReady(t, b, bq, 2)
	orphanReady(t, b, sq, 2)
	enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[20],"queue":%q,"priority":2}`, sq))
	wantCounts(t, b, bq, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 7},
		map[string]int64{"2": 3, "4": 4})
	wantCounts(t, b, sq, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 4}, map[string]int64{"2": 4})
}

// Issue 31 item 2, what finding orphans costs: a backlog of seeds that
// nobody fetches (no worker, a paused queue) is more ready messages than
// the records account for, which the keeper reads to tell seeds from
// orphans; once read, it is not read again while the ready stream holds
// the same messages, and a message appended to it is looked at within
// the 10 s the counts promise.
func TestOrphanScanLeavesAnIdleBacklogAlone(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	b := setupCfg(t, js, admission.Config{})
	const q = "idlebacklog"
	for i := range 5 {
		enqueue(t, b, fmt.Sprintf(`{"type":"o.t","args":[%d],"queue":%q,"priority":2}`, i, q))
	}
	wantCounts(t, b, q, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 5}, map[string]int64{"2": 5})
	// The seeds were read once they were old enough to judge (a read
	// that met messages too young, under 3 s, reads the level again once
	// they are old enough; the last read leaves none).
	deadline := time.Now().Add(2 * countsWithin)
	for _, settled := b.svc.OrphanScans(); settled < 1; _, settled = b.svc.OrphanScans() {
		if time.Now().After(deadline) {
			scans, settled := b.svc.OrphanScans()
			t.Fatalf("the backlog was never read whole (reads %d, whole %d)", scans, settled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	read, _ := b.svc.OrphanScans()
	time.Sleep(8 * time.Second)
	if now, _ := b.svc.OrphanScans(); now != read {
		t.Fatalf("an idle backlog was read %d more times in 8 s", now-read)
	}
	// A message appended (here an orphan of a producer that died) is
	// looked at, and taken away, within 10 s.
	orphanReady(t, b, q, 2)
	wantCounts(t, b, q, countsWithin, map[ojs.State]int64{ojs.StateAvailable: 5}, map[string]int64{"2": 5})
	if now, _ := b.svc.OrphanScans(); now == read {
		t.Fatal("the level was not read again after a message was appended")
	}
}
