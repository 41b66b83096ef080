package jobstore_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The level registry (registry.go), which fetches rely on for priority
// order (PRI-003, PRI-004): every level a ready message is published at
// is in the queue's record before the message, and the record is written
// once per queue and level across processes, not once per job. Two
// stores on one server stand for two processes; the bucket holds only
// this queue's record, so its revision counts the writes.
func TestLevelRegistryWritesOncePerLevel_PRI003(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	a := jobstore.New(nc, js, assets)
	b := jobstore.New(nc, js, assets)
	job := func(prio int) *ojs.Job {
		j := &ojs.Job{ID: nuid.Next(), Type: "r.t", Queue: "rq", Priority: prio}
		j.Internal.Token = jobstore.NewToken()
		return j
	}
	for range 10 {
		for _, st := range []*jobstore.Store{a, b} {
			for _, p := range []int{3, 1} {
				if err := st.PublishReady(ctx, job(p)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	batch := []*ojs.Job{job(3), job(7), job(7), job(1)}
	if err := b.PublishReadyBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := a.GetQueue(ctx, "rq")
	if err != nil {
		t.Fatal(err)
	}
	// Created with level 3, then levels 1 and 7 added.
	if !slices.Equal(rec.Levels, []int{1, 3, 7}) || rec.Rev != 3 {
		t.Fatalf("record levels %v at revision %d, want [1 3 7] written 3 times", rec.Levels, rec.Rev)
	}
	if got := b.Levels("rq"); !slices.Equal(got, []int{1, 3, 7}) {
		t.Fatalf("levels known to the second store: %v", got)
	}
	// The levels stay out of the queue's API view.
	if rec.QueueInfo != (ojs.QueueInfo{Name: "rq", Status: ojs.QueueActive, CreatedAt: rec.CreatedAt}) {
		t.Fatalf("queue info %+v", rec.QueueInfo)
	}
}

// Upgrade: levels holding ready messages of the layout before per-job
// subjects (ojs.ready.<queue>.<priority>) are registered by
// RegisterLegacyLevels, and no others.
func TestRegisterLegacyLevels(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	for _, subj := range []string{topology.ReadyLegacySubject("old", 4), topology.ReadyLegacySubject("old", 9), topology.ReadySubject("new", 2, "j1")} {
		if _, err := js.Publish(ctx, subj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RegisterLegacyLevels(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetQueue(ctx, "old")
	if err != nil || !slices.Equal(rec.Levels, []int{4, 9}) {
		t.Fatalf("queue old: %+v, %v; want levels [4 9]", rec, err)
	}
	if _, err := st.GetQueue(ctx, "new"); err == nil {
		t.Fatal("a queue without legacy messages was registered")
	}
}

// What a fetch that found a queue empty reads from the stream itself
// (admission/visible.go, issue 31 item 7): the last ready message stored
// at a queue, or at one of its levels, with its sequence and level, and
// the levels holding messages; none for a queue or level holding none.
func TestLastReadyAndStoredLevels_Issue31Item7(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	if seq, _, err := st.LastReady(ctx, "lr", -1); err != nil || seq != 0 {
		t.Fatalf("empty queue: %d, %v", seq, err)
	}
	var seqs []uint64
	for _, p := range []int{5, 2, 5} {
		j := &ojs.Job{ID: nuid.Next(), Type: "r.t", Queue: "lr", Priority: p}
		j.Internal.Token = jobstore.NewToken()
		if err := st.PublishReady(ctx, j); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, st.PublishedSeq("lr", p))
	}
	for _, c := range []struct {
		prio, level int
		seq         uint64
	}{{-1, 5, seqs[2]}, {5, 5, seqs[2]}, {2, 2, seqs[1]}, {7, 0, 0}} {
		seq, level, err := st.LastReady(ctx, "lr", c.prio)
		if err != nil || seq != c.seq || (seq != 0 && level != c.level) {
			t.Fatalf("LastReady(lr, %d) = %d at level %d, %v; want %d at level %d", c.prio, seq, level, err, c.seq, c.level)
		}
	}
	if levels, err := st.StoredLevels(ctx, "lr"); err != nil || !slices.Equal(levels, []int{2, 5}) {
		t.Fatalf("StoredLevels(lr) = %v, %v; want [2 5]", levels, err)
	}
	if levels, err := st.StoredLevels(ctx, "none"); err != nil || len(levels) != 0 {
		t.Fatalf("StoredLevels(none) = %v, %v; want none", levels, err)
	}
}
