package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 7: a fetch that starts after another process's enqueue
// was answered returns that job. Process A enqueues, process B fetches at
// once, as a worker's fetch without wait_ms does (the default FetchWait:
// B waits 10 ms for a job of its own before it looks further; the cluster
// test below sets none, so B looks at once), round after round, over the
// shapes of queue a fetch takes different paths for:
//   - warm: a queue with one level both processes have used;
//   - new queue: a queue neither process has seen (B learns its level
//     from the queue's record, not yet from its watch);
//   - new level: a queue gaining a level at every round, past the 16
//     levels up to which the levels' consumers are asked one by one
//     (levels.go) into the levels counted from the consumer list
//     (levelpull.go);
//   - warm levels: a queue with a few levels both processes have used;
//   - held ahead: a queue whose last job A pulled ahead of its own fetches
//     (prefetch.go) and holds, unclaimed, when B fetches.
//
// The job is the only one available in its queue, so "returns that job"
// is exact: B must not answer empty, nor with another job.
func TestFetchSeesOtherProcessEnqueue_Issue31Item7(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, jsA := natstest.Connect(t, s)
	_, jsB := natstest.Connect(t, s)
	a := setupCfg(t, jsA, admission.Config{})
	b := setupCfg(t, jsB, admission.Config{})
	enqueueThenFetch(t, a, b, 40)
}

// The same on a 3-node cluster with R3 streams and buckets, A and B each
// connected to a node of its own, B without FetchWait.
func TestFetchSeesOtherProcessEnqueueCluster_Issue31Item7(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	_, jsA := natstest.ConnectURL(t, cl.Servers[0].ClientURL())
	_, jsB := natstest.ConnectURL(t, cl.Servers[1].ClientURL())
	cfg := admission.Config{FetchWait: -1}
	a := setupReplicas(t, jsA, cfg, 3)
	b := setupReplicas(t, jsB, cfg, 3)
	enqueueThenFetch(t, a, b, 20)
}

// setupReplicas is setupCfg with every stream and bucket at replicas.
func setupReplicas(t *testing.T, js jetstream.JetStream, cfg admission.Config, replicas int) bundle {
	t.Helper()
	ctx := testCtx(t)
	assets, err := topology.Ensure(ctx, js, topology.Config{Replicas: replicas})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	svc, err := admission.New(js.Conn(), js, assets, cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Stop)
	return bundle{svc: svc, js: js}
}

// enqueueThenFetch runs rounds of every shape of enqueueThenFetch's
// doc comment and fails with the misses of each shape.
func enqueueThenFetch(t *testing.T, a, b bundle, rounds int) {
	t.Helper()
	ctx := testCtx(t)
	// Warm the shared queues: both processes have used their levels.
	for _, p := range []int{1, 2, 3} {
		j := mustEnqueue(ctx, t, a, fmt.Sprintf(`{"type":"v.t","args":[],"queue":"vis-levels","priority":%d}`, p))
		mustFetchID(ctx, t, b, "vis-levels", j.ID)
	}
	j := mustEnqueue(ctx, t, a, `{"type":"v.t","args":[],"queue":"vis-warm"}`)
	mustFetchID(ctx, t, b, "vis-warm", j.ID)

	misses := map[string][]string{}
	miss := func(shape string, round int, why string) {
		misses[shape] = append(misses[shape], fmt.Sprintf("round %d: %s", round, why))
	}
	try := func(shape string, round int, queue, body string) {
		want := mustEnqueue(ctx, t, a, body)
		if why := fetchID(ctx, b, queue, want.ID); why != "" {
			miss(shape, round, why)
			drain(ctx, t, a, b, queue, want.ID)
		}
	}
	for r := range rounds {
		try("warm", r, "vis-warm", `{"type":"v.t","args":[],"queue":"vis-warm"}`)
		q := fmt.Sprintf("vis-new-%d", r)
		try("new queue", r, q, fmt.Sprintf(`{"type":"v.t","args":[],"queue":%q}`, q))
		try("new level", r, "vis-grow", fmt.Sprintf(`{"type":"v.t","args":[],"queue":"vis-grow","priority":%d}`, 100-r))
		try("warm levels", r, "vis-levels", fmt.Sprintf(`{"type":"v.t","args":[],"queue":"vis-levels","priority":%d}`, 1+r%3))
		heldAhead(ctx, t, a, b, r, miss)
	}
	var report []string
	for shape, m := range misses {
		report = append(report, fmt.Sprintf("%s: %d of %d missed, %s", shape, len(m), rounds, strings.Join(m[:min(len(m), 3)], "; ")))
	}
	if len(report) > 0 {
		t.Fatalf("a fetch after another process's enqueue missed the job:\n%s", strings.Join(report, "\n"))
	}
}

// heldAhead is one round of the held-ahead shape: A enqueues three jobs
// and fetches two, one at a time, so its second pull takes the third job
// ahead (prefetch.go: its first pull got all it asked for); B's fetch
// must still return the third.
func heldAhead(ctx context.Context, t *testing.T, a, b bundle, r int, miss func(string, int, string)) {
	t.Helper()
	q := fmt.Sprintf("vis-ahead-%d", r%4)
	var ids []string
	for i := range 3 {
		ids = append(ids, mustEnqueue(ctx, t, a, fmt.Sprintf(`{"type":"v.t","args":[%d],"queue":%q}`, i, q)).ID)
	}
	for _, id := range ids[:2] {
		mustFetchID(ctx, t, a, q, id)
	}
	if why := fetchID(ctx, b, q, ids[2]); why != "" {
		miss("held ahead", r, why)
		drain(ctx, t, a, b, q, ids[2])
	}
}

func mustEnqueue(ctx context.Context, t *testing.T, p bundle, body string) *ojs.Job {
	t.Helper()
	j, err := p.svc.Enqueue(ctx, mustParse(t, body))
	if err != nil {
		t.Fatalf("enqueue %s: %v", body, err)
	}
	return j
}

func mustFetchID(ctx context.Context, t *testing.T, p bundle, queue, id string) {
	t.Helper()
	if why := fetchID(ctx, p, queue, id); why != "" {
		t.Fatalf("fetch %s: %s", queue, why)
	}
}

// fetchID fetches one job of queue through p and acks it; it says what
// went wrong unless that job was id.
func fetchID(ctx context.Context, p bundle, queue, id string) string {
	jobs, err := p.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, WorkerID: "vis"})
	switch {
	case err != nil:
		return fmt.Sprintf("fetch: %v", err)
	case len(jobs) == 0:
		return "empty answer"
	}
	for _, j := range jobs {
		if _, err := p.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
			return fmt.Sprintf("ack %s: %v", j.ID, err)
		}
	}
	if jobs[0].ID != id {
		return fmt.Sprintf("got job %s, want %s", jobs[0].ID, id)
	}
	return ""
}

// drain fetches and acks, through either process, what a missed round
// left in queue, until job id came out, so the next round starts with the
// queue empty.
func drain(ctx context.Context, t *testing.T, a, b bundle, queue, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, p := range []bundle{a, b} {
			jobs, err := p.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, WorkerID: "vis", Count: 10})
			if err != nil {
				t.Fatalf("drain %s: %v", queue, err)
			}
			for _, j := range jobs {
				if _, err := p.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
					t.Fatalf("drain ack: %v", err)
				}
				if j.ID == id {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s of %s never fetched", id, queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
