package admission

import (
	"sync"
	"time"
)

// DefaultFetchWait is how long a fetch that found nothing waits for a
// job made ready by this process before it answers empty (Config.FetchWait).
// ojs-core.md lets an empty FETCH block briefly; workers poll, and an empty
// answer that comes back at once only makes them ask again. A fetch woken
// by a job another fetch took first waits on. Jobs made ready by other
// jetgate processes do not wake it: once the wait is over, the fetch looks
// for those (visible.go) before it answers empty.
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
