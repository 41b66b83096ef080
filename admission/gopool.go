package admission

import (
	"sync"
	"sync/atomic"
	"time"
)

// goPool runs short tasks on goroutines that outlive a task, as the
// claims of a fetch are run. A claim's write goes deep into nats.go, so a
// new goroutine grew its stack (newstack, copystack) on every claim: 16%
// of the claims' CPU in a drain's profile (docs/performance.md). A task
// goes to an idle goroutine of the pool when one is waiting, else to a
// new one, which then waits up to idle for the next task and exits. So
// the pool is as large as the claims in flight at the busiest moment of
// the last idle period, and empty when fetches stop.
//
// The Service owns the pool: Stop closes it and waits for its goroutines.
// A task run after that gets a goroutine of its own, owned by its caller
// (claimAll waits for its claims), so fetches in flight at Stop finish.
// claimerIdle is how long a claimer waits for the next claim: a worker's
// next fetch comes within milliseconds while it is busy.
const claimerIdle = 5 * time.Second

type goPool struct {
	idle  time.Duration
	tasks chan func() // unbuffered: a send succeeds only into an idle goroutine

	// For tests: goroutines started, alive, and waiting for a task.
	spawned, live, waiting atomic.Int64

	mu     sync.Mutex
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

func newGoPool(idle time.Duration) *goPool {
	return &goPool{idle: idle, tasks: make(chan func()), done: make(chan struct{})}
}

// run runs f on a goroutine and returns at once.
func (p *goPool) run(f func()) {
	select {
	case p.tasks <- f:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go f()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	p.spawned.Add(1)
	p.live.Add(1)
	go p.loop(f)
}

func (p *goPool) loop(f func()) {
	defer p.wg.Done()
	defer p.live.Add(-1)
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		t.Reset(p.idle)
		p.waiting.Add(1)
		select {
		case f = <-p.tasks:
			p.waiting.Add(-1)
		case <-t.C:
			p.waiting.Add(-1)
			return
		case <-p.done:
			p.waiting.Add(-1)
			return
		}
	}
}

// close stops the idle goroutines and waits for every goroutine of the
// pool to finish its task. Safe to call twice.
func (p *goPool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
