package admission

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/kvlimits"
)

// RateLimit returns the state of a rate limit key (RL-005).
func (s *Service) RateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error) {
	if !ojs.ValidRateKey(key) {
		return nil, &ojs.NotFoundError{Resource: "rate limit", ID: key}
	}
	return s.limitStatus(ctx, kvlimits.KeyEntry(key))
}

// QueueRateLimit returns the state of a queue's queue-level limit.
func (s *Service) QueueRateLimit(ctx context.Context, queue string) (*ojs.RateLimitStatus, error) {
	q, ok := s.queues.get(queue)
	if !ok || q.RateLimit == nil {
		return nil, &ojs.NotFoundError{Resource: "queue rate limit", ID: queue}
	}
	st, err := s.limitStatus(ctx, kvlimits.QueueEntry(queue))
	if err != nil && isNotFound(err) {
		// Configured, never used yet.
		return s.statusOf(ctx, &kvlimits.State{Key: queue, Scope: kvlimits.ScopeQueue, Policy: *q.RateLimit})
	}
	return st, err
}

func (s *Service) limitStatus(ctx context.Context, e kvlimits.Entry) (*ojs.RateLimitStatus, error) {
	st, err := s.limits.Get(ctx, e)
	if err != nil {
		return nil, err
	}
	return s.statusOf(ctx, st)
}

// statusOf renders an entry's state as of now, with its waiting count.
func (s *Service) statusOf(ctx context.Context, st *kvlimits.State) (*ojs.RateLimitStatus, error) {
	e := kvlimits.Entry{Scope: st.Scope, Key: st.Key}
	waiting, err := s.store.WaitingCount(ctx, e.Name())
	if err != nil {
		return nil, err
	}
	now := s.now()
	l := st.Effective(now)
	out := &ojs.RateLimitStatus{
		Key: st.Key, Scope: st.Scope, WaitingCount: waiting, Policy: st.Policy, StartsTotal: st.Starts,
	}
	if c := l.Concurrency; c != nil {
		out.Concurrency = &ojs.ConcurrencyStatus{Limit: *c, Active: len(st.Active), Available: max(*c-len(st.Active)-len(st.Promised), 0)}
	}
	if r := l.Rate; r != nil {
		ws := now.Truncate(r.Period.D())
		n := 0
		if st.Window != nil && st.Window.Start.Equal(ws) {
			n = st.Window.Count
		}
		out.Rate = &ojs.WindowStatus{Limit: r.Limit, Period: r.Period, CurrentCount: n, WindowResetsAt: ojs.NewTime(ws.Add(r.Period.D()))}
	}
	if t := l.Throttle; t != nil {
		ts := &ojs.ThrottleStatus{Limit: t.Limit, Period: t.Period}
		if st.ThrottleNext != nil && st.ThrottleNext.After(now) {
			ts.NextAllowedAt = st.ThrottleNext
		} else {
			ts.NextAllowedAt = ojs.NewTime(now)
		}
		out.Throttle = ts
	}
	if o := st.Override; o != nil && (o.ExpiresAt == nil || now.Before(o.ExpiresAt.Time)) {
		out.Override = &ojs.RateLimitOverride{Limits: o.Limits, ExpiresAt: o.ExpiresAt}
	}
	if st.Until != nil && now.Before(st.Until.Time) {
		out.RateLimitUntil, out.RateLimitUntilReason = st.Until, st.UntilReason
	}
	return out, nil
}

// RateLimits lists every rate limit partition, job keys and queue-level
// limits, by name, a page at a time.
func (s *Service) RateLimits(ctx context.Context, page ojs.PageRequest) (*ojs.RateLimitPage, error) {
	entries, err := s.limits.List(ctx, "")
	if err != nil {
		return nil, err
	}
	limit := page.Limit
	if limit <= 0 {
		limit = 20
	}
	off := min(max(page.Offset, 0), len(entries))
	end := min(off+limit, len(entries))
	out := &ojs.RateLimitPage{Items: []ojs.RateLimitStatus{}, Pagination: ojs.RateLimitPagination{
		Total: len(entries), Limit: limit, Offset: off, PerPage: limit, Page: off/limit + 1, HasMore: end < len(entries),
	}}
	for _, e := range entries[off:end] {
		st, err := s.limitStatus(ctx, e)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *st)
	}
	return out, nil
}

// SetRateLimitOverride overrides limits of a key until ov.ExpiresAt, or
// until removed (RL-R004). The limits it names replace the key's for every
// job while it lasts; an empty override (no limits) is refused.
func (s *Service) SetRateLimitOverride(ctx context.Context, key string, ov ojs.RateLimitOverride) (*ojs.RateLimitStatus, error) {
	if !ojs.ValidRateKey(key) {
		return nil, &ojs.ValidationError{Field: "key", Rule: "a rate limit key matching ^[a-zA-Z0-9][a-zA-Z0-9._:-]*$", Received: key}
	}
	if ov.Limits.Empty() {
		return nil, &ojs.ValidationError{Field: "concurrency", Rule: "present: an override sets at least one of concurrency, rate, throttle"}
	}
	now := s.now()
	if ov.ExpiresAt != nil && !ov.ExpiresAt.After(now) {
		return nil, &ojs.ValidationError{Field: "expires_at", Rule: "a time in the future", Received: ov.ExpiresAt.String()}
	}
	e := kvlimits.KeyEntry(key)
	if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		st.Override = &kvlimits.Override{Limits: ov.Limits, ExpiresAt: ov.ExpiresAt, SetAt: ojs.Time{Time: now.UTC()}}
		return true
	}); err != nil {
		return nil, err
	}
	s.events.Publish(EventRateLimitAdjusted, key, map[string]any{
		"key": key, "until": ov.ExpiresAt, "reason": "override", "override": ov.Limits,
	})
	s.promoter.kick(e)
	if ov.ExpiresAt != nil {
		// Waiters refused under the override may start when it ends.
		s.promoter.at(e, ov.ExpiresAt.Time)
	}
	return s.limitStatus(ctx, e)
}

// ResetRateLimit removes a key's override and rate_limit_until hold and
// forgets its stored policy (the strictest jobs declared), so the next
// jobs declare it afresh: the way to loosen a key's limits. Slots held by
// running jobs, the window count and waiters are kept.
func (s *Service) ResetRateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error) {
	if !ojs.ValidRateKey(key) {
		return nil, &ojs.NotFoundError{Resource: "rate limit", ID: key}
	}
	e := kvlimits.KeyEntry(key)
	if _, err := s.limits.Get(ctx, e); err != nil {
		return nil, err
	}
	if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		st.Override, st.Until, st.UntilReason, st.Policy = nil, nil, "", ojs.Limits{}
		return true
	}); err != nil {
		return nil, err
	}
	s.promoter.kick(e)
	return s.limitStatus(ctx, e)
}

// SetQueueRateLimit configures a queue-level limit (RL-R005): it holds
// for every job of the queue together with the job's own limits. nil
// removes it. A queue that does not exist yet is created.
func (s *Service) SetQueueRateLimit(ctx context.Context, queue string, l *ojs.Limits) (*ojs.QueueInfo, error) {
	if l != nil && l.Empty() {
		return nil, &ojs.ValidationError{Field: "concurrency", Rule: "present: a queue rate limit sets at least one of concurrency, rate, throttle"}
	}
	q, _, err := s.updateQueue(ctx, queue, func(q *jobstore.QueueRecord) bool {
		q.RateLimit = l
		return true
	})
	if err != nil {
		return nil, err
	}
	info := &q.QueueInfo
	e := kvlimits.QueueEntry(queue)
	policy := ojs.Limits{}
	if l != nil {
		policy = *l
	}
	if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		st.Policy = policy
		return true
	}); err != nil {
		return nil, err
	}
	// A looser (or removed) limit may let waiters start.
	s.promoter.kick(e)
	return info, nil
}

// RateLimitUsage reports the active and waiting jobs of the rate limit
// keys this process has used ("queue:<name>" for queue-level limits), as
// last seen: for the gauges, not exact.
func (s *Service) RateLimitUsage() map[string][2]int {
	out := map[string][2]int{}
	for _, st := range s.limits.Snapshot() {
		name := st.Key
		if st.Scope == kvlimits.ScopeQueue {
			name = "queue:" + st.Key
		}
		out[name] = [2]int{len(st.Active), st.Waiting}
	}
	return out
}
