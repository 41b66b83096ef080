package admission

import (
	"sync"
	"testing"
	"time"
)

// The pool runs tasks concurrently, reuses an idle goroutine rather than
// starting one per task, lets idle ones go, and, once closed, has waited
// for its tasks and still runs new ones.
func TestGoPool(t *testing.T) {
	p := newGoPool(time.Minute)

	// Concurrent: 20 tasks that each wait for all the others.
	var all sync.WaitGroup
	all.Add(20)
	var done sync.WaitGroup
	for range 20 {
		done.Add(1)
		p.run(func() {
			defer done.Done()
			all.Done()
			all.Wait()
		})
	}
	done.Wait()
	if n := p.spawned.Load(); n != 20 {
		t.Fatalf("%d goroutines for 20 tasks running at once", n)
	}

	// Reused: one task at a time goes to an idle goroutine.
	for range 50 {
		ran := make(chan struct{})
		deadline := time.Now().Add(10 * time.Second)
		for p.waiting.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		p.run(func() { close(ran) })
		<-ran
	}
	if n := p.spawned.Load(); n != 20 {
		t.Fatalf("%d goroutines after 50 more tasks one at a time, want the 20 reused", n)
	}

	// Close waits for a task in progress: the task ends only once close
	// has begun, so a close that did not wait returns before it.
	var finished bool
	var mu sync.Mutex
	p.run(func() {
		for closing := false; !closing; {
			time.Sleep(time.Millisecond)
			p.mu.Lock()
			closing = p.closed
			p.mu.Unlock()
		}
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		finished = true
		mu.Unlock()
	})
	p.close()
	mu.Lock()
	if !finished {
		t.Fatal("close returned before a running task finished")
	}
	mu.Unlock()

	// After close a task still runs, on a goroutine of its own.
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a task run after close never ran")
	}
	p.close() // twice is fine
}

// An idle goroutine leaves after the idle period.
func TestGoPoolIdleGoroutinesLeave(t *testing.T) {
	p := newGoPool(10 * time.Millisecond)
	defer p.close()
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	<-ran
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p.spawned.Load() == 1 && p.live.Load() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle goroutine stayed past its idle period")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
