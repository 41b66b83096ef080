package jobstore_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
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

// Issue 31 item 2: the count keeper reads one level's ready messages to
// find those whose record never came. ScanReadyLevel passes every message
// of that level and no other (another queue's, another level's), with its
// sequence, time, job and token, and tells a seed (a message carrying its
// job) from a message that only names one; on a cluster too.
func TestScanReadyLevel(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			ctx, nc, js, assets := setupStore(t)
			n := 600 // more than one batched direct get
			if cluster {
				ctx, nc, js, assets = setupClusterStore(t)
				n = 30
			}
			st := jobstore.New(nc, js, assets)
			want := map[uint64]jobstore.ReadyHead{}
			for i := range n {
				queue, prio := "scan.q", 2
				switch i % 4 {
				case 1:
					prio = 3
				case 2:
					queue = "scan.other"
				}
				j := &ojs.Job{ID: fmt.Sprintf("job-%d", i), Type: "t", Queue: queue, Priority: prio,
					Internal: ojs.Internal{Token: fmt.Sprintf("tok-%d", i)}}
				m := jobstore.ReadyMsg(j)
				if i%8 == 0 {
					m.Data = []byte(`{"id":"` + j.ID + `"}`)
				}
				ack, err := js.PublishMsg(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				if queue == "scan.q" && prio == 2 {
					want[ack.Sequence] = jobstore.ReadyHead{Seq: ack.Sequence, Subject: m.Subject, Seed: i%8 == 0,
						Ref: jobstore.MsgRef{JobID: j.ID, Token: j.Internal.Token}}
				}
			}
			got := map[uint64]jobstore.ReadyHead{}
			pos, err := st.ScanReadyLevel(ctx, "scan.q", 2, 1, 10*n, func(h jobstore.ReadyHead) bool {
				if h.Time.IsZero() || time.Since(h.Time) > time.Minute {
					t.Fatalf("message %d stored at %v", h.Seq, h.Time)
				}
				h.Time = time.Time{}
				got[h.Seq] = h
				return true
			})
			if err != nil || !pos.Done {
				t.Fatalf("scan: %+v, %v", pos, err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("scanned %d messages, want %d: %v", len(got), len(want), got)
			}
		})
	}
}
