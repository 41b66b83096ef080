package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/workflow"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Every goroutine the engine and the services start must stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// counting wraps a service and counts the enqueues that created a job
// (by job id), and can fail the next enqueues of chosen job ids.
type counting struct {
	*admission.Service
	mu      sync.Mutex
	created map[string]int
	failing map[string]bool
}

func (c *counting) Enqueue(ctx context.Context, j *ojs.Job) (*ojs.Job, error) {
	c.mu.Lock()
	fail := c.failing[j.ID]
	delete(c.failing, j.ID)
	c.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: injected enqueue failure", ojs.ErrUnavailable)
	}
	nj, err := c.Service.Enqueue(ctx, j)
	if err == nil {
		c.mu.Lock()
		c.created[j.ID]++
		c.mu.Unlock()
	}
	return nj, err
}

func (c *counting) createdCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created[id]
}

type node struct {
	kv     jetstream.KeyValue // the workflow bucket
	svc    *admission.Service
	eng    *workflow.Engine
	jobs   *counting
	events *capture
}

// capture records the workflow events an engine publishes.
type capture struct {
	mu     sync.Mutex
	events []string // "type subject"
}

func (c *capture) Publish(eventType, subject string, data any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, eventType+" "+subject)
}

func (c *capture) count(eventType, subject string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.events {
		if e == eventType+" "+subject {
			n++
		}
	}
	return n
}

// startNodes starts n admission services, each with its own connection
// and workflow engine (a hook when hooked[i], else a service that never
// tells the engine of a step's end: a process that died before its
// JobChanged), on one embedded server.
func startNodes(t *testing.T, check time.Duration, hooked ...bool) []node {
	t.Helper()
	s := natstest.RunServer(t)
	ctx := testCtx(t)
	out := make([]node, len(hooked))
	for i, hook := range hooked {
		_, js := natstest.Connect(t, s)
		assets, err := topology.Ensure(ctx, js, topology.Config{})
		if err != nil {
			t.Fatalf("ensure: %v", err)
		}
		ev := &capture{}
		eng := workflow.New(workflow.Config{JS: js, KV: assets.Workflows, Timers: assets.WorkflowTimers, Check: check, Events: ev})
		var hooks []admission.Lifecycle
		if hook {
			hooks = []admission.Lifecycle{eng}
		}
		svc, err := admission.New(js.Conn(), js, assets, admission.Config{Hooks: hooks})
		if err != nil {
			t.Fatalf("new: %v", err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		t.Cleanup(svc.Stop)
		c := &counting{Service: svc, created: map[string]int{}, failing: map[string]bool{}}
		eng.Bind(c)
		if err := eng.Start(ctx); err != nil {
			t.Fatalf("start engine: %v", err)
		}
		t.Cleanup(eng.Stop)
		out[i] = node{kv: assets.Workflows, svc: svc, eng: eng, jobs: c, events: ev}
	}
	return out
}

func create(t *testing.T, n node, body string) *ojs.Workflow {
	t.Helper()
	spec, err := ojs.ParseWorkflow([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	w, err := n.eng.CreateWorkflow(testCtx(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if w.State != ojs.WorkflowRunning {
		t.Fatalf("created workflow is %s, want running", w.State)
	}
	return w
}

func get(t *testing.T, n node, id string) *ojs.Workflow {
	t.Helper()
	w, err := n.eng.Workflow(testCtx(t), id)
	if err != nil {
		t.Fatalf("get workflow %s: %v", id, err)
	}
	return w
}

// fetch polls queue until a job comes, within 20 s.
func fetch(t *testing.T, n node, queue string) *ojs.Job {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		jobs, err := n.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{queue}, Count: 1, WorkerID: "w1"})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(jobs) == 1 {
			return jobs[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no job on %s within 20s", queue)
	return nil
}

// fetchNone checks that queue has no job to give.
func fetchNone(t *testing.T, n node, queue string) {
	t.Helper()
	jobs, err := n.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{queue}, Count: 10, WorkerID: "w1"})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(jobs) != 0 {
		t.Fatalf("queue %s gave %d jobs (%s ...), want none", queue, len(jobs), jobs[0].Type)
	}
}

func ack(t *testing.T, n node, j *ojs.Job, result string) {
	t.Helper()
	var r json.RawMessage
	if result != "" {
		r = json.RawMessage(result)
	}
	if _, err := n.svc.Ack(testCtx(t), ojs.AckRequest{JobID: j.ID, Result: r}); err != nil {
		t.Fatalf("ack %s: %v", j.ID, err)
	}
}

func nack(t *testing.T, n node, j *ojs.Job) {
	t.Helper()
	if _, err := n.svc.Nack(testCtx(t), ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Code: "boom", Message: "failed"}}); err != nil {
		t.Fatalf("nack %s: %v", j.ID, err)
	}
}

// waitState polls GET until the workflow is in state, within 30 s.
func waitState(t *testing.T, n node, id, state string) *ojs.Workflow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := get(t, n, id)
		if w.State == state {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s is %s, want %s within 30s: %+v", id, w.State, state, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jobIDOf(t *testing.T, w *ojs.Workflow, i int) string {
	t.Helper()
	if w.Steps[i].JobID == nil {
		t.Fatalf("step %d has no job id yet: %+v", i, w.Steps[i])
	}
	return *w.Steps[i].JobID
}

func argOf(t *testing.T, j *ojs.Job) string {
	t.Helper()
	var args []string
	if err := json.Unmarshal(j.Args, &args); err != nil || len(args) == 0 {
		t.Fatalf("job %s args %s", j.ID, j.Args)
	}
	return args[0]
}

const chain3 = `{"type":"chain","name":"etl","steps":[
	{"name":"extract","type":"wf.step","args":["a"],"options":{"queue":"%[1]s"}},
	{"name":"transform","type":"wf.step","args":["b"],"options":{"queue":"%[1]s"}},
	{"name":"load","type":"wf.step","args":["c"],"options":{"queue":"%[1]s"}}]}`

// L3-CHAIN-001, L3-CHAIN-002, L3-DATA-001: each step starts only after
// its predecessor completed and receives its result in parent_results;
// the chain completes with all steps.
func TestChain_L3_CHAIN_001_002(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, fmt.Sprintf(chain3, "ch"))
	if w.Type != "chain" || w.StepsTotal != 3 || w.Steps[1].State != "pending" || w.Steps[1].JobID != nil {
		t.Fatalf("created %+v", w)
	}
	first := fetch(t, n, "ch")
	if argOf(t, first) != "a" {
		t.Fatalf("first job %s", first.Args)
	}
	fetchNone(t, n, "ch") // the second step waits for the first
	ack(t, n, first, `{"rows":42}`)

	second := fetch(t, n, "ch")
	if argOf(t, second) != "b" || string(second.Extra["parent_results"]) != `[{"rows":42}]` {
		t.Fatalf("second job args %s parent_results %s", second.Args, second.Extra["parent_results"])
	}
	if got := get(t, n, w.ID); got.StepsCompleted != 1 || got.Steps[1].State != "active" {
		t.Fatalf("progress after one step: %+v", got)
	}
	ack(t, n, second, `{"rows":40}`)
	third := fetch(t, n, "ch")
	if string(third.Extra["parent_results"]) != `[{"rows":40}]` || string(third.Extra["workflow_id"]) != `"`+w.ID+`"` {
		t.Fatalf("third job %s", third.Extra)
	}
	ack(t, n, third, "")
	got := waitState(t, n, w.ID, ojs.WorkflowCompleted)
	if got.StepsCompleted != 3 || got.CompletedAt == nil || string(got.Steps[0].Result) != `{"rows":42}` {
		t.Fatalf("completed %+v", got)
	}
	// L3-WF-EVT-001: started, each step completed, completed; once each.
	for ev, want := range map[string]int{"workflow.started": 1, "workflow.step_completed": 3, "workflow.completed": 1, "workflow.failed": 0} {
		if c := n.events.count(ev, w.ID); c != want {
			t.Fatalf("%d %s events, want %d", c, ev, want)
		}
	}
}

// L3-CHAIN-002 with a result too large to keep in the workflow record:
// the successor still receives it (read from the job).
func TestChainLargeResult(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, fmt.Sprintf(chain3, "cl"))
	big := `{"blob":"` + strings.Repeat("x", 100<<10) + `"}`
	ack(t, n, fetch(t, n, "cl"), big)
	second := fetch(t, n, "cl")
	if string(second.Extra["parent_results"]) != "["+big+"]" {
		t.Fatalf("parent_results of %d bytes, want the %d-byte result", len(second.Extra["parent_results"]), len(big))
	}
	if got := get(t, n, w.ID); got.Steps[0].State != "completed" || got.Steps[0].Result != nil {
		t.Fatalf("first step %+v: want completed, its result kept in its job", got.Steps[0])
	}
}

// L3-CHAIN-003: a step discarded after its retries halts the chain: the
// workflow fails naming it, the later steps are never enqueued.
func TestChainMiddleStepDiscarded_L3_CHAIN_003(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, `{"type":"chain","steps":[
		{"type":"wf.step","args":["a"],"options":{"queue":"cd"}},
		{"name":"fragile","type":"wf.step","args":["b"],"options":{"queue":"cd","retry":{"max_attempts":1}}},
		{"type":"wf.step","args":["c"],"options":{"queue":"cd"}}]}`)
	ack(t, n, fetch(t, n, "cd"), `{}`)
	nack(t, n, fetch(t, n, "cd"))
	got := waitState(t, n, w.ID, ojs.WorkflowFailed)
	if got.FailedStep != "fragile" || got.Steps[1].State != "discarded" || got.Steps[2].State != "pending" || got.Steps[2].JobID != nil {
		t.Fatalf("failed workflow %+v", got)
	}
	if got.Error == nil || got.Error.Code != "boom" {
		t.Fatalf("workflow error %+v, want the step's", got.Error)
	}
	if c := n.events.count("workflow.failed", w.ID); c != 1 {
		t.Fatalf("%d workflow.failed events, want 1 (L3-WF-EVT-001)", c)
	}
	fetchNone(t, n, "cd")
}

// ojs-timeouts.md 9.2: a step that times out (execution timeout on its
// last attempt, so it is discarded) halts the chain and fails the workflow.
func TestChainStepTimesOut_Timeouts_9_2(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, `{"type":"chain","steps":[
		{"name":"slow","type":"wf.step","args":["a"],"timeout":1,"grace_period":0,"options":{"queue":"ct","retry":{"max_attempts":1}}},
		{"type":"wf.step","args":["b"],"options":{"queue":"ct"}}]}`)
	fetch(t, n, "ct") // never acked: its timeout passes
	got := waitState(t, n, w.ID, ojs.WorkflowFailed)
	if got.FailedStep != "slow" || got.Steps[0].State != "discarded" || got.Steps[1].JobID != nil {
		t.Fatalf("failed workflow %+v", got)
	}
	fetchNone(t, n, "ct")
}

// L3-GROUP-001, L3-GROUP-002: a group's jobs run at once, independently;
// the workflow reports completion when all of them are terminal.
func TestGroup_L3_GROUP_001_002(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, `{"type":"group","jobs":[
		{"type":"wf.step","args":["a"],"options":{"queue":"gr"}},
		{"type":"wf.step","args":["b"],"options":{"queue":"gr"}},
		{"type":"wf.step","args":["c"],"options":{"queue":"gr"}}]}`)
	if *w.JobsTotal != 3 || w.Steps[2].State != "available" {
		t.Fatalf("created %+v", w)
	}
	jobs := []*ojs.Job{fetch(t, n, "gr"), fetch(t, n, "gr"), fetch(t, n, "gr")} // all three at once
	ack(t, n, jobs[2], `{"i":2}`)
	ack(t, n, jobs[0], `{"i":0}`)
	if got := get(t, n, w.ID); got.State != ojs.WorkflowRunning || *got.JobsCompleted != 2 {
		t.Fatalf("after two of three: %+v", got)
	}
	ack(t, n, jobs[1], `{"i":1}`)
	if got := waitState(t, n, w.ID, ojs.WorkflowCompleted); *got.JobsCompleted != 3 {
		t.Fatalf("completed %+v", got)
	}
}

const batch2 = `{"type":"batch","jobs":[
	{"type":"wf.step","args":["a"],"options":{"queue":"%[1]s","retry":{"max_attempts":1}}},
	{"type":"wf.step","args":["b"],"options":{"queue":"%[1]s","retry":{"max_attempts":1}}}],
	"callbacks":{
	"on_success":{"type":"wf.cb","args":["success"],"options":{"queue":"%[1]s-cb"}},
	"on_failure":{"type":"wf.cb","args":["failure"],"options":{"queue":"%[1]s-cb"}},
	"on_complete":{"type":"wf.cb","args":["complete"],"options":{"queue":"%[1]s-cb"}}}}`

// L3-BATCH-001, L3-BATCH-002: once every job is terminal, on_complete
// fires; on_success when all completed, on_failure when one did not.
// Callbacks receive every job's result in parent_results.
func TestBatchCallbacks_L3_BATCH_001_002(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]

	ok := create(t, n, fmt.Sprintf(batch2, "bs"))
	ack(t, n, fetch(t, n, "bs"), `{"n":1}`)
	fetchNone(t, n, "bs-cb") // not before every job ended
	ack(t, n, fetch(t, n, "bs"), `{"n":2}`)
	waitState(t, n, ok.ID, ojs.WorkflowCompleted)
	fired := map[string]*ojs.Job{}
	for range 2 {
		j := fetch(t, n, "bs-cb")
		fired[argOf(t, j)] = j
	}
	fetchNone(t, n, "bs-cb")
	if fired["success"] == nil || fired["complete"] == nil {
		t.Fatalf("callbacks of a successful batch: %v, want success and complete", fired)
	}
	if pr := string(fired["complete"].Extra["parent_results"]); pr != `[{"n":1},{"n":2}]` && pr != `[{"n":2},{"n":1}]` {
		t.Fatalf("callback parent_results %s", pr)
	}

	bad := create(t, n, fmt.Sprintf(batch2, "bf"))
	ack(t, n, fetch(t, n, "bf"), `{}`)
	nack(t, n, fetch(t, n, "bf"))
	got := waitState(t, n, bad.ID, ojs.WorkflowFailed)
	if got.Callbacks["on_success"].JobID != nil || got.Callbacks["on_failure"].JobID == nil {
		t.Fatalf("callbacks of a failed batch %+v", got.Callbacks)
	}
	fired = map[string]*ojs.Job{}
	for range 2 {
		j := fetch(t, n, "bf-cb")
		fired[argOf(t, j)] = j
	}
	fetchNone(t, n, "bf-cb")
	if fired["failure"] == nil || fired["complete"] == nil {
		t.Fatalf("callbacks of a failed batch: %v, want failure and complete", fired)
	}
}

// Issue 18: a batch whose last jobs end on two processes at once, each of
// which (and then both again, many times) tells its engine: the callbacks
// are enqueued exactly once, by the one compare-and-swap that recorded
// the batch's end.
func TestBatchCallbacksOnceAcrossTwoProcesses(t *testing.T) {
	nodes := startNodes(t, time.Minute, true, true)
	for round := range 5 {
		q := fmt.Sprintf("b2p%d", round)
		w := create(t, nodes[0], fmt.Sprintf(batch2, q))
		a, b := fetch(t, nodes[0], q), fetch(t, nodes[1], q)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ack(t, nodes[0], a, `{}`) }()
		go func() { defer wg.Done(); ack(t, nodes[1], b, `{}`) }()
		wg.Wait()
		// Both processes see both ends again, concurrently (a redelivered
		// hook, a reconcile racing the hook).
		ja, _ := nodes[0].svc.Get(testCtx(t), a.ID)
		jb, _ := nodes[1].svc.Get(testCtx(t), b.ID)
		var start sync.WaitGroup
		start.Add(1)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				nd := nodes[i%2]
				nd.eng.JobChanged(context.Background(), ja, ojs.StateActive)
				nd.eng.JobChanged(context.Background(), jb, ojs.StateActive)
				_, _ = nd.eng.Workflow(context.Background(), w.ID)
			}()
		}
		start.Done()
		wg.Wait()
		got := waitState(t, nodes[0], w.ID, ojs.WorkflowCompleted)
		for kind, want := range map[string]int{"on_success": 1, "on_complete": 1, "on_failure": 0} {
			cb := got.Callbacks[kind]
			id := workflowCallbackID(got, kind)
			if n := nodes[0].jobs.createdCount(id) + nodes[1].jobs.createdCount(id); n != want {
				t.Fatalf("round %d: %s created %d times, want %d (%+v)", round, kind, n, want, cb)
			}
		}
		fetch(t, nodes[0], q+"-cb")
		fetch(t, nodes[1], q+"-cb")
		fetchNone(t, nodes[0], q+"-cb")
	}
}

// workflowCallbackID is the job id of a callback of batch2 (callbacks
// follow the steps, in on_success, on_failure, on_complete order).
func workflowCallbackID(w *ojs.Workflow, kind string) string {
	return jobIDOfStep(w.ID, len(w.Steps)+map[string]int{"on_success": 0, "on_failure": 1, "on_complete": 2}[kind])
}

// ojs-http-binding.md 14.3: cancelling a workflow cancels its steps'
// jobs that have not ended and the steps not enqueued never are.
func TestCancel_Binding_14_3(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, fmt.Sprintf(chain3, "cc"))
	ack(t, n, fetch(t, n, "cc"), `{}`)
	second := fetch(t, n, "cc")
	got, err := n.eng.CancelWorkflow(testCtx(t), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ojs.WorkflowCancelled || *got.StepsCancelled != 2 || *got.StepsAlreadyCompleted != 1 || got.CancelledAt == nil {
		t.Fatalf("cancelled %+v", got)
	}
	if j, _ := n.svc.Get(testCtx(t), second.ID); j.State != ojs.StateCancelled {
		t.Fatalf("active step's job is %s, want cancelled", j.State)
	}
	if _, err := n.svc.Get(testCtx(t), jobIDOfStep(w.ID, 2)); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("third step's job: %v, want never created", err)
	}
	if got := get(t, n, w.ID); got.State != ojs.WorkflowCancelled || got.Steps[1].State != "cancelled" {
		t.Fatalf("after cancel %+v", got)
	}
	if _, err := n.eng.CancelWorkflow(testCtx(t), w.ID); !errors.Is(err, ojs.ErrConflict) {
		t.Fatalf("second cancel: %v, want a conflict", err)
	}
	if _, err := n.eng.Workflow(testCtx(t), ojs.NewID()); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("unknown workflow: %v, want not found", err)
	}
}

// ojs-priority.md 9.2: successors inherit the root's priority unless they
// set their own.
func TestPriorityInheritance_Priority_9_2(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	create(t, n, `{"type":"chain","steps":[
		{"type":"wf.step","args":["a"],"priority":7,"options":{"queue":"pr"}},
		{"type":"wf.step","args":["b"],"options":{"queue":"pr"}},
		{"type":"wf.step","args":["c"],"options":{"queue":"pr","priority":1}}]}`)
	var got []int
	for range 3 {
		j := fetch(t, n, "pr")
		got = append(got, j.Priority)
		ack(t, n, j, `{}`)
	}
	if fmt.Sprint(got) != "[7 7 1]" {
		t.Fatalf("priorities %v, want [7 7 1]", got)
	}
}

// Crash safety: a step ends on a process that never tells the workflow
// (no hook: it died before JobChanged). GET reconciles from the step's
// job record and moves the workflow on.
func TestMissedHookReconciledByGet(t *testing.T) {
	nodes := startNodes(t, time.Hour, true, false)
	w := create(t, nodes[0], fmt.Sprintf(chain3, "mg"))
	ack(t, nodes[1], fetch(t, nodes[1], "mg"), `{"x":1}`) // the unhooked process
	if _, err := nodes[0].svc.Get(testCtx(t), jobIDOfStep(w.ID, 1)); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("second step exists before any reconcile: %v", err)
	}
	got := get(t, nodes[0], w.ID)
	if got.Steps[0].State != "completed" || got.Steps[1].JobID == nil {
		t.Fatalf("after GET %+v", got)
	}
	if j := fetch(t, nodes[0], "mg"); string(j.Extra["parent_results"]) != `[{"x":1}]` {
		t.Fatalf("second step parent_results %s", j.Extra["parent_results"])
	}
}

// Crash safety: with nobody reading the workflow, its check timer (a
// JetStream message schedule) finds the step that ended unseen and
// enqueues the next one.
func TestMissedHookReconciledByCheckTimer(t *testing.T) {
	nodes := startNodes(t, 300*time.Millisecond, true, false)
	w := create(t, nodes[0], fmt.Sprintf(chain3, "mt"))
	ack(t, nodes[1], fetch(t, nodes[1], "mt"), `{}`)
	next := fetch(t, nodes[1], "mt") // enqueued by the timer, no GET involved
	if next.ID != jobIDOfStep(w.ID, 1) {
		t.Fatalf("fetched %s, want the second step", next.ID)
	}
}

// Crash safety and idempotence: the winner of the compare-and-swap dies
// before it enqueues the successor (injected failure): the check timer
// enqueues it; the same step's end seen twice changes nothing more.
func TestAdvanceTwiceAndLostEnqueue(t *testing.T) {
	n := startNodes(t, 300*time.Millisecond, true)[0]
	w := create(t, n, fmt.Sprintf(chain3, "ml"))
	second := jobIDOfStep(w.ID, 1)
	n.jobs.mu.Lock()
	n.jobs.failing[second] = true
	n.jobs.mu.Unlock()
	first := fetch(t, n, "ml")
	ack(t, n, first, `{}`) // recorded; the successor's enqueue fails
	j := fetch(t, n, "ml") // the timer's reconcile enqueued it
	if j.ID != second {
		t.Fatalf("fetched %s, want %s", j.ID, second)
	}
	done, _ := n.svc.Get(testCtx(t), first.ID)
	n.eng.JobChanged(testCtx(t), done, ojs.StateActive)
	n.eng.JobChanged(testCtx(t), done, ojs.StateActive)
	if c := n.jobs.createdCount(second); c != 1 {
		t.Fatalf("second step created %d times", c)
	}
	fetchNone(t, n, "ml")
}

// ojs-timeouts.md 9.2 (workflow_timeout): the workflow fails when its
// timeout passes and its running steps are cancelled.
func TestWorkflowTimeout(t *testing.T) {
	n := startNodes(t, time.Minute, true)[0]
	w := create(t, n, `{"type":"group","workflow_timeout":1,"jobs":[
		{"type":"wf.step","args":["a"],"options":{"queue":"wt"}},
		{"type":"wf.step","args":["b"],"options":{"queue":"wt"}}]}`)
	ack(t, n, fetch(t, n, "wt"), `{}`)
	got := waitState(t, n, w.ID, ojs.WorkflowFailed)
	if got.Error == nil || got.Error.Code != "workflow_timeout" {
		t.Fatalf("timed out %+v", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = get(t, n, w.ID)
		if got.Steps[0].State == "completed" && got.Steps[1].State == "cancelled" || got.Steps[1].State == "completed" && got.Steps[0].State == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("steps after the timeout %+v", got.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fetchNone(t, n, "wt")
}

// jobIDOfStep is the job id a step gets (see record.go).
func jobIDOfStep(wf string, i int) string { return workflow.StepJobID(wf, i) }
