package admission_test

import (
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

// Issue 17: a job enqueued as available is stored once, as its ready
// message (the whole job on ojs.ready.<queue>.<priority>.<id>); its record
// is written when it leaves available, so the whole life of a job that
// completes on its first attempt is three stored writes: the ready
// message, the record at active, the record at completed.
func TestAvailableJobIsItsReadyMessageUntilClaimed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	writes := recordWrites(t, b)
	j := enqueue(t, b, `{"type":"s.t","args":[1],"queue":"seeds","priority":2}`)
	kv, err := b.js.KeyValue(ctx, topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, j.ID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("record of an available job: %v, want none", err)
	}
	ready, err := b.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ready.GetLastMsgForSubject(ctx, topology.ReadySubject("seeds", 2, j.ID))
	if err != nil {
		t.Fatalf("ready message: %v", err)
	}
	if seed := jobstore.SeedOf(m.Header, m.Data); seed == nil || seed.ID != j.ID || seed.Type != "s.t" {
		t.Fatalf("ready message does not carry the job: %s", m.Data)
	}
	got, err := b.svc.Get(ctx, j.ID)
	if err != nil || got.State != ojs.StateAvailable || string(got.Args) != "[1]" || got.Priority != 2 {
		t.Fatalf("GET of an available job: %v %+v", err, got)
	}
	if f := fetch1(t, b, "seeds"); f == nil || f.ID != j.ID {
		t.Fatalf("fetch: %v", f)
	}
	if e, err := kv.Get(ctx, j.ID); err != nil || e.Value() == nil || writes() != 1 {
		t.Fatalf("record after the claim: %v (%d record writes, want 1)", err, writes())
	}
	ack(t, b, j.ID)
	got, err = b.svc.Get(ctx, j.ID)
	if err != nil || got.State != ojs.StateCompleted {
		t.Fatalf("after ack: %v %+v", err, got)
	}
	if n := writes(); n != 2 {
		t.Fatalf("%d record writes for a job completed on its first attempt, want 2 (active, completed)", n)
	}
}

// recordWrites returns a func that counts the writes to bucket OJS_JOBS
// since recordWrites was called.
func recordWrites(t *testing.T, b bundle) func() uint64 {
	t.Helper()
	ctx := testCtx(t)
	records, err := b.js.Stream(ctx, "KV_"+topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	before := records.CachedInfo().State.LastSeq
	return func() uint64 {
		t.Helper()
		info, err := records.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq - before
	}
}

// Duplicate ids stay 409 (ojs-http-binding: a job id names one job) on
// every path a job can be stored by: as its ready message alone, with a
// record first (scheduled), in a batch; before and after the first job
// was claimed. Nothing of the refused enqueue is left.
func TestClientIDsStayUniqueAcrossLayouts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	idA, idB, idS := ojs.NewID(), ojs.NewID(), ojs.NewID()
	dup := func(body string) {
		t.Helper()
		_, err := b.svc.Enqueue(ctx, mustParse(t, body))
		var d *ojs.DuplicateError
		if !errors.As(err, &d) {
			t.Fatalf("enqueue %s: %v, want a duplicate", body, err)
		}
	}
	readyOf := func(id string) uint64 {
		t.Helper()
		info, err := b.js.Stream(ctx, topology.ReadyStream)
		if err != nil {
			t.Fatal(err)
		}
		si, err := info.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyIDFilter(id)))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range si.State.Subjects {
			n += c
		}
		return n
	}
	state := func(id string) ojs.State {
		t.Helper()
		j, err := b.svc.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return j.State
	}

	// Available twice; then scheduled and in a batch over an available one.
	enqueue(t, b, `{"id":"`+idA+`","type":"d.t","args":[],"queue":"dups"}`)
	dup(`{"id":"` + idA + `","type":"d.t","args":[],"queue":"dups"}`)
	dup(`{"id":"` + idA + `","type":"d.t","args":[],"queue":"dups","scheduled_at":"` + later + `"}`)
	_, err := b.svc.EnqueueBatch(ctx, []*ojs.Job{
		mustParse(t, `{"id":"`+idB+`","type":"d.t","args":[],"queue":"other"}`),
		mustParse(t, `{"id":"`+idA+`","type":"d.t","args":[],"queue":"other"}`),
	})
	if d := (*ojs.DuplicateError)(nil); !errors.As(err, &d) || d.ExistingID != idA {
		t.Fatalf("batch over an available id: %v", err)
	}
	if _, err := b.svc.Get(ctx, idB); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("the refused batch left dup-b: %v", err)
	}
	if n := readyOf(idA); n != 1 || state(idA) != ojs.StateAvailable {
		t.Fatalf("dup-a: %d ready messages, state %s; want the first job alone", n, state(idA))
	}

	// Claimed: taken while its ready message is held, and after it was
	// acknowledged (the record alone).
	if f := fetch1(t, b, "dups"); f == nil || f.ID != idA {
		t.Fatalf("fetch: %v", f)
	}
	dup(`{"id":"` + idA + `","type":"d.t","args":[],"queue":"dups"}`)
	ack(t, b, idA)
	for deadline := time.Now().Add(10 * time.Second); readyOf(idA) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the completed job's ready message was never acknowledged")
		}
	}
	dup(`{"id":"` + idA + `","type":"d.t","args":[],"queue":"dups"}`)
	if n := readyOf(idA); n != 0 || state(idA) != ojs.StateCompleted {
		t.Fatalf("dup-a after a refused enqueue: %d ready messages, state %s", n, state(idA))
	}

	// Scheduled first (a record), then available: taken.
	enqueue(t, b, `{"id":"`+idS+`","type":"d.t","args":[],"queue":"dups","scheduled_at":"`+later+`"}`)
	dup(`{"id":"` + idS + `","type":"d.t","args":[],"queue":"dups"}`)
	if n := readyOf(idS); n != 0 || state(idS) != ojs.StateScheduled {
		t.Fatalf("dup-s: %d ready messages, state %s", n, state(idS))
	}

	// Server-made ids never collide.
	x := enqueue(t, b, `{"type":"d.t","args":[],"queue":"dups"}`)
	y := enqueue(t, b, `{"type":"d.t","args":[],"queue":"dups"}`)
	if x.ID == y.ID {
		t.Fatalf("two enqueues got id %s", x.ID)
	}
}

// A record deleted by an operator is not absent: a ready message that
// carried the job before the deletion (one left behind, or published
// late) never brings it back, while a new enqueue of the id after the
// deletion is a new job that runs.
func TestDeletedRecordIsNotAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	idD := ojs.NewID()
	j := enqueue(t, b, `{"id":"`+idD+`","type":"d.t","args":[],"queue":"dels"}`)
	seed, err := b.svc.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f := fetch1(t, b, "dels"); f == nil || f.ID != j.ID {
		t.Fatalf("fetch: %v", f)
	}
	ack(t, b, j.ID)
	if err := b.svc.DeleteJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	// The job's first ready message, published again as if late.
	late, err := jobstore.SeedMsg(seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, late); err != nil {
		t.Fatal(err)
	}
	if f := fetch1(t, b, "dels"); f != nil {
		t.Fatalf("a ready message from before the deletion was claimed: %+v", f)
	}
	if _, err := b.svc.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("GET after the deletion: %v, want not found", err)
	}
	// A new job under the id: stored over the marker, and it runs.
	again := enqueue(t, b, `{"id":"`+idD+`","type":"d.t","args":[2],"queue":"dels"}`)
	got := waitFetch(t, b, "dels", 10*time.Second)
	if got.ID != again.ID || string(got.Args) != "[2]" {
		t.Fatalf("the new job of a deleted id: %+v", got)
	}
}

// A crash point of a job without a record: an enqueue that dies after its
// ready message landed (before answering) leaves a job that another
// process finds by id and runs once. (A claimer dying between the
// record's creation and the message's ack: TestLeaseSurvivesClaimingProcess;
// claimers racing on the creation: the property tests.)
func TestRecordlessJobSurvivesItsEnqueuer(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t, admission.Config{})
	ctx := testCtx(t)
	// What a crashed enqueue leaves: the seed alone.
	idO := ojs.NewID()
	j := mustParse(t, `{"id":"`+idO+`","type":"c.t","args":[7],"queue":"crash"}`)
	j.State, j.SpecVersion = ojs.StateAvailable, ojs.SpecVersion
	j.Internal.Token, j.Internal.Origin = jobstore.NewToken(), "o1"
	m, err := jobstore.SeedMsg(j)
	if err != nil {
		t.Fatal(err)
	}
	// As the enqueue did before it published: the level is registered.
	if err := a.svc.Store().EnsureLevel(ctx, j.Queue, j.Priority); err != nil {
		t.Fatal(err)
	}
	if _, err := a.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	a.svc.Kill()
	if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateAvailable {
		t.Fatalf("GET of the crashed enqueue's job: %v %+v", err, got)
	}
	got := waitFetch(t, b, "crash", 10*time.Second)
	if got.ID != j.ID || string(got.Args) != "[7]" {
		t.Fatalf("fetched %+v", got)
	}
	ack(t, b, j.ID)
	if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateCompleted || got.Attempt != 1 {
		t.Fatalf("after ack: %v %+v", err, got)
	}
}

// Issue 17, batches: a batch of available jobs is stored as their ready
// messages alone, all or none, in one atomic batch; each is found by id
// and claimed in order, its record written then.
func TestBatchOfSeedsIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	writes := recordWrites(t, b)
	var batch []*ojs.Job
	for i := range 5 {
		batch = append(batch, mustParse(t, fmt.Sprintf(`{"id":%q,"type":"b.t","args":[%d],"queue":"sbatch"}`, ojs.NewID(), i)))
	}
	jobs, err := b.svc.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 0 {
		t.Fatalf("a batch of available jobs wrote %d records, want none", n)
	}
	for _, j := range jobs {
		if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateAvailable {
			t.Fatalf("GET %s: %v %+v", j.ID, err, got)
		}
	}
	// A batch naming a taken id stores nothing, its other jobs included.
	fresh := ojs.NewID()
	_, err = b.svc.EnqueueBatch(ctx, []*ojs.Job{
		mustParse(t, `{"id":"`+fresh+`","type":"b.t","args":[],"queue":"sbatch"}`),
		mustParse(t, `{"id":"`+jobs[3].ID+`","type":"b.t","args":[],"queue":"sbatch"}`),
	})
	if d := (*ojs.DuplicateError)(nil); !errors.As(err, &d) || d.ExistingID != jobs[3].ID {
		t.Fatalf("batch over a taken id: %v", err)
	}
	if _, err := b.svc.Get(ctx, fresh); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("the refused batch stored %s: %v", fresh, err)
	}
	for i, want := range jobs {
		got := fetch1(t, b, "sbatch")
		if got == nil || got.ID != want.ID {
			t.Fatalf("fetch %d: %v, want %s (oldest first)", i, got, want.ID)
		}
	}
	if got := fetch1(t, b, "sbatch"); got != nil {
		t.Fatalf("a sixth job: %+v", got)
	}
}

// A crash point of a job without a record: a claimer that took the ready
// message and died before creating the record (here: a pull on the level
// consumer that is never answered) leaves the job available, found by id;
// the message comes back after the claim ack wait and the job runs once.
func TestRecordlessJobSurvivesItsClaimer(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{ClaimAckWait: 2 * time.Second})
	ctx := testCtx(t)
	// A first job makes the level's consumer.
	first := enqueue(t, b, `{"type":"c.t","args":[0],"queue":"claimcrash"}`)
	if got := fetch1(t, b, "claimcrash"); got == nil || got.ID != first.ID {
		t.Fatalf("first fetch: %+v", got)
	}
	ack(t, b, first.ID)
	j := enqueue(t, b, `{"type":"c.t","args":[3],"queue":"claimcrash"}`)
	cons, err := js.Consumer(ctx, topology.ReadyStream, topology.ReadyConsumer("claimcrash", j.Priority))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++ // taken and dropped: the claimer died
	}
	if n != 1 {
		t.Fatalf("the dying claimer got %d messages", n)
	}
	if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateAvailable {
		t.Fatalf("GET while the message is out: %v %+v", err, got)
	}
	got := waitFetch(t, b, "claimcrash", 15*time.Second)
	if got.ID != j.ID || got.Attempt != 1 {
		t.Fatalf("after the claimer died: %+v", got)
	}
	ack(t, b, j.ID)
	if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateCompleted {
		t.Fatalf("after ack: %v %+v", err, got)
	}
}

// Found by the chaos suite (issue 20, a bounded queue's batch): an
// enqueue that starts with a record, retried after an attempt that
// published its ready message but never wrote the record (a NATS node
// killed mid-request), must store the job; the first attempt's message is
// not a job and must not make the retry a duplicate (it did: the job was
// answered 409, never stored, and GET said 404 for good).
func TestRetryAfterUnwrittenRecordIsNotADuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	bound(t, b, "retryq", ojs.Backpressure{MaxDepth: 10})
	// A bounded queue's job starts with a record; an unbounded queue's is
	// stored as its ready message alone, and meets the other path's
	// leftover the same way.
	for _, c := range []struct {
		queue string
		batch bool
	}{{"retryq", false}, {"retryq", true}, {"retryfree", false}, {"retryfree", true}} {
		batch := c.batch
		j := mustParse(t, `{"id":"`+ojs.NewID()+`","type":"r.t","args":[],"queue":"`+c.queue+`"}`)
		// What the failed attempt left: its ready message, no record.
		first := j.Clone()
		first.State, first.Internal.Token = ojs.StateAvailable, jobstore.NewToken()
		if err := b.svc.Store().PublishReady(ctx, first); err != nil {
			t.Fatal(err)
		}
		var err error
		if batch {
			_, err = b.svc.EnqueueBatch(ctx, []*ojs.Job{j, mustParse(t, `{"type":"r.t","args":[],"queue":"`+c.queue+`"}`)})
		} else {
			_, err = b.svc.Enqueue(ctx, j)
		}
		if err != nil {
			t.Fatalf("retry (%s, batch %v): %v", c.queue, batch, err)
		}
		if got, err := b.svc.Get(ctx, j.ID); err != nil || got.State != ojs.StateAvailable {
			t.Fatalf("after the retry (%s, batch %v): %v %+v", c.queue, batch, err, got)
		}
	}
}

// Issue 17, batches of server-made ids (jobstore/batchmark.go): the crash
// point between a batch's stored seeds and its commit. Another process
// neither hands out nor shows a job of the uncommitted batch; once the
// batch is older than its window, a fetch abandons it and drops its seeds,
// and the jobs never exist.
func TestUncommittedBatchIsNeverFetched(t *testing.T) {
	t.Parallel()
	a, b := twoProcesses(t, admission.Config{})
	b.svc.Store().SetBatchWindow(2 * time.Second)
	ctx := testCtx(t)
	var batch []*ojs.Job
	for i := range 3 {
		batch = append(batch, mustParse(t, fmt.Sprintf(`{"type":"b.t","args":[%d],"queue":"uncommitted"}`, i)))
	}
	jobs, err := a.svc.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := a.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(jobs[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	id := jobstore.BatchOf(m.Header)
	if id == "" {
		t.Fatal("a batch of server-made ids was stored without a batch marker")
	}
	// The same stored seeds under a pending marker: what a publisher that
	// died before its commit leaves.
	kv, err := a.js.KeyValue(ctx, topology.BatchesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "b."+id, []byte(`{"state":"pending","jobs":3}`)); err != nil {
		t.Fatal(err)
	}
	if got := fetch1(t, b, "uncommitted"); got != nil {
		t.Fatalf("fetched %s of an uncommitted batch", got.ID)
	}
	for _, j := range jobs {
		if got, err := b.svc.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
			t.Fatalf("GET %s of an uncommitted batch: %v %+v", j.ID, err, got)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if got := fetch1(t, b, "uncommitted"); got != nil {
			t.Fatalf("fetched %s of an abandoned batch", got.ID)
		}
		e, err := kv.Get(ctx, "b."+id)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, j := range jobs {
			if _, err := ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(j.ID)); err == nil {
				left++
			}
		}
		if string(e.Value()) == `{"state":"aborted","jobs":3}` && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch marker %s and %d seeds left, want aborted and none", e.Value(), left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, j := range jobs {
		if got, err := b.svc.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
			t.Fatalf("GET %s of an abandoned batch: %v %+v", j.ID, err, got)
		}
	}
}
