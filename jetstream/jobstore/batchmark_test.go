package jobstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

func batchJobs(n int, queue string) []*ojs.Job {
	jobs := make([]*ojs.Job, n)
	for i := range jobs {
		jobs[i] = &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "b.t", Queue: queue, State: ojs.StateAvailable,
			Args: []byte(fmt.Sprintf("[%d]", i)), Internal: ojs.Internal{Token: jobstore.NewToken()}}
	}
	return jobs
}

// A batch of new jobs is all or none (ojs-http-binding.md 10.6, issue 17's
// cheaper all-or-nothing scheme): committed, every job is found and the
// batch leaves nothing behind but its seeds; stored seeds whose publisher
// died before the commit are no job to any reader, and once the batch is
// older than its window a reader abandons it, after which the commit can
// no longer land.
func TestMarkedBatchIsAllOrNothing(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)

	jobs := batchJobs(5, "mq")
	if err := st.PublishSeedBatch(ctx, jobs, nil); err != nil {
		t.Fatal(err)
	}
	var batch string
	for _, j := range jobs {
		got, _, err := st.Get(ctx, j.ID)
		if err != nil || !got.Seed || got.Internal.Token != j.Internal.Token {
			t.Fatalf("Get %s after the commit: %v %+v", j.ID, err, got)
		}
		m, err := assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(j.ID))
		if err != nil {
			t.Fatal(err)
		}
		if b := jobstore.BatchOf(m.Header); b == "" || (batch != "" && b != batch) {
			t.Fatalf("seed of %s names batch %q (others %q)", j.ID, b, batch)
		}
		batch = jobstore.BatchOf(m.Header)
	}
	if _, err := assets.Batches.Get(ctx, "b."+batch); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("marker of a committed batch: %v, want none", err)
	}

	// The publisher dies after its seeds are stored, before the commit.
	dead := batchJobs(3, "mq")
	id := "deadbatch"
	mark := []byte(`{"state":"pending","jobs":3}`)
	rev, err := assets.Batches.Create(ctx, "b."+id, mark)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range dead {
		m, err := jobstore.SeedMsg(j)
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Set(jobstore.HeaderBatch, id)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	reader := jobstore.New(nc, js, assets)
	// A window long enough that the reads below meet the batch still
	// pending on a loaded machine, short enough to wait out.
	reader.SetBatchWindow(5 * time.Second)
	for _, j := range dead {
		if got, _, err := reader.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
			t.Fatalf("Get %s of a pending batch: %v %+v, want not found", j.ID, err, got)
		}
	}
	if state, err := reader.SeedBatch(ctx, id); err != nil || state != jobstore.BatchPending {
		t.Fatalf("young uncommitted batch: %v %v, want pending", state, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, err := reader.SeedBatch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if state == jobstore.BatchAborted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch older than its window still %v", state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The publisher's commit, had it been only slow, now loses.
	err = assets.Batches.Purge(ctx, "b."+id, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Hour))
	if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("commit after the abandon: %v, want a lost compare-and-swap", err)
	}
	for _, j := range dead {
		if got, _, err := st.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
			t.Fatalf("Get %s of an aborted batch: %v %+v, want not found", j.ID, err, got)
		}
	}
}

// A publisher that cannot commit in time aborts its own batch: the call
// fails, no job of it is found, and its seeds are removed.
func TestLateBatchAbortsItself(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	st.SetBatchWindow(time.Nanosecond) // every batch is "late"
	jobs := batchJobs(4, "lq")
	if err := st.PublishSeedBatch(ctx, jobs, nil); err == nil {
		t.Fatal("a batch past its commit time was stored")
	}
	for _, j := range jobs {
		if got, _, err := st.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
			t.Fatalf("Get %s of an aborted batch: %v %+v", j.ID, err, got)
		}
		if _, err := assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(j.ID)); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("seed of %s left after the abort: %v", j.ID, err)
		}
	}
}

// The batch marker on a replicated cluster (R3): a committed batch's jobs
// are read through the stream leaders, an uncommitted one's are not jobs.
func TestMarkedBatchOnCluster(t *testing.T) {
	ctx, nc, js, assets := setupClusterStore(t)
	st := jobstore.New(nc, js, assets)
	jobs := batchJobs(50, "cq")
	if err := st.PublishSeedBatch(ctx, jobs, nil); err != nil {
		t.Fatal(err)
	}
	reader := jobstore.New(nc, js, assets) // no memory of the commit
	for _, j := range jobs {
		if got, _, err := reader.Get(ctx, j.ID); err != nil || !got.Seed {
			t.Fatalf("Get %s after the commit: %v %+v", j.ID, err, got)
		}
	}
	if _, err := assets.Batches.Create(ctx, "b.pending-r3", []byte(`{"state":"pending","jobs":1}`)); err != nil {
		t.Fatal(err)
	}
	j := batchJobs(1, "cq")[0]
	m, err := jobstore.SeedMsg(j)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set(jobstore.HeaderBatch, "pending-r3")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, _, err := reader.Get(ctx, j.ID); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("Get of a pending batch's job on R3: %v %+v", err, got)
	}
}
