package admission

import (
	"context"
	"sync"
	"time"
)

// DefaultFetchWait is how long a fetch that found nothing waits for a
// job made ready by this process before it answers empty (Config.FetchWait).
// ojs-core.md lets an empty FETCH block briefly; workers poll, and an empty
// answer that comes back at once only makes them ask again. Jobs made
// ready by other jetgate processes do not wake it: the fetch looked for
// those before it waited (visible.go), and answers empty after the wait.
const DefaultFetchWait = 10 * time.Millisecond

// readyNotify wakes fetches waiting on a queue when this process makes a
// job of it ready. Each queue has a channel closed (and replaced) at every
// such job; "" is the channel of every queue, for multi-queue fetches.
type readyNotify struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func newReadyNotify() *readyNotify { return &readyNotify{ch: map[string]chan struct{}{}} }

// channel returns the channel closed at the next job made ready in queue
// ("" for any queue).
func (n *readyNotify) channel(queue string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.ch[queue]
	if !ok {
		c = make(chan struct{})
		n.ch[queue] = c
	}
	return c
}

// ready wakes the fetches waiting on queue.
func (n *readyNotify) ready(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range []string{queue, ""} {
		if c, ok := n.ch[k]; ok {
			close(c)
			delete(n.ch, k)
		}
	}
}

// waitReady waits until c is closed, d passes or ctx ends, and reports
// whether c was closed.
func waitReady(ctx context.Context, c <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
