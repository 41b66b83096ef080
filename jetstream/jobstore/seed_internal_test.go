package jobstore

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Found by the chaos suite's long form (issue 20): an enqueue whose
// record read failed after its ready message landed removed the message,
// while a claim of it could already be under way: a job left available
// with a record and no message, never run. A stored seed stays whatever
// the read says; the enqueue answers the error.
func TestSeedStaysWhenTheRecordReadFails(t *testing.T) {
	ctx, st := testStore(t)
	js := st.js
	// Record reads go to a stream that is gone: every read fails.
	gone, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GONE", Subjects: []string{"gone.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "GONE"); err != nil {
		t.Fatal(err)
	}
	st.jobs = gone
	j := &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "s.t", Queue: "q", State: ojs.StateAvailable,
		Internal: ojs.Internal{Token: NewToken()}}
	if err := st.PublishSeed(ctx, j, true); err == nil {
		t.Fatal("PublishSeed with failing record reads: no error")
	}
	m, err := st.assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(j.ID))
	if err != nil || SeedOf(m.Header, m.Data) == nil {
		t.Fatalf("the stored seed is gone after the failed read: %v", err)
	}
}

// testStore is a Store on a server of its own with jetgate's streams, and
// a context bounding the test's calls.
func testStore(t *testing.T) (context.Context, *Store) {
	t.Helper()
	ctx, nc, js, assets := SetupStore(t)
	return ctx, New(nc, js, assets)
}
