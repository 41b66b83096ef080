package admission

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Worker groups: server-level defaults of queue consumption (strategy,
// queues, weights) kept in bucket OJS_GROUPS and shared by every jetgate
// process. A fetch that names a group takes from it what it leaves out
// (ojs.FetchRequest.ApplyGroup).

// groupCache mirrors OJS_GROUPS through a KV watch so that fetches naming
// a group cost no round trip. It is only a cache: a group it does not hold
// is read from the bucket, so a group written by another process is used
// at once, and a change or removal reaches it within the watch's latency.
type groupCache struct {
	store *jobstore.Store
	log   *slog.Logger

	mu     sync.RWMutex
	groups map[string]*ojs.WorkerGroup
}

func newGroupCache(store *jobstore.Store, log *slog.Logger) *groupCache {
	return &groupCache{store: store, log: log, groups: map[string]*ojs.WorkerGroup{}}
}

// start follows the bucket until runCtx ends; wg owns the goroutine.
func (c *groupCache) start(runCtx context.Context, wg *sync.WaitGroup) error {
	w, err := c.store.WatchGroups(runCtx)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-runCtx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					c.apply(e)
				}
			}
		}
	}()
	return nil
}

func (c *groupCache) apply(e jetstream.KeyValueEntry) {
	name, err := topology.Untoken(e.Key())
	if err != nil {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		c.drop(name)
		return
	}
	g, err := jobstore.DecodeGroup(e)
	if err != nil {
		c.log.Warn("bad worker group record", "group", name, "error", err)
		return
	}
	c.put(g)
}

func (c *groupCache) put(g *ojs.WorkerGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups[g.Name] = g
}

func (c *groupCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.groups, name)
}

// get returns a group from the cache, else from the bucket.
func (c *groupCache) get(ctx context.Context, name string) (*ojs.WorkerGroup, error) {
	c.mu.RLock()
	g, ok := c.groups[name]
	c.mu.RUnlock()
	if ok {
		return g, nil
	}
	g, err := c.store.GetGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	c.put(g)
	return g, nil
}

// cached returns a group only from the cache.
func (c *groupCache) cached(name string) (*ojs.WorkerGroup, bool) {
	if name == "" {
		return nil, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	g, ok := c.groups[name]
	return g, ok
}

func (c *groupCache) list() []ojs.WorkerGroup {
	c.mu.RLock()
	out := make([]ojs.WorkerGroup, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, *g)
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b ojs.WorkerGroup) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// WorkerGroup returns a worker group.
func (s *Service) WorkerGroup(ctx context.Context, name string) (*ojs.WorkerGroup, error) {
	return s.groups.get(ctx, name)
}

// WorkerGroups lists the worker groups, by name, as this process's cache
// holds them.
func (s *Service) WorkerGroups(ctx context.Context) ([]ojs.WorkerGroup, error) {
	return s.groups.list(), nil
}

// SetWorkerGroup creates or replaces a worker group.
func (s *Service) SetWorkerGroup(ctx context.Context, g ojs.WorkerGroup) (*ojs.WorkerGroup, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	g.Queues = slices.Clone(g.Queues)
	if len(g.Weights) == 0 {
		g.Weights = nil
	}
	g.UpdatedAt = ojs.NewTime(s.now())
	if err := s.store.PutGroup(ctx, &g); err != nil {
		return nil, err
	}
	s.groups.put(&g)
	s.log.Info("worker group set", "group", g.Name, "strategy", g.Strategy, "queues", g.Queues)
	return &g, nil
}

// DeleteWorkerGroup removes a worker group; fetches naming it then fail
// with not found.
func (s *Service) DeleteWorkerGroup(ctx context.Context, name string) error {
	if err := s.store.DeleteGroup(ctx, name); err != nil {
		return err
	}
	s.groups.drop(name)
	return nil
}

// withGroup applies the fetch's worker group, if it names one, else its
// worker's pool if this process's cache holds it (no round trip).
func (s *Service) withGroup(ctx context.Context, req ojs.FetchRequest) (ojs.FetchRequest, error) {
	if req.Group == "" {
		if g, ok := s.groups.cached(req.Pool); ok {
			return req.ApplyGroup(g), nil
		}
		return req, nil
	}
	g, err := s.groups.get(ctx, req.Group)
	if err != nil {
		return req, err
	}
	return req.ApplyGroup(g), nil
}
