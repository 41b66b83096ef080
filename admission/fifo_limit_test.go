package admission_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// fetchN fetches up to n jobs of queue, until at least one comes or d
// passes (waiters are released asynchronously).
func fetchN(t *testing.T, b bundle, queue string, n int, d time.Duration) []*ojs.Job {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		jobs, err := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{queue}, WorkerID: "w1", Count: n})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if len(jobs) > 0 || time.Now().After(deadline) {
			return jobs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jobIDs(jobs []*ojs.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// Issue 20: under a queue-level concurrency limit of 1 (RL-R005, RL-001),
// a fetch of 3 over three equal-priority jobs A, B, C must start A, the
// oldest (PRI-004: FIFO among equals; DESIGN invariant 4: waiters go
// oldest first within a priority), then B once A is acked, then C. A
// fetch's claims run in parallel, so before the fix the limit's slot went
// to whichever claim's compare-and-swap landed first, and the losers were
// parked in the order their refusals landed. Rounds alternate between the
// limit set before and after the jobs are enqueued, and every later fetch
// asks for 3 as well, while the refused jobs wait.
func TestQueueLimitPartialFetchKeepsFIFO_RLR005_RL001_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := 1
	for round := range 30 {
		queue := fmt.Sprintf("fifoq%d", round)
		setLimit := func() {
			if _, err := b.svc.SetQueueRateLimit(testCtx(t), queue, &ojs.Limits{Concurrency: &one}); err != nil {
				t.Fatal(err)
			}
		}
		before := round%2 == 0
		if before {
			setLimit()
		}
		var want []string
		for i := range 3 {
			want = append(want, enqueue(t, b, fmt.Sprintf(`{"type":"fifo.test","args":[%d],"queue":%q}`, i, queue)).ID)
		}
		if !before {
			setLimit()
		}
		for i, id := range want {
			got := fetchN(t, b, queue, 3, 10*time.Second)
			if len(got) != 1 || got[0].ID != id {
				t.Fatalf("round %d (limit set %s the enqueues), fetch %d of 3: got %v, want exactly [%s] of %v (RL-001: one start under concurrency 1; PRI-004: oldest first)",
					round, map[bool]string{true: "before", false: "after"}[before], i, jobIDs(got), id, want)
			}
			ack(t, b, id)
		}
		if got := fetchN(t, b, queue, 3, 0); len(got) != 0 {
			t.Fatalf("round %d: fetch after the three = %v, want none", round, jobIDs(got))
		}
	}
}

// Issue 20, the waiters' side: with the queue's one slot taken (RL-R005),
// a fetch of 3 over A, B, C parks all three (RL-001), and they must be
// parked, so released, in enqueue order (DESIGN invariant 4: waiters of
// one entry go oldest first within a priority; PRI-004). Before the fix
// the parallel claims parked them in the order their refusals landed.
func TestQueueLimitParksPartialFetchInOrder_RLR005_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := 1
	for round := range 20 {
		queue := fmt.Sprintf("parkfifo%d", round)
		if _, err := b.svc.SetQueueRateLimit(testCtx(t), queue, &ojs.Limits{Concurrency: &one}); err != nil {
			t.Fatal(err)
		}
		holder := enqueue(t, b, fmt.Sprintf(`{"type":"fifo.test","args":[-1],"queue":%q}`, queue))
		if got := fetchN(t, b, queue, 3, 10*time.Second); len(got) != 1 || got[0].ID != holder.ID {
			t.Fatalf("round %d: holder fetch = %v, want [%s]", round, jobIDs(got), holder.ID)
		}
		var want []string
		for i := range 3 {
			want = append(want, enqueue(t, b, fmt.Sprintf(`{"type":"fifo.test","args":[%d],"queue":%q}`, i, queue)).ID)
		}
		if got := fetchN(t, b, queue, 3, 0); len(got) != 0 {
			t.Fatalf("round %d: RL-001: %v started while the one slot is taken", round, jobIDs(got))
		}
		prev := holder.ID
		for i, id := range want {
			ack(t, b, prev)
			got := fetchN(t, b, queue, 3, 10*time.Second)
			if len(got) != 1 || got[0].ID != id {
				t.Fatalf("round %d, release %d: got %v, want exactly [%s] of %v (waiters oldest first)", round, i, jobIDs(got), id, want)
			}
			prev = id
		}
		ack(t, b, prev)
	}
}

// Issue 20 with several fetchers: three fetches at once (of 1, 2 and 3
// jobs) over A, B, C under a queue-level concurrency of 1 start exactly
// one job between them (RL-001), and it is A (PRI-004), whether they
// share a pull or pull one after the other; the others follow in order as
// each is acked.
func TestQueueLimitConcurrentFetchesKeepFIFO_RLR005_RL001_PRI004(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := 1
	for round := range 20 {
		queue := fmt.Sprintf("concfifo%d", round)
		if _, err := b.svc.SetQueueRateLimit(testCtx(t), queue, &ojs.Limits{Concurrency: &one}); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 3 {
			want = append(want, enqueue(t, b, fmt.Sprintf(`{"type":"fifo.test","args":[%d],"queue":%q}`, i, queue)).ID)
		}
		for i, id := range want {
			var started []string
			deadline := time.Now().Add(10 * time.Second)
			for len(started) == 0 && time.Now().Before(deadline) {
				var mu sync.Mutex
				var wg sync.WaitGroup
				for n := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						jobs, err := b.svc.Fetch(testCtx(t), ojs.FetchRequest{Queues: []string{queue}, WorkerID: "w", Count: n + 1})
						if err != nil {
							t.Errorf("fetch: %v", err)
						}
						mu.Lock()
						started = append(started, jobIDs(jobs)...)
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			if len(started) != 1 || started[0] != id {
				t.Fatalf("round %d, start %d: the fetches started %v, want exactly [%s] of %v", round, i, started, id, want)
			}
			ack(t, b, id)
		}
	}
}
