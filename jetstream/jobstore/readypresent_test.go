package jobstore_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 2: the count keeper asks which held ready messages are
// still in the ready stream. ReadyPresent answers by exact subject: a
// message there is present, one deleted (acked, with work-queue
// retention) or never published is not; more subjects than one batched
// direct get answers are asked in several; on a cluster (direct gets off)
// through the leader.
func TestReadyPresent(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			ctx, nc, js, assets := setupStore(t)
			n := 1500
			if cluster {
				ctx, nc, js, assets = setupClusterStore(t)
				n = 40
			}
			st := jobstore.New(nc, js, assets)
			var subjects []string
			want := map[string]bool{}
			for i := range n {
				subj := topology.ReadySubject("q.x", i%3, fmt.Sprintf("job-%d", i))
				subjects = append(subjects, subj)
				if i%5 == 4 {
					continue // never published
				}
				ack, err := js.Publish(ctx, subj, []byte("{}"))
				if err != nil {
					t.Fatal(err)
				}
				if i%5 == 3 {
					if err := assets.Ready.DeleteMsg(ctx, ack.Sequence); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want[subj] = true
			}
			got, err := st.ReadyPresent(ctx, subjects)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("present: %d subjects, want %d", len(got), len(want))
			}
		})
	}
}
