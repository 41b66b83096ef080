package ojs

import (
	"encoding/json"
	"sync"
	"testing"
)

// Issue 31: a fetch's byte budget takes a job only when it fits, is full
// from the first job refused, gives back what a job not claimed took, and
// holds under concurrent claims; nil is no bound.
func TestFetchBudget(t *testing.T) {
	t.Parallel()
	b := NewFetchBudget(100)
	if !b.Take(60) || b.Left() != 40 || b.Full() || b.Average() != 60 {
		t.Fatalf("after taking 60 of 100: left %d, full %v, average %d", b.Left(), b.Full(), b.Average())
	}
	if b.Take(41) || !b.Full() || b.Left() != 40 {
		t.Fatalf("41 more fitted 40: left %d, full %v", b.Left(), b.Full())
	}
	if b.Take(10) {
		t.Fatal("a full budget took a smaller job after refusing one")
	}
	b.Give(60)
	if b.Left() != 100 || b.Average() != 0 || !b.Full() {
		t.Fatalf("after giving 60 back: left %d, average %d, full %v (full stays)", b.Left(), b.Average(), b.Full())
	}
	var nilb *FetchBudget
	if !nilb.Take(1<<40) || nilb.Full() || nilb.Left() != -1 {
		t.Fatal("a nil budget bounds something")
	}
	nilb.Give(1)
	nilb.Refuse()

	c := NewFetchBudget(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	took := 0
	for range 50 {
		wg.Go(func() {
			if c.Take(30) {
				mu.Lock()
				took++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if took != 33 || c.Left() != 10 || !c.Full() {
		t.Fatalf("50 concurrent takes of 30 from 1000: %d took, %d left, full %v; want 33, 10, true", took, c.Left(), c.Full())
	}
}

// ReplySize is the length of the job's public JSON (no x_jetgate) and a
// comma.
func TestReplySize(t *testing.T) {
	t.Parallel()
	j := &Job{SpecVersion: "1.0", ID: "j1", Type: "a.b", Queue: "q", Args: json.RawMessage(`["x"]`), State: StateActive}
	j.Internal.Token = "some-token"
	pub, _ := j.AppendPublicJSON(nil)
	full, _ := j.AppendJSON(nil)
	n, err := ReplySize(j)
	if err != nil || n != int64(len(pub))+1 || len(full) <= len(pub) {
		t.Fatalf("ReplySize %d, %v; public JSON %d bytes, record %d", n, err, len(pub), len(full))
	}
}
