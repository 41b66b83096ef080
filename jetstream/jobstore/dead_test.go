package jobstore_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// The dead letter index answers read-after-write on a 3-node cluster (R3):
// a job discarded just now is in a listing made just after, and one
// removed is gone from it (ojs-dead-letter.md DLQ-006 lists what was
// dead-lettered). A key listing through a KV watcher missed fresh entries
// when its consumer landed on a replica behind the leader.
func TestDeadIndexReadAfterWriteR3_DLQ006(t *testing.T) {
	t.Parallel()
	ctx, nc, js, assets := setupClusterStore(t)
	st := jobstore.New(nc, js, assets)
	has := func(queue, id string) bool {
		keys, err := st.DeadKeys(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(keys, jobstore.DeadKey{Queue: queue, JobID: id})
	}
	for i := range 25 {
		q, id := fmt.Sprintf("q.%d", i%3), fmt.Sprintf("01a2106e-0000-7000-8000-%012d", i)
		if err := st.PutDead(ctx, jobstore.DeadEntry{JobID: id, Queue: q}); err != nil {
			t.Fatal(err)
		}
		if !has(q, id) {
			t.Fatalf("round %d: entry %s/%s written but not listed", i, q, id)
		}
		if i%2 == 0 {
			if err := st.DeleteDead(ctx, q, id); err != nil {
				t.Fatal(err)
			}
			if has(q, id) {
				t.Fatalf("round %d: entry %s/%s removed but still listed", i, q, id)
			}
		}
	}
	all, err := st.DeadKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 12 || !slices.IsSortedFunc(all, func(a, b jobstore.DeadKey) int {
		return strings.Compare(a.JobID, b.JobID)
	}) {
		t.Fatalf("all queues: %d entries %v, want the 12 kept, in id order", len(all), all)
	}
}
