package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// A slot whose release failed (a node was away) is reclaimed without
// reading its job: the activation is over for certain. On a cluster the
// read may come from a replica still behind, showing the job active from
// that very activation, and the slot was kept for good: the cluster
// property run once ended with a concurrency slot held after every job
// completed (RL-001 counts only running jobs). A slot whose activation may
// have happened (a claim's lost answer) is still kept while the job is
// active with it, and freed only once the job is fenced otherwise; a slot
// whose activation may have ended (a lost answer to the write ending it)
// is freed once the job reads as left, and looked at again until then.
func TestReclaimFreesEndedSlotsAndFencesLostClaims_RL001(t *testing.T) {
	t.Parallel()
	ctx, svc := newInternalService(t, 30*time.Second)
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()

	job, err := ojs.ParseJob([]byte(`{"type":"rl.test","args":[],"queue":"rq","rate_limit":{"key":"k","concurrency":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"rq"}, WorkerID: "w"})
	if err != nil || len(got) != 1 {
		t.Fatalf("fetch: %v, %d jobs", err, len(got))
	}
	active := got[0]
	e := kvlimits.KeyEntry("k")
	held := func() int {
		st, err := svc.limits.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Active)
	}
	if n := held(); n != 1 {
		t.Fatalf("%d slots held by the running job, want 1", n)
	}
	lease := kvlimits.Lease{JobID: active.ID, Token: active.Internal.Token}

	if err := svc.reclaim(ctx, e, []reclaimReq{{lease: lease, kind: reclaimClaimed}}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("a possible activation of a running job was reclaimed: %d slots held, want 1", n)
	}
	// A write ending the attempt got no answer, and the job still reads
	// active with the token (the write failed, or the read is behind it):
	// the slot stays, and the reclaim is looked at again later.
	if err := svc.reclaim(ctx, e, []reclaimReq{{lease: lease, kind: reclaimLeaving}}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("the slot of a job that reads active was reclaimed: %d slots held, want 1", n)
	}
	if again := svc.promoter.takeReclaims(e); len(again) != 1 || again[0].kind != reclaimLeaving {
		t.Fatalf("the leaving reclaim was not queued again: %+v", again)
	}
	// The record still says active with the token, as a replica behind
	// the job's end would.
	if err := svc.reclaim(ctx, e, []reclaimReq{{lease: lease, kind: reclaimEnded}}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("the slot of an ended activation is still held (%d slots)", n)
	}

	// A claim whose write had no answer, and did not land (yet): the job
	// is available, its slot held. The reclaim frees the slot only after
	// fencing the record, so the write can no longer land late and make
	// the job active without its slot (RL-001).
	job2, err := ojs.ParseJob([]byte(`{"type":"rl.test","args":[2],"queue":"rq","rate_limit":{"key":"k","concurrency":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Enqueue(ctx, job2); err != nil {
		t.Fatal(err)
	}
	got, err = svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"rq"}, WorkerID: "w"})
	if err != nil || len(got) != 1 {
		t.Fatalf("fetch: %v, %d jobs", err, len(got))
	}
	claimed := got[0]
	_, rev, err := svc.store.Get(ctx, claimed.ID)
	if err != nil {
		t.Fatal(err)
	}
	avail := claimed.Clone()
	avail.State, avail.Attempt, avail.StartedAt, avail.Internal.Token = ojs.StateAvailable, 0, nil, "t-ready"
	availRev, err := svc.store.Update(ctx, avail, rev) // as if the claim's write never landed
	if err != nil {
		t.Fatal(err)
	}
	lost := kvlimits.Lease{JobID: claimed.ID, Token: claimed.Internal.Token}
	if err := svc.reclaim(ctx, e, []reclaimReq{{lease: lost, kind: reclaimClaimed}}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("the slot of a claim that did not land is still held (%d slots)", n)
	}
	if _, err := svc.store.Update(ctx, claimed, availRev); !errors.Is(err, jobstore.ErrConflict) {
		t.Fatalf("the late claim write landed after its slot was reclaimed (err %v): the job runs without its slot", err)
	}

	// An ack whose answer was lost: the job left active, and a leaving
	// reclaim frees the slot the ack's caller never released.
	if _, err := svc.Ack(ctx, ojs.AckRequest{JobID: active.ID}); err != nil {
		t.Fatal(err)
	}
	if err := svc.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		if st.Active == nil {
			st.Active = map[string]kvlimits.Lease{}
		}
		st.Active[kvlimits.LeaseKey(active.ID, active.Internal.Token)] = kvlimits.Lease{JobID: active.ID, Token: active.Internal.Token}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if err := svc.reclaim(ctx, e, []reclaimReq{{lease: lease, kind: reclaimLeaving}}); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("the slot of an attempt that left active is still held (%d slots)", n)
	}
}

// newInternalService returns a Service, not started, on its own embedded
// server with jetgate's streams and buckets, and a context of timeout.
func newInternalService(t *testing.T, timeout time.Duration) (context.Context, *Service) {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(nc, js, assets, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, svc
}
