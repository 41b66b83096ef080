package jobstore_test

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// A record created under an id a seed holds, in a race with the seed's
// enqueue (issue 17, jobstore/seed.go), is removed again with a marker
// that does not hide the seed: the seed is still read by id, and its
// claim creates the record over the marker. An operator's deletion, in
// contrast, hides a seed that does not name it.
func TestRefusedRecordDoesNotHideTheSeed(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	seedJob := func(id string) *ojs.Job {
		return &ojs.Job{SpecVersion: ojs.SpecVersion, ID: id, Type: "s.t", Queue: "q", State: ojs.StateAvailable,
			Internal: ojs.Internal{Token: jobstore.NewToken()}}
	}

	id := ojs.NewID()
	seed := seedJob(id)
	m, err := jobstore.SeedMsg(seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The losing enqueue's record, created before it saw the seed.
	loser := seedJob(id)
	loser.State = ojs.StateScheduled
	if _, err := st.Create(ctx, loser); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckNoSeed(ctx, []*ojs.Job{loser}); !errors.As(err, new(*ojs.DuplicateError)) {
		t.Fatalf("CheckNoSeed: %v, want a duplicate", err)
	}
	got, rev, err := st.Get(ctx, id)
	if err != nil || !got.Seed || got.Internal.Token != seed.Internal.Token || rev == 0 {
		t.Fatalf("Get after the refused record: %v %+v rev %d; want the seed over the refusal's marker", err, got, rev)
	}
	got.State = ojs.StateActive
	if _, err := st.Update(ctx, got, rev); err != nil {
		t.Fatalf("the seed's claim over the marker: %v", err)
	}

	// A deletion hides a seed that does not name it.
	id2 := ojs.NewID()
	done := seedJob(id2)
	done.State = ojs.StateCompleted
	drev, err := st.Create(ctx, done)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, id2, drev); err != nil {
		t.Fatal(err)
	}
	m2, err := jobstore.SeedMsg(seedJob(id2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, id2); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("Get of a deleted id with a late seed: %v, want not found", err)
	}
}
