package kvlimits_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

func intp(n int) *int { return &n }

// BenchmarkAcquireDecision is the admission decision alone, in memory: a
// start asked of a key's state and, when granted, released again, for
// each kind of limit. The throttle case is refused after its first
// start, so it measures the refusal path.
//
//	go test -run '^$' -bench AcquireDecision ./kvlimits
func BenchmarkAcquireDecision(b *testing.B) {
	second := ojs.Duration(time.Second)
	for _, bm := range []struct {
		name   string
		limits ojs.Limits
	}{
		{"concurrency", ojs.Limits{Concurrency: intp(1000)}},
		{"window", ojs.Limits{Rate: &ojs.RateWindow{Limit: ojs.MaxRateLimit, Period: second}}},
		{"throttle_refused", ojs.Limits{Throttle: &ojs.RateWindow{Limit: 1, Period: ojs.Duration(time.Hour)}}},
		{"all", ojs.Limits{Concurrency: intp(1000), Rate: &ojs.RateWindow{Limit: ojs.MaxRateLimit, Period: second}}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			st := &kvlimits.State{Scope: kvlimits.ScopeKey, Key: "bench"}
			now := time.Now()
			b.ReportAllocs()
			for i := range b.N {
				id := fmt.Sprint("job-", i)
				g, _ := st.Acquire(kvlimits.Request{JobID: id, Token: "t", Declared: bm.limits}, now)
				if g != nil && g.Leased {
					st.Release(id, "t")
				}
			}
		})
	}
}

// BenchmarkStoreAcquire is a concurrency slot acquired and released
// through the Store: compare-and-swap writes to the OJS_LIMITS bucket on
// an embedded nats-server, on one key and spread over 100 keys, from one
// goroutine and from GOMAXPROCS×8 (whose writes to a key the Store
// gathers into one CAS).
//
//	go test -run '^$' -bench StoreAcquire ./kvlimits
func BenchmarkStoreAcquire(b *testing.B) {
	s := natstest.RunServer(b)
	_, js := natstest.Connect(b, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		b.Fatal(err)
	}
	store := kvlimits.New(assets.Limits)
	declared := ojs.Limits{Concurrency: intp(1_000_000)}
	var seq atomic.Int64
	pair := func(keys int) error {
		n := seq.Add(1)
		id, e := fmt.Sprint("job-", n), kvlimits.KeyEntry(fmt.Sprintf("bench-%d-%d", keys, n%int64(keys)))
		var granted bool
		if err := store.Update(ctx, e, func(st *kvlimits.State) bool {
			g, _ := st.Acquire(kvlimits.Request{JobID: id, Token: "t", Declared: declared}, time.Now())
			granted = g != nil
			return granted
		}); err != nil {
			return err
		}
		if !granted {
			return fmt.Errorf("%s refused", id)
		}
		return store.Update(ctx, e, func(st *kvlimits.State) bool { return st.Release(id, "t") })
	}
	for _, keys := range []int{1, 100} {
		b.Run(fmt.Sprintf("keys=%d/serial", keys), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := pair(keys); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", keys), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := pair(keys); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
