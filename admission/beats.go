package admission

import (
	"context"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// beatBook remembers the last sign of life (start, heartbeat, progress) of
// the active jobs this process has seen, for the ojs.job.heartbeat.age
// gauge only: enforcement never reads it (timeouts.go). A job that ends in
// another process is forgotten once it is older than twice its heartbeat
// timeout, by which time it has stalled or moved on.
type beatBook struct {
	mu sync.Mutex
	m  map[string]beatEntry
}

type beatEntry struct {
	queue  string
	at     time.Time
	window time.Duration
}

func (b *beatBook) beat(id, queue string, window time.Duration, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]beatEntry{}
	}
	b.m[id] = beatEntry{queue: queue, at: now, window: window}
}

// start records the start of active job j.
func (b *beatBook) start(j *ojs.Job, now time.Time) {
	b.beat(j.ID, j.Queue, time.Duration(j.Internal.BeatMs)*time.Millisecond, now)
}

// done forgets a job that left active.
func (b *beatBook) done(id string) {
	b.mu.Lock()
	delete(b.m, id)
	b.mu.Unlock()
}

// ages returns the longest silence per queue.
func (b *beatBook) ages(now time.Time) map[string]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]time.Duration{}
	for id, e := range b.m {
		age := now.Sub(e.at)
		if age > 2*e.window {
			delete(b.m, id)
			continue
		}
		out[e.queue] = max(out[e.queue], age)
	}
	return out
}

// HeartbeatAges reports, per queue, the longest time since the last
// heartbeat among the active jobs this process knows of
// (ojs.job.heartbeat.age).
func (s *Service) HeartbeatAges(context.Context) map[string]time.Duration {
	return s.beats.ages(s.now())
}
