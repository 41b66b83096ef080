package unique_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/unique"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

type node struct {
	svc *admission.Service
	kv  jetstream.KeyValue
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startNodes starts n admission services, each with its own connection
// and unique hook, on one embedded server: n jetgate processes.
func startNodes(t *testing.T, n int, cfg unique.Config) []node {
	t.Helper()
	s := natstest.RunServer(t)
	ctx := testCtx(t)
	out := make([]node, n)
	for i := range out {
		_, js := natstest.Connect(t, s)
		assets, err := topology.Ensure(ctx, js, topology.Config{})
		if err != nil {
			t.Fatalf("ensure: %v", err)
		}
		c := cfg
		c.JS, c.KV = js, assets.Unique
		svc, err := admission.New(js.Conn(), js, assets, admission.Config{Hooks: []admission.Lifecycle{unique.New(c)}})
		if err != nil {
			t.Fatalf("new: %v", err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		t.Cleanup(svc.Stop)
		out[i] = node{svc: svc, kv: assets.Unique}
	}
	return out
}

func parse(t *testing.T, body string) *ojs.Job {
	t.Helper()
	j, err := ojs.ParseJob([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return j
}

func enqueue(t *testing.T, n node, body string) (*ojs.Job, error) {
	t.Helper()
	return n.svc.Enqueue(testCtx(t), parse(t, body))
}

func mustEnqueue(t *testing.T, n node, body string) *ojs.Job {
	t.Helper()
	j, err := enqueue(t, n, body)
	if err != nil {
		t.Fatalf("enqueue %s: %v", body, err)
	}
	return j
}

func wantDuplicateOf(t *testing.T, err error, id string) {
	t.Helper()
	var de *ojs.DuplicateError
	if !errors.As(err, &de) || de.ExistingID != id {
		t.Fatalf("err %v, want a duplicate naming %s", err, id)
	}
}

func state(t *testing.T, n node, id string) ojs.State {
	t.Helper()
	j, err := n.svc.Get(testCtx(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j.State
}

func keyCount(t *testing.T, n node) int {
	t.Helper()
	keys, err := n.kv.ListKeys(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	c := 0
	for range keys.Keys() {
		c++
	}
	return c
}

// ojs-unique-jobs.md 5.1, L4-UNIQ-001 (conformance L4-002): a duplicate
// with on_conflict reject (the default) is refused naming the existing
// job; another key is accepted.
func TestRejectDuplicate_L4_UNIQ_001(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	body := `{"type":"email.send","args":[{"to":"a@x"}],"options":{"unique":{"key":"welcome-a"}}}`
	first := mustEnqueue(t, n, body)
	_, err := enqueue(t, n, body)
	wantDuplicateOf(t, err, first.ID)
	var de *ojs.DuplicateError
	errors.As(err, &de)
	if de.UniqueKey != "welcome-a" {
		t.Errorf("unique key %q, want the producer's key", de.UniqueKey)
	}
	mustEnqueue(t, n, `{"type":"email.send","args":[{"to":"b@x"}],"options":{"unique":{"key":"welcome-b"}}}`)
}

// Without key or keys the key is type, queue and args (issue 18): the
// same args on another queue, or other args, are not duplicates.
func TestKeyFromTypeQueueArgs(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	first := mustEnqueue(t, n, `{"type":"r","args":[{"a":1,"b":2}],"options":{"queue":"q1","unique":{}}}`)
	_, err := enqueue(t, n, `{"type":"r","args":[{"b":2,"a":1}],"options":{"queue":"q1","unique":{}}}`)
	wantDuplicateOf(t, err, first.ID)
	mustEnqueue(t, n, `{"type":"r","args":[{"a":1,"b":2}],"options":{"queue":"q2","unique":{}}}`)
	mustEnqueue(t, n, `{"type":"r","args":[{"a":1,"b":3}],"options":{"queue":"q1","unique":{}}}`)
	mustEnqueue(t, n, `{"type":"r2","args":[{"a":1,"b":2}],"options":{"queue":"q1","unique":{}}}`)
}

// ojs-unique-jobs.md 5.4: ignore answers with the existing job and
// creates nothing.
func TestIgnoreAnswersExisting_UNIQ5_4(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	body := `{"type":"inv","args":[1],"options":{"unique":{"key":"o1","on_conflict":"ignore"}}}`
	first := mustEnqueue(t, n, body)
	_, err := enqueue(t, n, body)
	var dd *ojs.DeduplicatedError
	if !errors.As(err, &dd) || dd.Job.ID != first.ID || dd.Job.State != ojs.StateAvailable {
		t.Fatalf("err %v, want the existing job %s", err, first.ID)
	}
}

// ojs-unique-jobs.md 5.2: replace cancels the existing job and creates
// the new one; an active holder is not replaced (duplicate).
func TestReplaceCancelsExisting_UNIQ5_2(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	body := `{"type":"avatar","args":[%d],"options":{"queue":"rq","unique":{"key":"u42","on_conflict":"replace"}}}`
	first := mustEnqueue(t, n, fmt.Sprintf(body, 1))
	second := mustEnqueue(t, n, fmt.Sprintf(body, 2))
	if second.ID == first.ID {
		t.Fatal("replace returned the old job")
	}
	if st := state(t, n, first.ID); st != ojs.StateCancelled {
		t.Fatalf("replaced job is %s, want cancelled", st)
	}
	got, err := n.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{"rq"}, WorkerID: "w"})
	if err != nil || len(got) != 1 || got[0].ID != second.ID {
		t.Fatalf("fetch %v %v, want the replacement", got, err)
	}
	_, err = enqueue(t, n, fmt.Sprintf(body, 3))
	wantDuplicateOf(t, err, second.ID)
	if st := state(t, n, second.ID); st != ojs.StateActive {
		t.Fatalf("active holder is %s after a refused replace", st)
	}
}

// ojs-unique-jobs.md 5.3: replace_except_schedule keeps the replaced
// job's scheduled_at.
func TestReplaceExceptSchedule_UNIQ5_3(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	first := mustEnqueue(t, n, fmt.Sprintf(`{"type":"digest","args":[1],"options":{"scheduled_at":%q,"unique":{"key":"d","on_conflict":"replace_except_schedule"}}}`, at.Format(time.RFC3339)))
	second := mustEnqueue(t, n, fmt.Sprintf(`{"type":"digest","args":[2],"options":{"scheduled_at":%q,"unique":{"key":"d","on_conflict":"replace_except_schedule"}}}`, at.Add(time.Hour).Format(time.RFC3339)))
	if state(t, n, first.ID) != ojs.StateCancelled {
		t.Fatal("replaced job not cancelled")
	}
	j, err := n.svc.Get(testCtx(t), second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != ojs.StateScheduled || j.ScheduledAt == nil || !j.ScheduledAt.Equal(at) || string(j.Args) != "[2]" {
		t.Fatalf("replacement %s at %v args %s, want scheduled at %s with the new args", j.State, j.ScheduledAt, j.Args, at)
	}
}

// ojs-unique-jobs.md 7: the uniqueness ends period after the holder's
// created_at, whatever the holder's state.
func TestPeriodExpiry_UNIQ7(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	body := `{"type":"push","args":[1],"options":{"unique":{"key":"p","period_ms":1500}}}`
	first := mustEnqueue(t, n, body)
	_, err := enqueue(t, n, body)
	wantDuplicateOf(t, err, first.ID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := enqueue(t, n, body)
		if err == nil {
			if time.Since(first.CreatedAt.Time) < 1500*time.Millisecond {
				t.Fatalf("accepted %s after the period began", time.Since(first.CreatedAt.Time))
			}
			if j.ID == first.ID {
				t.Fatal("same job")
			}
			break
		}
		wantDuplicateOf(t, err, first.ID)
		if time.Now().After(deadline) {
			t.Fatal("duplicate still refused long after its period")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := state(t, n, first.ID); st != ojs.StateAvailable {
		t.Fatalf("holder is %s: the period, not a state change, freed the key", st)
	}
}

// A key with a period carries it as per-message TTL: JetStream removes
// the entry without any enqueue or sweep (ojs-unique-jobs.md 7.1).
func TestPeriodEntryExpires_UNIQ7_1(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	mustEnqueue(t, n, `{"type":"ttl","args":[],"options":{"unique":{"key":"t","period_ms":1000}}}`)
	if c := keyCount(t, n); c != 1 {
		t.Fatalf("%d key entries, want 1", c)
	}
	deadline := time.Now().Add(20 * time.Second)
	for keyCount(t, n) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("key entry still there long after its period")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ojs-unique-jobs.md 6.1, 7.1, 9.3: the uniqueness ends when the holder
// leaves the counted states (cancelled, completed, discarded), and its
// key entry is released.
func TestLeavingCountedStatesFreesKey_UNIQ6(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	body := `{"type":"s","args":[1],"options":{"queue":"lq","unique":{"key":"k","on_conflict":"reject"},"retry":{"max_attempts":1}}}`
	a := mustEnqueue(t, n, body)
	if _, _, err := n.svc.Cancel(testCtx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	if c := keyCount(t, n); c != 0 {
		t.Fatalf("%d key entries after the holder was cancelled, want 0", c)
	}
	b := mustEnqueue(t, n, body)
	ctx := testCtx(t)
	if _, err := n.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"lq"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	_, err := enqueue(t, n, body)
	wantDuplicateOf(t, err, b.ID) // active counts
	if _, err := n.svc.Ack(ctx, ojs.AckRequest{JobID: b.ID, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	c := mustEnqueue(t, n, body)
	if _, err := n.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"lq"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.Nack(ctx, ojs.NackRequest{JobID: c.ID, WorkerID: "w", Error: ojs.JobError{Code: "x", Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if st := state(t, n, c.ID); st != ojs.StateDiscarded {
		t.Fatalf("job with one attempt is %s after a nack", st)
	}
	mustEnqueue(t, n, body) // 9.3: discarded releases
}

// ojs-unique-jobs.md 6.3: completed in states keeps the key after the
// job completes; 6.4: a narrow states list frees it as soon as the holder
// leaves them, even on a claim (which does not call the hook).
func TestConfiguredStates_UNIQ6_3(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	ctx := testCtx(t)
	keep := `{"type":"w","args":[1],"options":{"queue":"sq","unique":{"key":"w","states":["available","active","completed"]}}}`
	a := mustEnqueue(t, n, keep)
	if _, err := n.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"sq"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.svc.Ack(ctx, ojs.AckRequest{JobID: a.ID, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	_, err := enqueue(t, n, keep)
	wantDuplicateOf(t, err, a.ID)

	narrow := `{"type":"w","args":[1],"options":{"queue":"nq","unique":{"key":"n","states":["available"]}}}`
	b := mustEnqueue(t, n, narrow)
	_, err = enqueue(t, n, narrow)
	wantDuplicateOf(t, err, b.ID)
	if _, err := n.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"nq"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, n, narrow) // b is active, which this policy does not count
}

// A key claimed by a process that died before creating its job names a
// job that does not exist: after the grace it is taken over; within it
// the enqueue waits, then answers a retryable conflict.
func TestStaleKeyTakenOver(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{Grace: 3 * time.Second, Wait: 300 * time.Millisecond})[0]
	ctx := testCtx(t)
	body := `{"type":"c","args":[1],"options":{"unique":{"key":"crash"}}}`
	p := mustParseBody(t, body)
	orphan, _ := json.Marshal(map[string]any{"job_id": ojs.NewID(), "claimed_at": time.Now().UTC()})
	if _, err := n.kv.Create(ctx, topology.Token(p.Key), orphan); err != nil {
		t.Fatal(err)
	}
	_, err := enqueue(t, n, body)
	if !errors.Is(err, ojs.ErrConflict) {
		t.Fatalf("err %v, want a retryable conflict while the orphan key is young", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := enqueue(t, n, body)
		if err == nil {
			break
		}
		if !errors.Is(err, ojs.ErrConflict) || time.Now().After(deadline) {
			t.Fatalf("orphan key not taken over: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A key whose job finished without releasing it (a crash between the
	// two) is free at once.
	body2 := `{"type":"c","args":[1],"options":{"unique":{"key":"done"}}}`
	j := mustEnqueue(t, n, body2)
	if _, _, err := n.svc.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(map[string]any{"job_id": j.ID, "claimed_at": time.Now().UTC()})
	if _, err := n.kv.Put(ctx, topology.Token(mustParseBody(t, body2).Key), stale); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, n, body2)
}

func mustParseBody(t *testing.T, body string) *unique.Policy {
	t.Helper()
	p, err := unique.Parse(parse(t, body), "unique.")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// race enqueues one unique job from 16 producers spread over nodes and
// returns the created jobs and the errors.
func race(t *testing.T, nodes []node, body string) (created []*ojs.Job, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			j := parse(t, body)
			<-start
			got, err := nodes[i%len(nodes)].svc.Enqueue(testCtx(t), j)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			created = append(created, got)
		})
	}
	close(start)
	wg.Wait()
	return created, errs
}

// ojs-unique-jobs.md 8.1 (strong): 16 producers racing on one key create
// exactly one job; every other one is told the winner's id.
func TestRace16Producers_UNIQ8_1(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 1, unique.Config{})
	checkRace(t, nodes)
}

// The same across 3 jetgate processes (3 services, 3 connections, one
// server).
func TestRace3Processes_UNIQ8_1(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3, unique.Config{})
	checkRace(t, nodes)
}

func checkRace(t *testing.T, nodes []node) {
	t.Helper()
	for round := range 3 {
		body := fmt.Sprintf(`{"type":"race","args":[%d],"options":{"unique":{"key":"r%d"}}}`, round, round)
		created, errs := race(t, nodes, body)
		if len(created) != 1 || len(errs) != 15 {
			t.Fatalf("round %d: %d created, %d refused (%v), want 1 and 15", round, len(created), len(errs), errs)
		}
		for _, err := range errs {
			wantDuplicateOf(t, err, created[0].ID)
		}
	}
	// ignore: all 16 get the one job.
	created, errs := race(t, nodes, `{"type":"race","args":[],"options":{"unique":{"key":"ri","on_conflict":"ignore"}}}`)
	if len(created) != 1 {
		t.Fatalf("ignore race created %d jobs", len(created))
	}
	for _, err := range errs {
		var dd *ojs.DeduplicatedError
		if !errors.As(err, &dd) || dd.Job.ID != created[0].ID {
			t.Fatalf("ignore race: %v, want the winner %s", err, created[0].ID)
		}
	}
}

// ojs-priority.md 9.3: with upgrade_priority a duplicate of higher
// priority (lower number) raises the existing job's; without it nothing
// changes.
func TestPriorityUpgradeOptIn_PRI9_3(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	a := mustEnqueue(t, n, `{"type":"p","args":[],"options":{"priority":5,"unique":{"key":"plain"}}}`)
	_, err := enqueue(t, n, `{"type":"p","args":[],"options":{"priority":1,"unique":{"key":"plain"}}}`)
	wantDuplicateOf(t, err, a.ID)
	if j, _ := n.svc.Get(testCtx(t), a.ID); j.Priority != 5 {
		t.Fatalf("priority %d changed without opt-in", j.Priority)
	}
	b := mustEnqueue(t, n, `{"type":"p","args":[],"options":{"priority":5,"unique":{"key":"up","upgrade_priority":true,"on_conflict":"ignore"}}}`)
	_, err = enqueue(t, n, `{"type":"p","args":[],"options":{"priority":7,"unique":{"key":"up","upgrade_priority":true,"on_conflict":"ignore"}}}`)
	if j, _ := n.svc.Get(testCtx(t), b.ID); j.Priority != 5 {
		t.Fatalf("a lower-priority duplicate changed the priority to %d", j.Priority)
	}
	_, err = enqueue(t, n, `{"type":"p","args":[],"options":{"priority":1,"unique":{"key":"up","upgrade_priority":true,"on_conflict":"ignore"}}}`)
	var dd *ojs.DeduplicatedError
	if !errors.As(err, &dd) || dd.Job.Priority != 1 {
		t.Fatalf("err %v, want the existing job at priority 1", err)
	}
	if j, _ := n.svc.Get(testCtx(t), b.ID); j.Priority != 1 {
		t.Fatalf("stored priority %d, want 1", j.Priority)
	}
}

func batch(t *testing.T, bodies ...string) []*ojs.Job {
	t.Helper()
	out := make([]*ojs.Job, len(bodies))
	for i, b := range bodies {
		out[i] = parse(t, b)
	}
	return out
}

// Batch enqueue (all or nothing) with duplicates inside the batch and
// against existing jobs.
func TestBatchDuplicates(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	ctx := testCtx(t)
	held := mustEnqueue(t, n, `{"type":"b","args":[],"options":{"unique":{"key":"held"}}}`)

	// reject across: the whole batch is refused, nothing created, no key left.
	before := keyCount(t, n)
	_, err := n.svc.EnqueueBatch(ctx, batch(t,
		`{"type":"b","args":[],"options":{"unique":{"key":"fresh1"}}}`,
		`{"type":"b","args":[],"options":{"unique":{"key":"held"}}}`))
	wantDuplicateOf(t, err, held.ID)
	if c := keyCount(t, n); c != before {
		t.Fatalf("%d key entries after a refused batch, want %d", c, before)
	}
	mustEnqueue(t, n, `{"type":"b","args":[],"options":{"unique":{"key":"fresh1"}}}`)

	// reject inside: refused naming the earlier job of the batch.
	in := batch(t,
		`{"type":"b","args":[],"options":{"unique":{"key":"in"}}}`,
		`{"type":"b","args":[],"options":{"unique":{"key":"in"}}}`)
	in[0].ID = ojs.NewID()
	_, err = n.svc.EnqueueBatch(ctx, in)
	wantDuplicateOf(t, err, in[0].ID)

	// ignore inside and across: the slots get the holders, the rest is created.
	out, err := n.svc.EnqueueBatch(ctx, batch(t,
		`{"type":"b","args":[],"options":{"unique":{"key":"ig","on_conflict":"ignore"}}}`,
		`{"type":"b","args":[],"options":{"unique":{"key":"ig","on_conflict":"ignore"}}}`,
		`{"type":"b","args":[],"options":{"unique":{"key":"held","on_conflict":"ignore"}}}`,
		`{"type":"b","args":[1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if out[1].ID != out[0].ID || out[2].ID != held.ID || out[3].ID == out[0].ID {
		t.Fatalf("batch answer ids %s %s %s %s", out[0].ID, out[1].ID, out[2].ID, out[3].ID)
	}
	for _, j := range []*ojs.Job{out[0], out[3]} {
		if st := state(t, n, j.ID); st != ojs.StateAvailable {
			t.Fatalf("created job %s is %s", j.ID, st)
		}
	}
	// a bad policy names the batch index.
	_, err = n.svc.EnqueueBatch(ctx, batch(t,
		`{"type":"b","args":[]}`,
		`{"type":"b","args":[],"options":{"unique":{"on_conflict":"nope"}}}`))
	var ve *ojs.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[1].unique.on_conflict" {
		t.Fatalf("err %v, want a validation error of jobs[1].unique.on_conflict", err)
	}
}

// Jobs without unique touch the bucket not at all (the hot path adds no
// round trip: the hook returns before any JetStream call).
func TestJobsWithoutUniqueLeaveNoKeys(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 1, unique.Config{})[0]
	for i := range 5 {
		mustEnqueue(t, n, fmt.Sprintf(`{"type":"plain","args":[%d]}`, i))
	}
	if _, err := n.svc.EnqueueBatch(testCtx(t), batch(t, `{"type":"plain","args":[]}`, `{"type":"plain","args":[]}`)); err != nil {
		t.Fatal(err)
	}
	if c := keyCount(t, n); c != 0 {
		t.Fatalf("%d key entries for jobs without unique", c)
	}
}
