package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 7, decided in visible.go: messages a process pulled ahead
// of its own fetches are available jobs, and a fetch of another process
// that finds the queue empty gets them at once, oldest first, rather than
// after the holder's sweep (aheadFor, a minute here) or the consumer's
// AckWait. The holder listens for give-backs only while it may hold
// messages ahead, and takes no more ahead until a pull gets all it asks
// for again.
func TestFetchGetsWhatAnotherProcessHoldsAhead_Issue31Item7(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	srv := natstest.RunServer(t)
	a, _ := startedService(t, ctx, srv, heldLong)
	b, bnc := startedService(t, ctx, srv, Config{FetchWait: -1})
	enqueueN(t, ctx, a, "gb", 2, 0, 12)
	taken := len(fetchN(t, ctx, a, "gb", 3)) + len(fetchN(t, ctx, a, "gb", 3))
	held := aheadOf(a, "gb")
	if taken != 6 || held != 6 {
		t.Fatalf("a fetched %d and holds %d ahead; want 6 and 6 (the setup of this test)", taken, held)
	}
	if _, err := bnc.Request(topology.AheadSubject("gb"), nil, 5*time.Second); errors.Is(err, nats.ErrNoResponders) {
		t.Fatal("a holds messages ahead and does not listen for give-backs")
	}
	// That request was a give-back: ask a to pull ahead again.
	if got := len(fetchN(t, ctx, a, "gb", 1)) + len(fetchN(t, ctx, a, "gb", 2)); got != 3 {
		t.Fatalf("a fetched %d, want 3", got)
	}
	if aheadOf(a, "gb") == 0 {
		t.Fatal("a holds nothing ahead again: the rest of this test would not test anything")
	}
	jobs := fetchN(t, ctx, b, "gb", 12)
	if len(jobs) != 3 {
		t.Fatalf("b fetched %d jobs while a held the queue's last 3 ahead; want 3", len(jobs))
	}
	for i, j := range jobs {
		if got := argOf(t, j); got != 9+i {
			t.Fatalf("b's job %d is job %d, want %d (oldest first, PRI-003)", i, got, 9+i)
		}
	}
	if h := aheadOf(a, "gb"); h != 0 {
		t.Fatalf("a still holds %d ahead after giving them back", h)
	}
	if _, err := bnc.Request(topology.AheadSubject("gb"), nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a holds nothing ahead and still listens: %v", err)
	}
	p := a.puller("gb")
	p.mu.Lock()
	again := p.pulledAll
	p.mu.Unlock()
	if again {
		t.Fatal("a would pull ahead again at once after giving back")
	}
}

// A give-back that comes while a pull that may keep messages ahead is
// under way answers only once that pull landed: run keeps none of its
// messages then (yields changed) and puts them back first, so the fetch
// that asked finds them when it pulls again.
func TestGiveBackWaitsForThePullUnderWay_Issue31Item7(t *testing.T) {
	t.Parallel()
	ctx := minuteCtx(t)
	s, _ := startedService(t, ctx, natstest.RunServer(t), heldLong)
	p := s.puller("gbw")
	p.mu.Lock()
	p.aheadPull = true // a pull ahead is under way
	yields := p.yields
	p.mu.Unlock()
	done := make(chan int)
	go func() { done <- p.giveBack() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		waiting := len(p.landed)
		p.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the give-back did not wait for the pull under way")
		}
	}
	select {
	case <-done:
		t.Fatal("the give-back answered before the pull under way landed")
	default:
	}
	p.mu.Lock()
	if p.yields == yields {
		t.Error("the give-back left yields as it was: the pull under way would keep its messages ahead")
	}
	landed := p.landLocked()
	p.mu.Unlock()
	closeAll(landed)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the give-back did not answer after the pull landed")
	}
}
