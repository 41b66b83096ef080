package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Snapshot is what the dashboard shows at one moment: GET
// /dashboard/snapshot answers it and the stream sends it every Interval.
// Each part is read through Backend; a part that fails is left empty and
// named in Errors, so one failing read never blanks the page.
type Snapshot struct {
	GeneratedAt time.Time `json:"generated_at"`
	// TookMicros is how long the snapshot took to read.
	TookMicros int64  `json:"took_us"`
	Server     Server `json:"server"`
	Totals     Totals `json:"totals"`
	// Queues are the known queues by name, at most MaxQueues of them;
	// QueuesOmitted counts the others.
	Queues        []Queue `json:"queues"`
	QueuesOmitted int     `json:"queues_omitted"`
	// RateLimits are the rate-limit keys (job keys and queue-level
	// limits, as GET /ojs/v1/rate-limits lists them), at most MaxKeys;
	// RateLimitsOmitted counts the others.
	RateLimits        []ojs.RateLimitStatus `json:"rate_limits"`
	RateLimitsOmitted int                   `json:"rate_limits_omitted"`
	// Events are the most recent events, newest first (GET
	// /ojs/v1/events: without --events-stream only those published since
	// the capture started, see package events).
	Events []ojs.Event `json:"events"`
	Errors []string    `json:"errors,omitempty"`
}

// MarshalJSON encodes s with empty lists as [] rather than null.
func (s *Snapshot) MarshalJSON() ([]byte, error) {
	type plain Snapshot
	c := plain(*s)
	c.Queues = nonNil(c.Queues)
	c.RateLimits = nonNil(c.RateLimits)
	c.Events = nonNil(c.Events)
	return json.Marshal(c)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Server is the process's view of itself (GET /ojs/v1/health).
type Server struct {
	Version       string `json:"version"`
	Status        string `json:"status"`
	Backend       string `json:"backend_status"`
	LatencyMs     int64  `json:"backend_latency_ms"`
	UptimeSeconds int64  `json:"uptime_seconds"`
}

// Totals add up the shown queues and keys.
type Totals struct {
	Queues       int                 `json:"queues"`
	PausedQueues int                 `json:"paused_queues"`
	Jobs         map[ojs.State]int64 `json:"jobs"`
	// Waiting is the number of jobs parked on the shown rate limits.
	Waiting int `json:"waiting"`
}

// Queue is one row of the queue table.
type Queue struct {
	Name   string              `json:"name"`
	Paused bool                `json:"paused"`
	Counts map[ojs.State]int64 `json:"counts"`
	// Depth is available + scheduled + retryable + pending, plus active
	// when the bound counts active jobs (ojs-backpressure.md 3), from the
	// queue's counters.
	Depth int64 `json:"depth"`
	// Bound is the queue's backpressure bound, nil when unbounded.
	Bound *Bound `json:"bound,omitempty"`
	// Pressure is Depth / Bound.MaxDepth, for a queue bounded by depth.
	Pressure *float64 `json:"pressure,omitempty"`
	// Priorities are the available jobs per priority level, lowest level
	// (served first) first.
	Priorities []Level `json:"priorities"`
	// RateLimit is the queue-level rate limit, if any.
	RateLimit *ojs.Limits `json:"rate_limit,omitempty"`
	Aging     *ojs.Aging  `json:"aging,omitempty"`
	CreatedAt *ojs.Time   `json:"created_at,omitempty"`
	PausedAt  *ojs.Time   `json:"paused_at,omitempty"`
	// Error names a read of this queue that failed.
	Error string `json:"error,omitempty"`
}

// Bound is a queue's backpressure bound and where it comes from (queue:
// its own; default: the server-wide --queue-max-depth).
type Bound struct {
	MaxDepth         int64   `json:"max_depth,omitempty"`
	MaxSizeBytes     int64   `json:"max_size_bytes,omitempty"`
	Strategy         string  `json:"strategy"`
	WarningThreshold float64 `json:"warning_threshold"`
	CountActive      bool    `json:"count_active,omitempty"`
	Source           string  `json:"source"`
}

// Level is the number of available jobs at one priority level.
type Level struct {
	Priority int   `json:"priority"`
	Count    int64 `json:"count"`
}

// Snapshot reads everything the dashboard shows: the queues (counts,
// bound and priority levels of each, Concurrency at a time), the
// rate-limit keys and the server's health at once, and the recent events.
func (d *Dashboard) Snapshot(ctx context.Context) *Snapshot {
	s := d.state(ctx)
	evs, err := d.recentEvents(ctx)
	if err != nil {
		s.Errors = append(s.Errors, "events: "+err.Error())
	}
	s.Events = evs
	s.TookMicros = time.Since(s.GeneratedAt).Microseconds()
	return s
}

// state reads everything but the events (the stream's feeder polls them
// on its own).
func (d *Dashboard) state(ctx context.Context) *Snapshot {
	start := time.Now()
	s := &Snapshot{GeneratedAt: start, Totals: Totals{Jobs: map[ojs.State]int64{}}}
	for _, st := range ojs.States {
		s.Totals.Jobs[st] = 0
	}
	var (
		wg     sync.WaitGroup
		health ojs.Health
		page   *ojs.RateLimitPage
		rlErr  error
	)
	wg.Go(func() { health = d.b.Health(ctx) })
	wg.Go(func() { page, rlErr = d.b.RateLimits(ctx, ojs.PageRequest{Limit: d.cfg.MaxKeys}) })
	qErr := d.readQueues(ctx, s)
	wg.Wait()

	s.Server = Server{Version: d.cfg.Version, Status: health.Status, Backend: health.Backend.Status,
		LatencyMs: health.Backend.LatencyMs, UptimeSeconds: health.UptimeSeconds}
	if qErr != nil {
		s.Errors = append(s.Errors, "queues: "+qErr.Error())
	}
	if rlErr != nil {
		s.Errors = append(s.Errors, "rate limits: "+rlErr.Error())
	} else {
		s.RateLimits = page.Items
		s.RateLimitsOmitted = max(0, page.Pagination.Total-len(page.Items))
		for _, k := range page.Items {
			s.Totals.Waiting += k.WaitingCount
		}
	}
	s.TookMicros = time.Since(start).Microseconds()
	return s
}

// readQueues fills s.Queues and the queue totals.
func (d *Dashboard) readQueues(ctx context.Context, s *Snapshot) error {
	infos, err := d.b.ListQueues(ctx)
	if err != nil {
		return err
	}
	infos = slices.Clone(infos)
	slices.SortFunc(infos, func(a, b ojs.QueueInfo) int { return cmp.Compare(a.Name, b.Name) })
	s.Totals.Queues = len(infos)
	for _, q := range infos {
		if q.Status == ojs.QueuePaused {
			s.Totals.PausedQueues++
		}
	}
	if len(infos) > d.cfg.MaxQueues {
		s.QueuesOmitted = len(infos) - d.cfg.MaxQueues
		infos = infos[:d.cfg.MaxQueues]
	}
	s.Queues = make([]Queue, len(infos))
	var wg sync.WaitGroup
	sem := make(chan struct{}, d.cfg.Concurrency)
	for i, q := range infos {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.Queues[i] = d.readQueue(ctx, q)
		})
	}
	wg.Wait()
	for _, q := range s.Queues {
		for st, n := range q.Counts {
			s.Totals.Jobs[st] += n
		}
	}
	return nil
}

// readQueue reads one queue's row: GET /ojs/v1/admin/queues/{name} and
// GET /ojs/v1/queues/{name}/priority-stats.
func (d *Dashboard) readQueue(ctx context.Context, info ojs.QueueInfo) Queue {
	q := Queue{Name: info.Name, Paused: info.Status == ojs.QueuePaused, Counts: map[ojs.State]int64{},
		Priorities: []Level{}, RateLimit: info.RateLimit, CreatedAt: info.CreatedAt, Aging: info.Aging}
	aq, err := d.b.AdminQueue(ctx, info.Name)
	if err != nil {
		q.Error = err.Error()
		return q
	}
	q.Paused, q.Counts, q.PausedAt = aq.Paused, aq.Counts, aq.PausedAt
	countActive := false
	if bp := aq.Backpressure; bp != nil && bp.Bounded() {
		countActive = bp.CountActive
		q.Bound = &Bound{MaxDepth: bp.MaxDepth, MaxSizeBytes: bp.MaxSizeBytes, Strategy: bp.Strategy,
			WarningThreshold: bp.WarningThreshold, CountActive: bp.CountActive, Source: aq.BoundSource}
	}
	c := aq.Counts
	q.Depth = c[ojs.StateAvailable] + c[ojs.StateScheduled] + c[ojs.StateRetryable] + c[ojs.StatePending]
	if countActive {
		q.Depth += c[ojs.StateActive]
	}
	if q.Bound != nil && q.Bound.MaxDepth > 0 {
		p := float64(q.Depth) / float64(q.Bound.MaxDepth)
		q.Pressure = &p
	}
	if c[ojs.StateAvailable] == 0 {
		return q // no available job: every level is empty, skip the read
	}
	ps, err := d.b.PriorityStats(ctx, info.Name)
	if err != nil {
		q.Error = "priority stats: " + err.Error()
		return q
	}
	for name, n := range ps.CountsByPriority {
		if p, err := strconv.Atoi(name); err == nil && n > 0 {
			q.Priorities = append(q.Priorities, Level{Priority: p, Count: n})
		}
	}
	slices.SortFunc(q.Priorities, func(a, b Level) int { return cmp.Compare(a.Priority, b.Priority) })
	return q
}

// recentEvents reads the newest MaxEvents events of every type.
func (d *Dashboard) recentEvents(ctx context.Context) ([]ojs.Event, error) {
	return d.b.RecentEvents(ctx, ojs.EventQuery{Limit: d.cfg.MaxEvents})
}
