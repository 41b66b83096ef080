package admission

import (
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// A reader adds this process's unflushed deltas to what the counter and
// sample streams hold. A flush between those two reads counted a delta
// twice (pending, then flushed), or not at all while its publish was on
// its way: the scheduling statistics (ojs-fair-scheduling.md 10.2) once
// reported 63 dispatches for 32 fetched jobs. Every read taken while
// flushes race it must see each delta exactly once.
func TestStatsReadCountsEachDeltaOnceWhileFlushing(t *testing.T) {
	t.Parallel()
	ctx, svc := newInternalService(t, 60*time.Second)
	// Not started: no periodic flush; the test flushes by hand.
	const rounds, per = 8, 5
	var wg sync.WaitGroup
	defer wg.Wait()
	for r := 1; r <= rounds; r++ {
		for range per {
			svc.stats.move("sq", 2, ojs.StateActive, ojs.StateCompleted)
			svc.stats.sample("sq", func(x *statSample) { x.Started++ })
		}
		wg.Add(1)
		go func() { defer wg.Done(); svc.flushStats() }()
		want := int64(r * per)
		n, err := svc.stateCounts(ctx, "sq", []ojs.State{ojs.StateCompleted})
		if err != nil {
			t.Fatal(err)
		}
		if n[ojs.StateCompleted] != want {
			t.Fatalf("round %d: completed %d, want %d", r, n[ojs.StateCompleted], want)
		}
		var minute statSample
		err = svc.stats.consistent(func() error {
			_, local := svc.stats.pending("sq")
			var err error
			if _, minute, err = svc.recentSamples(ctx, "sq"); err == nil {
				add(&minute, local)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if minute.Started != want {
			t.Fatalf("round %d: started in the last minute %d, want %d", r, minute.Started, want)
		}
		wg.Wait()
	}
}
