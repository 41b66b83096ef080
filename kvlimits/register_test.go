package kvlimits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// Register creates a key's entry before its first start (issue 16: a key
// named by an enqueued job can be inspected at once, ojs-rate-limiting.md
// 10.1), atomically and without clobbering what another process wrote: a
// registration from a second process keeps the first one's leases and only
// tightens the policy; a registration with looser or equal limits writes
// nothing.
func TestRegisterCreatesOnceNeverClobbers(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stores []*kvlimits.Store
	var kv jetstream.KeyValue
	for range 2 {
		_, js := natstest.Connect(t, s)
		assets, err := topology.Ensure(ctx, js, topology.Config{})
		if err != nil {
			t.Fatal(err)
		}
		kv = assets.Limits
		stores = append(stores, kvlimits.New(assets.Limits))
	}
	a, b := stores[0], stores[1]
	e := kvlimits.KeyEntry("tenant:acme.api")
	if _, err := a.Get(ctx, e); !errors.As(err, new(*ojs.NotFoundError)) {
		t.Fatalf("entry before registration: %v, want not found", err)
	}
	five, two := 5, 2
	if err := a.Register(ctx, e, ojs.Limits{Concurrency: &five}); err != nil {
		t.Fatal(err)
	}
	st, err := b.Get(ctx, e)
	if err != nil || st.Policy.Concurrency == nil || *st.Policy.Concurrency != 5 || st.Key != "tenant:acme.api" {
		t.Fatalf("after registration: %+v, %v", st, err)
	}
	// A start through a holds a lease; b, which never saw the entry,
	// registers the key with a stricter limit: the lease stays.
	if err := a.Update(ctx, e, func(s *kvlimits.State) bool {
		g, _ := s.Acquire(kvlimits.Request{JobID: "job-1", Token: "t1", Declared: ojs.Limits{Concurrency: &five}}, time.Now())
		return g != nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(ctx, e, ojs.Limits{Concurrency: &two}); err != nil {
		t.Fatal(err)
	}
	st, err = a.Get(ctx, e)
	if err != nil || *st.Policy.Concurrency != 2 || len(st.Active) != 1 || st.Starts != 1 {
		t.Fatalf("after a second process registered: %+v, %v; want policy 2 and the lease kept", st, err)
	}
	before, err := kv.Get(ctx, e.Name())
	if err != nil {
		t.Fatal(err)
	}
	// Looser or equal limits, and a key with no limits at all, write
	// nothing once the entry exists.
	for _, l := range []ojs.Limits{{Concurrency: &five}, {Concurrency: &two}, {}} {
		if err := b.Register(ctx, e, l); err != nil {
			t.Fatal(err)
		}
	}
	after, err := kv.Get(ctx, e.Name())
	if err != nil || after.Revision() != before.Revision() {
		t.Fatalf("revision %d -> %d (%v): registration of a known, no looser key wrote", before.Revision(), after.Revision(), err)
	}
	// A key declared with no limits still gets its entry.
	bare := kvlimits.KeyEntry("bare")
	if err := b.Register(ctx, bare, ojs.Limits{}); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Get(ctx, bare); err != nil || !st.Policy.Empty() {
		t.Fatalf("bare key: %+v, %v", st, err)
	}
}
