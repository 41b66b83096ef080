package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// queueCache mirrors bucket OJS_QUEUES through a KV watch, so pause checks
// on the enqueue and fetch paths cost no round trip. It is only a cache:
// the bucket is the truth, and every process sees a change within the
// watch's delivery latency.
type queueCache struct {
	store *jobstore.Store
	log   *slog.Logger
	now   func() time.Time

	mu     sync.RWMutex
	queues map[string]*jobstore.QueueRecord
}

func newQueueCache(store *jobstore.Store, log *slog.Logger, now func() time.Time) *queueCache {
	return &queueCache{store: store, log: log, now: now, queues: map[string]*jobstore.QueueRecord{}}
}

// start loads every queue, then follows changes until runCtx ends.
func (c *queueCache) start(ctx, runCtx context.Context, wg *sync.WaitGroup) error {
	w, err := c.store.WatchQueues(runCtx)
	if err != nil {
		return err
	}
	if err := jobstore.FollowKV(ctx, runCtx, wg, w, c.apply); err != nil {
		return fmt.Errorf("load queues: %w", err)
	}
	// Ready messages of the layout before per-job subjects were published
	// without registering their level (jobstore/registry.go).
	return c.store.RegisterLegacyLevels(ctx)
}

func (c *queueCache) apply(e jetstream.KeyValueEntry) {
	name, err := topology.Untoken(e.Key())
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(c.queues, name)
		return
	}
	q, err := jobstore.DecodeQueue(e)
	if err != nil {
		c.log.Warn("bad queue record", "queue", name, "error", err)
		return
	}
	// The levels a queue has used, registered by any process, are the
	// levels a fetch asks (jobstore/registry.go).
	c.store.KnowLevels(name, q.Levels)
	if old, ok := c.queues[name]; ok && old.Rev > q.Rev {
		return
	}
	c.queues[name] = q
}

func (c *queueCache) get(name string) (*jobstore.QueueRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q, ok := c.queues[name]
	return q, ok
}

func (c *queueCache) put(q *jobstore.QueueRecord) {
	c.store.KnowLevels(q.Name, q.Levels)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.queues[q.Name]; ok && old.Rev > q.Rev {
		return
	}
	c.queues[q.Name] = q
}

func (c *queueCache) paused(name string) bool {
	q, ok := c.get(name)
	return ok && q.Status == ojs.QueuePaused
}

// admit registers a queue on first use. A paused queue admits jobs too:
// pause stops delivery only (spec/README.md decision 7), so its jobs wait
// as available until it is resumed.
func (c *queueCache) admit(ctx context.Context, name string) error {
	if _, ok := c.get(name); ok {
		return nil
	}
	q, err := c.store.CreateQueue(ctx, ojs.QueueInfo{Name: name, Status: ojs.QueueActive, CreatedAt: ojs.NewTime(c.now())})
	if err != nil {
		return err
	}
	c.put(q)
	return nil
}

func (c *queueCache) list() []ojs.QueueInfo {
	c.mu.RLock()
	out := make([]ojs.QueueInfo, 0, len(c.queues))
	for _, q := range c.queues {
		out = append(out, q.QueueInfo)
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b ojs.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ListQueues lists every known queue by name.
func (s *Service) ListQueues(ctx context.Context) ([]ojs.QueueInfo, error) {
	return s.queues.list(), nil
}

// PauseQueue stops fetches from a queue; enqueues are still accepted and
// wait as available (spec/README.md decision 7). A queue that does not
// exist yet is created paused.
func (s *Service) PauseQueue(ctx context.Context, name string) (*ojs.QueueInfo, error) {
	q, changed, err := s.setQueueStatus(ctx, name, ojs.QueuePaused)
	if err == nil && changed {
		s.events.PublishQueue(EventQueuePaused, name, "api")
	}
	return q, err
}

// ResumeQueue undoes PauseQueue.
func (s *Service) ResumeQueue(ctx context.Context, name string) (*ojs.QueueInfo, error) {
	q, changed, err := s.setQueueStatus(ctx, name, ojs.QueueActive)
	if err == nil && changed {
		s.events.PublishQueue(EventQueueResumed, name, "api")
	}
	return q, err
}

func (s *Service) setQueueStatus(ctx context.Context, name, status string) (*ojs.QueueInfo, bool, error) {
	q, changed, err := s.updateQueue(ctx, name, func(q *jobstore.QueueRecord) bool {
		if q.Status == status {
			return false
		}
		q.Status = status
		if status == ojs.QueuePaused {
			q.PausedAt = ojs.NewTime(s.now())
		} else {
			q.ResumedAt = ojs.NewTime(s.now())
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return &q.QueueInfo, changed, nil
}

// updateQueue changes a queue's record with fn, creating the queue first
// if it does not exist, as one compare-and-swap (retried on conflict); fn
// reports whether it changed anything. The cache is updated either way.
func (s *Service) updateQueue(ctx context.Context, name string, fn func(*jobstore.QueueRecord) bool) (*jobstore.QueueRecord, bool, error) {
	for range maxCASRetries {
		q, err := s.store.CreateQueue(ctx, ojs.QueueInfo{Name: name, Status: ojs.QueueActive, CreatedAt: ojs.NewTime(s.now())})
		if err != nil {
			return nil, false, err
		}
		if !fn(q) {
			s.queues.put(q)
			return q, false, nil
		}
		if err := s.store.UpdateQueue(ctx, q); err != nil {
			if errors.Is(err, jobstore.ErrConflict) {
				continue
			}
			return nil, false, err
		}
		s.queues.put(q)
		return q, true, nil
	}
	return nil, false, fmt.Errorf("%w: queue %s kept changing", ojs.ErrConflict, name)
}
