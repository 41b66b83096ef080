package admin

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// AdminStats is GET /ojs/v1/admin/stats (ojs-admin-api.md 10.1): the jobs of
// every queue per state, from the counters (a direct get per queue and
// state), the number of queues and workers, the throughput of the last
// minute from the activity samples (issue 32: admin dashboards read
// throughput.processed_per_minute) and the process's uptime.
func (a *Admin) AdminStats(ctx context.Context) (*ojs.AdminStats, error) {
	qs, err := a.svc.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := &ojs.AdminStats{Queues: len(qs), Jobs: zeroCounts()}
	for _, q := range qs {
		if q.Status == ojs.QueuePaused {
			out.PausedQueues++
		}
		c, err := a.svc.StateCounts(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		for st, n := range c {
			out.Jobs[st] += n
		}
	}
	if out.Throughput, err = a.svc.Throughput(ctx); err != nil {
		return nil, err
	}
	if a.cfg.Workers != nil {
		out.Workers = len(a.cfg.Workers.AllWorkers())
	}
	out.UptimeSeconds = a.svc.Health(ctx).UptimeSeconds
	out.ComputedAt = ojs.NewTime(a.cfg.Clock())
	return out, nil
}

func zeroCounts() map[ojs.State]int64 {
	m := make(map[ojs.State]int64, len(ojs.States))
	for _, st := range ojs.States {
		m[st] = 0
	}
	return m
}

// AdminQueues is GET /ojs/v1/admin/queues (6.1): every known queue by name, one
// page, each with its counts, pause state and bounds. Counts are read for
// the queues of the page only.
func (a *Admin) AdminQueues(ctx context.Context, page, perPage int) (*ojs.AdminQueueList, error) {
	if perPage <= 0 {
		perPage = DefaultPerPage
	}
	perPage = min(perPage, MaxPerPage)
	page = max(page, 1)
	qs, err := a.svc.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	total := int64(len(qs))
	out := &ojs.AdminQueueList{Items: []ojs.AdminQueue{},
		Pagination: ojs.AdminPagination{Total: &total, Page: page, PerPage: perPage}}
	from := min((page-1)*perPage, len(qs))
	to := min(from+perPage, len(qs))
	out.Pagination.HasMore = to < len(qs)
	for _, q := range qs[from:to] {
		aq, err := a.queue(ctx, q)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *aq)
	}
	return out, nil
}

// AdminQueue is GET /ojs/v1/admin/queues/{name} (6.2).
func (a *Admin) AdminQueue(ctx context.Context, name string) (*ojs.AdminQueue, error) {
	qs, err := a.svc.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.Name == name {
			return a.queue(ctx, q)
		}
	}
	return nil, &ojs.NotFoundError{Resource: "queue", ID: name}
}

func (a *Admin) queue(ctx context.Context, q ojs.QueueInfo) (*ojs.AdminQueue, error) {
	c, err := a.svc.StateCounts(ctx, q.Name)
	if err != nil {
		return nil, err
	}
	counts := zeroCounts()
	for st, n := range c {
		counts[st] = n
	}
	aq := &ojs.AdminQueue{Name: q.Name, State: q.Status, Paused: q.Status == ojs.QueuePaused, Counts: counts,
		RateLimit: q.RateLimit, Aging: q.Aging, CreatedAt: q.CreatedAt, PausedAt: q.PausedAt, ResumedAt: q.ResumedAt}
	if aq.Paused {
		aq.ResumedAt = nil
	} else {
		aq.PausedAt = nil
	}
	cfg, err := a.svc.QueueConfig(ctx, q.Name)
	if err != nil {
		return nil, err
	}
	aq.Backpressure, aq.BoundSource = cfg.Backpressure, cfg.Source
	return aq, nil
}

// DeadLetterStats is GET /ojs/v1/dead-letter/stats (ojs-dead-letter.md
// 10.1): the discarded jobs in all and per queue, from the counters, and
// how long they are kept.
func (a *Admin) DeadLetterStats(ctx context.Context) (*ojs.DeadLetterStats, error) {
	qs, err := a.svc.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := &ojs.DeadLetterStats{ByQueue: map[string]int64{}, ComputedAt: ojs.NewTime(a.cfg.Clock())}
	for _, q := range qs {
		c, err := a.svc.StateCounts(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		if n := c[ojs.StateDiscarded]; n > 0 {
			out.ByQueue[q.Name] = n
			out.Total += n
		}
	}
	if a.cfg.DeadRetention > 0 {
		out.Retention = &ojs.DeadRetention{MaxAge: ojs.FormatISODuration(a.cfg.DeadRetention)}
	}
	return out, nil
}
