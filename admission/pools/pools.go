package pools

import (
	"context"
	"errors"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Groups is what pools ask of admission: worker groups and queue stats.
type Groups interface {
	WorkerGroup(ctx context.Context, name string) (*ojs.WorkerGroup, error)
	WorkerGroups(ctx context.Context) ([]ojs.WorkerGroup, error)
	SetWorkerGroup(ctx context.Context, g ojs.WorkerGroup) (*ojs.WorkerGroup, error)
	DeleteWorkerGroup(ctx context.Context, name string) error
	ListQueues(ctx context.Context) ([]ojs.QueueInfo, error)
	QueueStats(ctx context.Context, name string) (*ojs.QueueStats, error)
}

// Workers lists the registry's workers (admission/workers.Registry).
type Workers interface {
	AllWorkers() []ojs.Worker
}

// Pools serves the pool and scheduling endpoints.
type Pools struct {
	groups  Groups
	workers Workers
}

// New returns pools over groups and workers.
func New(groups Groups, workers Workers) (*Pools, error) {
	if groups == nil || workers == nil {
		return nil, errors.New("pools: groups and workers are required")
	}
	return &Pools{groups: groups, workers: workers}, nil
}

// ListPools lists the pools by name, each with its live workers and their
// active jobs (10.1, FS-004).
func (p *Pools) ListPools(ctx context.Context) ([]ojs.Pool, error) {
	gs, err := p.groups.WorkerGroups(ctx)
	if err != nil {
		return nil, err
	}
	ws := p.workers.AllWorkers()
	out := make([]ojs.Pool, 0, len(gs))
	for _, g := range gs {
		out = append(out, withWorkers(g, ws))
	}
	return out, nil
}

// Pool returns one pool.
func (p *Pools) Pool(ctx context.Context, name string) (*ojs.Pool, error) {
	g, err := p.groups.WorkerGroup(ctx, name)
	if err != nil {
		return nil, err
	}
	pl := withWorkers(*g, p.workers.AllWorkers())
	return &pl, nil
}

// SetPool creates or replaces a pool; its strategy defaults to
// round-robin (6.1).
func (p *Pools) SetPool(ctx context.Context, g ojs.WorkerGroup) (*ojs.Pool, error) {
	if g.Strategy == "" {
		g.Strategy = ojs.StrategyRoundRobin
	}
	saved, err := p.groups.SetWorkerGroup(ctx, g)
	if err != nil {
		return nil, err
	}
	pl := withWorkers(*saved, p.workers.AllWorkers())
	return &pl, nil
}

// DeletePool removes a pool.
func (p *Pools) DeletePool(ctx context.Context, name string) error {
	return p.groups.DeleteWorkerGroup(ctx, name)
}

// withWorkers is pool g with the live (not stale) workers that belong to
// it and their active jobs.
func withWorkers(g ojs.WorkerGroup, ws []ojs.Worker) ojs.Pool {
	pl := ojs.Pool{WorkerGroup: g}
	for _, w := range ws {
		if w.Pool == g.Name && !w.Stale {
			pl.ActiveWorkers++
			pl.ActiveJobs += w.ActiveJobs
		}
	}
	return pl
}

// SchedulingStats reports, per queue, the jobs dispatched (started) in
// the last minute, their share of all dispatches, their average wait and
// the queue's active jobs (10.2, FS-R004), counted across every jetgate
// process from the shared stats stream.
func (p *Pools) SchedulingStats(ctx context.Context) (*ojs.SchedulingStats, error) {
	qs, err := p.groups.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := &ojs.SchedulingStats{Queues: make([]ojs.QueueDispatch, 0, len(qs)), Window: "PT1M"}
	var total int64
	for _, q := range qs {
		st, err := p.groups.QueueStats(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		d := ojs.QueueDispatch{Name: q.Name, DispatchCount1m: st.Stats.StartedLastMinute, ActiveJobs: st.Stats.Active}
		if d.DispatchCount1m > 0 {
			d.AvgWaitMs = st.Stats.WaitMsLastMinute / d.DispatchCount1m
		}
		total += d.DispatchCount1m
		out.Queues = append(out.Queues, d)
	}
	for i := range out.Queues {
		if total > 0 {
			out.Queues[i].DispatchRatio1m = float64(out.Queues[i].DispatchCount1m) / float64(total)
		}
	}
	return out, nil
}
