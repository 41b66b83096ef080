package kvlimits_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// RL-001 across processes: two Stores (two connections, as two jetgate
// processes) and 64 goroutines acquire and release slots of one key with
// concurrency 5. The number holding a slot, counted outside the store,
// never exceeds 5, and every slot is given back.
func TestConcurrencyExactAcrossStores_RL001(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stores []*kvlimits.Store
	for range 2 {
		_, js := natstest.Connect(t, s)
		assets, err := topology.Ensure(ctx, js, topology.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, kvlimits.New(assets.Limits))
	}
	const limit, workers, rounds = 5, 64, 20
	n := limit
	declared := ojs.Limits{Concurrency: &n}
	e := kvlimits.KeyEntry("tenant:acme.api")
	var holding, peak, grants atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stores[w%2]
			for r := range rounds {
				id, tok := fmt.Sprintf("job-%d-%d", w, r), "t"
				var g *kvlimits.Grant
				err := st.Update(ctx, e, func(s *kvlimits.State) bool {
					g, _ = s.Acquire(kvlimits.Request{JobID: id, Token: tok, Declared: declared}, time.Now())
					return true
				})
				if err != nil {
					t.Error(err)
					return
				}
				if g == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				grants.Add(1)
				for h := holding.Add(1); ; {
					p := peak.Load()
					if h <= p || peak.CompareAndSwap(p, h) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				holding.Add(-1)
				if err := st.Update(ctx, e, func(s *kvlimits.State) bool { return s.Release(id, tok) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("RL-001: %d slots held at once, limit %d", p, limit)
	}
	if grants.Load() == 0 {
		t.Fatal("no slot was ever granted")
	}
	got, err := stores[0].Get(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Active) != 0 || got.Starts != uint64(grants.Load()) {
		t.Fatalf("after the run: %d slots held, %d starts counted, %d granted", len(got.Active), got.Starts, grants.Load())
	}
}
