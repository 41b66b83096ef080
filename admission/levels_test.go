package admission_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 4 ("priority levels in use cost resources only while they hold
// jobs"): a level's durable consumer is removed by JetStream once it has
// been idle for ConsumerIdle, and a later fetch from that level works.
func TestIdleLevelConsumerGoesAway(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{ConsumerIdle: 500 * time.Millisecond})
	ctx := testCtx(t)
	j := enqueue(t, b, `{"type":"i.t","args":[],"queue":"idleq","priority":7}`)
	if got := fetch1(t, b, "idleq"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch %v", got)
	}
	if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
		t.Fatal(err)
	}
	name := topology.ReadyConsumer("idleq", 7)
	if _, err := js.Consumer(ctx, topology.ReadyStream, name); err != nil {
		t.Fatalf("the level's consumer should exist after a fetch: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := js.Consumer(ctx, topology.ReadyStream, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s of an idle level still exists: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	j2 := enqueue(t, b, `{"type":"i.t","args":[],"queue":"idleq","priority":7}`)
	if got := fetch1(t, b, "idleq"); got == nil || got.ID != j2.ID {
		t.Fatalf("fetch after the consumer went away: %v, want %s", got, j2.ID)
	}
}

// PRI-004: a fetch returns the highest-priority ready job. One old
// priority-3 job waits behind a backlog of priority-1 jobs that one
// enqueue and one fetch per round keep at three; no fetch may return the
// priority-3 job. Before levels.go, a level consumer's no-wait pull came
// back empty now and then while the level held messages (nats-server's
// cached pending count lagging), and the fetch fell through to level 3:
// this test failed within a few hundred rounds.
func TestFetchNeverSkipsAReadyLevel_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	low := enqueue(t, b, `{"type":"l.t","args":["low"],"queue":"skipq","priority":3}`)
	for i := range 3 {
		enqueue(t, b, fmt.Sprintf(`{"type":"l.t","args":[%d],"queue":"skipq","priority":1}`, -i))
	}
	for i := range 1500 {
		enqueue(t, b, fmt.Sprintf(`{"type":"l.t","args":[%d],"queue":"skipq","priority":1}`, i))
		j := fetch1(t, b, "skipq")
		if j == nil || j.ID == low.ID {
			t.Fatalf("round %d: fetch returned %v while priority-1 jobs were ready", i, j)
		}
	}
}

// PRI-003 with pulls in waves (levelpull.go): fetches of several jobs over
// 40 levels holding one to four jobs each, half the fetched jobs left
// active (their ready messages held, so the levels ahead hold messages
// already handed out), return every job exactly once, by priority, then
// oldest first.
func TestFetchManyOverLevelsKeepsOrder_PRI003(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	type key struct{ prio, n int }
	var batch []*ojs.Job
	for n := range 4 {
		for p := 39; p >= 0; p-- {
			if n <= p%4 {
				batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"w.t","args":[%d],"queue":"waves","priority":%d}`, n, p)))
			}
		}
	}
	if _, err := b.svc.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var got []key
	for i := 0; len(got) < len(batch); i++ {
		jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"waves"}, Count: 5, WorkerID: "w"})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("fetch %d after %d jobs: %d jobs, %v", i, len(got), len(jobs), err)
		}
		for k, j := range jobs {
			var n []int
			if err := json.Unmarshal(j.Args, &n); err != nil || len(n) != 1 {
				t.Fatalf("args %s: %v", j.Args, err)
			}
			got = append(got, key{j.Priority, n[0]})
			if (i+k)%2 == 0 {
				if _, err := b.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := 1; i < len(got); i++ {
		if a, c := got[i-1], got[i]; a.prio > c.prio || (a.prio == c.prio && a.n >= c.n) {
			t.Fatalf("job %d is %+v after %+v; order: %v", i, c, a, got)
		}
	}
	if jobs, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"waves"}, Count: 5, WorkerID: "w"}); err != nil || len(jobs) != 0 {
		t.Fatalf("after every job: %d more, %v", len(jobs), err)
	}
}

// A level's messages handed to one process and acked by another (a job
// fetched through one jetgate process and acked through another) make the
// first process expect too little of that level: a pull asks it for more
// than it expects, takes the level's jobs in full before the next level's,
// and puts back what the next level gave beyond the fetch's count, which
// comes next and in order.
func TestFetchAcrossProcessesPutsBackInOrder_PRI003(t *testing.T) {
	t.Parallel()
	p1, p2 := twoProcesses(t, admission.Config{})
	ctx := testCtx(t)
	var ids []string
	for _, job := range []struct {
		prio int
		name string
	}{{0, "a1"}, {0, "a2"}, {0, "a3"}, {1, "b1"}, {1, "b2"}, {2, "c1"}, {2, "c2"}} {
		ids = append(ids, enqueue(t, p1, fmt.Sprintf(`{"type":"x.t","args":[%q],"queue":"xproc","priority":%d}`, job.name, job.prio)).ID)
	}
	if got := fetch1(t, p1, "xproc"); got == nil || got.ID != ids[0] {
		t.Fatalf("first fetch: %v, want a1", got)
	}
	if _, err := p2.svc.Ack(ctx, ojs.AckRequest{JobID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	level0 := topology.ReadyLevelFilter("xproc", 0)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := p1.js.Stream(ctx, topology.ReadyStream)
		if err != nil {
			t.Fatal(err)
		}
		si, err := info.Info(ctx, jetstream.WithSubjectFilter(level0))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range si.State.Subjects {
			n += c
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a1's ready message is still there: %v", si.State.Subjects)
		}
	}
	var order []string
	for _, count := range []int{3, 10} {
		jobs, err := p1.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"xproc"}, Count: count, WorkerID: "w"})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			var name []string
			if err := json.Unmarshal(j.Args, &name); err != nil || len(name) != 1 {
				t.Fatalf("args %s: %v", j.Args, err)
			}
			order = append(order, name[0])
		}
	}
	if fmt.Sprint(order) != "[a2 a3 b1 b2 c1 c2]" {
		t.Fatalf("fetched %v, want [a2 a3 b1 b2 c1 c2]", order)
	}
}

// PRI-003: a queue with many levels is pulled from a snapshot of its
// levels (levelpull.go) plus what arrived since; a job enqueued at a
// higher priority after the snapshot, at a level it does not list, is
// still the next one fetched.
func TestFetchSeesJobsArrivedSinceLevelSnapshot_PRI003(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.KeepLevelSnapshots(time.Hour)
	ctx := testCtx(t)
	var batch []*ojs.Job
	for p := 49; p >= 10; p-- {
		batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"s.t","args":[],"queue":"snap","priority":%d}`, p)))
	}
	if _, err := b.svc.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	next := func(want int) {
		t.Helper()
		j := fetch1(t, b, "snap")
		if j == nil || j.Priority != want {
			t.Fatalf("fetched %+v, want priority %d", j, want)
		}
		ack(t, b, j.ID)
	}
	next(10) // the direct get finds many levels
	next(11) // the stream info makes the snapshot
	if !b.svc.HasLevelSnapshot("snap") {
		t.Fatal("40 levels and no level snapshot: the path under test is not taken")
	}
	enqueue(t, b, `{"type":"s.t","args":[],"queue":"snap","priority":0}`)
	next(0)
	next(12)
	enqueue(t, b, `{"type":"s.t","args":[],"queue":"snap","priority":5}`)
	next(5)
	for p := 13; p < 50; p++ {
		next(p)
	}
	if j := fetch1(t, b, "snap"); j != nil {
		t.Fatalf("after every job: %+v", j)
	}
}

// PRI-003 across processes with the level registry (levels.go): a level
// first used through process A is registered in the queue's record, and
// process B, which never published there, learns it from its watch of
// the record and pulls it in priority order ahead of B's own levels.
func TestLevelFirstUsedByOtherProcessFetchedInOrder_PRI003(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, jsA := natstest.Connect(t, s)
	_, jsB := natstest.Connect(t, s)
	a := setupCfg(t, jsA, admission.Config{})
	b := setupCfg(t, jsB, admission.Config{})
	ctx := testCtx(t)
	low := enqueue(t, b, `{"type":"r.t","args":["low"],"queue":"regq","priority":7}`)
	mid := enqueue(t, b, `{"type":"r.t","args":["mid"],"queue":"regq","priority":4}`)
	high := enqueue(t, a, `{"type":"r.t","args":["high"],"queue":"regq","priority":1}`)
	// The only window: B sees level 1 once its watch delivers the record.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		levels, err := b.svc.FetchLevels(ctx, "regq")
		if err != nil {
			t.Fatal(err)
		}
		if len(levels) > 0 && levels[0] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process B never learned level 1: levels %v", levels)
		}
	}
	for _, want := range []*ojs.Job{high, mid, low} {
		if got := fetch1(t, b, "regq"); got == nil || got.ID != want.ID {
			t.Fatalf("process B fetched %v, want %s (priority %d)", got, want.ID, want.Priority)
		}
	}
	if got := fetch1(t, b, "regq"); got != nil {
		t.Fatalf("after every job: %s", got.ID)
	}
}

// Upgrade (jetstream/jobstore/doc.go): a ready message of the layout
// before per-job subjects, on ojs.ready.<queue>.<priority>, was published
// without registering its level. A Service that starts registers the
// levels holding such messages, so the job is fetched (PRI-003: it is
// not left behind).
func TestLegacyReadyMessageFetchedAfterStart(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, jsA := natstest.Connect(t, s)
	_, jsB := natstest.Connect(t, s)
	a := setupCfg(t, jsA, admission.Config{})
	ctx := testCtx(t)
	j := enqueue(t, a, `{"type":"l.t","args":[],"queue":"legacyq","priority":2}`)
	// The old layout wrote the record at enqueue.
	if _, err := a.svc.Store().Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	ready, err := jsA.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	// The job's ready message moves to the old layout's level subject.
	m, err := ready.GetLastMsgForSubject(ctx, topology.ReadySubject("legacyq", 2, j.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := ready.DeleteMsg(ctx, m.Sequence); err != nil {
		t.Fatal(err)
	}
	legacy := jobstore.ReadyMsg(j)
	legacy.Subject = topology.ReadyLegacySubject("legacyq", 2)
	legacy.Header.Del(jetstream.MsgIDHeader) // or the stream drops it as a duplicate
	if _, err := jsA.PublishMsg(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	// And the queue's record as the old layout left it: no levels.
	kv, err := jsA.KeyValue(ctx, topology.QueuesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, topology.Token("legacyq"), []byte(`{"name":"legacyq","status":"active"}`)); err != nil {
		t.Fatal(err)
	}
	b := setupCfg(t, jsB, admission.Config{})
	if got := fetch1(t, b, "legacyq"); got == nil || got.ID != j.ID {
		t.Fatalf("fetch after start: %v, want the legacy message's job %s", got, j.ID)
	}
}
