package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// Rate limiting (ojs-rate-limiting.md), the admission side. kvlimits keeps
// each limit entry's state; this file decides what happens to jobs.
//
// A job passes every limit entry that applies to it before it becomes
// active: its queue's (queue-level limit) and its rate_limit key's, in that
// order. Passing counts the start in each entry (a lease by job id for
// concurrency, the window count, the throttle's next start) with one
// compare-and-swap per entry, before the job's own compare-and-swap to
// active (DESIGN invariant 3). If that fails, the starts are taken back; a
// lease left by a process that died in between belongs to a job that is not
// active with the lease's token, and is reclaimed (verifyLeases).
//
// A job refused by a limit follows its on_limit:
//   - wait (default): the job stays available, its ready message is
//     acknowledged and a waiter is stored on the entry's wait subject
//     (ojs.wait.<entry>.<priority>). Nothing polls it: when the entry can
//     admit again (a slot released, the window rolled over, the throttle's
//     next start is due, a hold or override ended) the promoter moves the
//     oldest waiters of the lowest priority value back to the ready stream,
//     keeping their slot for them (a promise). New jobs of an entry with
//     waiters queue behind them, so waiters go oldest first.
//   - reschedule: the job becomes scheduled for when the limit is expected
//     to allow it (concurrency: ReschedulePause from now).
//   - drop: the job is discarded with error type rate_limited.

// errLimited marks a claim refused by a rate limit.
var errLimited = errors.New("rate limited")

// limitCheck is one limit entry a job must pass, with what it declares.
type limitCheck struct {
	entry    kvlimits.Entry
	declared ojs.Limits
}

// limitChecks lists the entries a job must pass, queue first.
func (s *Service) limitChecks(j *ojs.Job) []limitCheck {
	var out []limitCheck
	if q, ok := s.queues.get(j.Queue); ok && q.RateLimit != nil && !q.RateLimit.Empty() {
		out = append(out, limitCheck{entry: kvlimits.QueueEntry(j.Queue), declared: *q.RateLimit})
	}
	if p := j.RateLimit; p != nil {
		out = append(out, limitCheck{entry: kvlimits.KeyEntry(p.Key), declared: p.Limits()})
	}
	return out
}

// heldStart is a start counted in one entry.
type heldStart struct {
	entry kvlimits.Entry
	grant *kvlimits.Grant
	// waiting says the entry had waiters when the start was counted.
	waiting bool
}

// limitRefusal is why a claim was refused, and by which entry.
type limitRefusal struct {
	entry  kvlimits.Entry
	denial *kvlimits.Denial
}

// acquireLimits counts the start of nj in every entry of checks, or in
// none: a refusal takes back the starts counted before it.
//
// turn orders the updates after those of earlier claims of the same pulls
// (claimorder.go): each entry's update is queued only once theirs are.
func (s *Service) acquireLimits(ctx context.Context, nj *ojs.Job, checks []limitCheck, promoted bool, turn *claimTurn) ([]heldStart, *limitRefusal, error) {
	inLine := nj.RateLimit.Action() == ojs.OnLimitWait
	var held []heldStart
	for _, c := range checks {
		name := c.entry.Name()
		if err := turn.awaitEntry(ctx, name); err != nil {
			// Nothing was written to this entry.
			s.undoStarts(ctx, held)
			return nil, nil, err
		}
		if promoted {
			s.awaitThrottle(ctx, c.entry)
		}
		var g *kvlimits.Grant
		var d *kvlimits.Denial
		var waiting bool
		var at time.Time
		var patience time.Duration
		// A waiter released ahead of its throttle's start waits for it
		// here (keeping its promise), for up to ThrottleLead and
		// patientTries refusals, rather than going back to the end of the
		// line. The last try has no patience, so the refusal it gives up
		// on counts it as a waiter again: the Waiting hint must not fall
		// behind the waiters stored.
		var patientUntil time.Time
		if promoted {
			patientUntil = s.now().Add(kvlimits.ThrottleLead)
		}
		var err error
		for try := 0; ; try++ {
			err = s.limits.UpdateQueued(ctx, c.entry, func(st *kvlimits.State) bool {
				// Read the clock with the state the decision is made on: a
				// start granted now is later than every release it saw.
				at = s.now()
				patience = 0
				if try < patientTries {
					patience = max(patientUntil.Sub(at), 0)
				}
				g, d = st.Acquire(kvlimits.Request{
					JobID: nj.ID, Token: nj.Internal.Token, Declared: c.declared,
					Promoted: promoted, InLine: inLine, Patient: patience,
				}, at)
				waiting = st.Waiting > 0
				return true
			}, func() { turn.markQueued(name) })
			if err != nil || d == nil || d.Strategy != kvlimits.StrategyThrottle {
				break
			}
			wait := d.RetryAt.Sub(at)
			if wait > patience || !sleepCtx(ctx, wait) {
				break
			}
		}
		if err != nil {
			// The start may have been written all the same (a lost
			// answer): the job will not become active from this claim, so
			// its slot is reclaimed shortly.
			s.promoter.reclaimLater(c.entry, nj.ID, nj.Internal.Token, reclaimEnded)
			s.undoStarts(ctx, held)
			return nil, nil, err
		}
		if d != nil {
			s.undoStarts(ctx, held)
			return nil, &limitRefusal{entry: c.entry, denial: d}, nil
		}
		held = append(held, heldStart{entry: c.entry, grant: g, waiting: waiting})
		s.log.Debug("limit start", "limit", c.entry.Name(), "job", nj.ID, "token", nj.Internal.Token, "leased", g.Leased)
		// The record's started_at is the time the job's own key counted
		// the start, so windows and throttle spacing can be checked from
		// the records.
		if vis := nj.Internal.LeaseUntil.Sub(nj.StartedAt.Time); at.After(nj.StartedAt.Time) {
			nj.StartedAt = ojs.NewTime(at)
			nj.Internal.LeaseUntil = ojs.NewTime(at.Add(vis))
		}
	}
	return held, nil, nil
}

// patientTries is how many throttle refusals a promoted waiter waits out
// before it goes back to the waiters.
const patientTries = 3

// sleepCtx sleeps d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitThrottle waits, for a waiter released ahead of its throttle's next
// start (kvlimits.ThrottleLead), until that start is due as this process
// last saw it. It only makes the start punctual: the acquire decides.
func (s *Service) awaitThrottle(ctx context.Context, e kvlimits.Entry) {
	st := s.limits.Cached(e)
	if st == nil || st.ThrottleNext == nil {
		return
	}
	if wait := st.ThrottleNext.Sub(s.now()); wait > 0 && wait <= kvlimits.ThrottleLead {
		sleepCtx(ctx, wait)
	}
}

// undoStarts takes back starts whose job did not become active.
func (s *Service) undoStarts(ctx context.Context, held []heldStart) {
	for _, h := range held {
		err := s.limits.Update(context.WithoutCancel(ctx), h.entry, func(st *kvlimits.State) bool {
			st.Undo(h.grant)
			return true
		})
		s.log.Debug("limit start undone", "limit", h.entry.Name(), "job", h.grant.JobID, "token", h.grant.Token(), "outcome", outcome(err))
		if err != nil {
			// The job did not become active with it: the slot is
			// reclaimed shortly; a window or throttle start left counted
			// only admits less.
			s.log.Warn("rate limit start not taken back yet", "limit", h.entry, "job", h.grant.JobID, "error", err)
			s.promoter.reclaimLater(h.entry, h.grant.JobID, h.grant.Token(), reclaimEnded)
		}
		s.promoter.kick(h.entry)
	}
}

// releaseLimits frees the slots an active job held, as it leaves active
// (ack, fail, stall, cancel), and lets waiters in.
//
// The release is written after the caller answers (the worker's ack does
// not wait for it): until it lands the slot stays held, which only admits
// less; if the process dies first, the slot is reclaimed (verifyLeases).
func (s *Service) releaseLimits(ctx context.Context, old *ojs.Job) {
	if len(old.Internal.Limits) == 0 {
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.releaseLimitsNow(context.WithoutCancel(ctx), old)
		return
	}
	s.releases.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.releases.Done()
		s.releaseLimitsNow(context.WithoutCancel(ctx), old)
	}()
}

func (s *Service) releaseLimitsNow(ctx context.Context, old *ojs.Job) {
	for _, name := range old.Internal.Limits {
		e, ok := kvlimits.ParseEntry(name)
		if !ok {
			continue
		}
		waiting, held := false, false
		err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
			waiting = st.Waiting > 0
			held = st.Release(old.ID, old.Internal.Token)
			return held
		})
		s.log.Debug("limit released", "limit", name, "job", old.ID, "token", old.Internal.Token, "held", held, "outcome", outcome(err))
		if err != nil {
			s.log.Warn("rate limit slot not released yet; retrying", "limit", e, "job", old.ID, "error", err)
			s.promoter.reclaimLater(e, old.ID, old.Internal.Token, reclaimEnded)
			continue
		}
		if waiting {
			s.promoter.kick(e)
		}
	}
}

// limitEntryNames lists the entry names of checks, as stored on the record.
func limitEntryNames(checks []limitCheck) []string {
	if len(checks) == 0 {
		return nil
	}
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.entry.Name()
	}
	return out
}

// ReschedulePause is how far a job refused by a concurrency limit (or a
// FIFO wait) under on_limit reschedule is scheduled: when a slot frees is
// not known in advance.
const ReschedulePause = 5 * time.Second

// onLimited handles a claim refused by a limit, following the job's
// on_limit. j is the job's record, still available.
func (s *Service) onLimited(ctx context.Context, msg jetstream.Msg, j *ojs.Job, r *limitRefusal) error {
	d := r.denial
	s.events.Publish(EventRateLimitExceeded, r.entry.Key, map[string]any{
		"key": r.entry.Key, "scope": r.entry.Scope, "strategy": d.Strategy, "limit": d.Limit,
		"current": d.Current, "job_id": j.ID, "job_type": j.Type, "queue": j.Queue,
	})
	s.met.RateLimitExceeded(ctx, r.entry.Key, d.Strategy)
	switch j.RateLimit.Action() {
	case ojs.OnLimitReschedule:
		at := d.RetryAt
		if at.IsZero() || !at.After(s.now()) {
			at = s.now().Add(ReschedulePause)
		}
		if err := s.rescheduleLimited(ctx, j, at); err != nil && !errors.Is(err, errStale) {
			return err
		}
		_ = msg.Ack()
	case ojs.OnLimitDrop:
		if err := s.dropLimited(ctx, j, r); err != nil && !errors.Is(err, errStale) {
			return err
		}
		_ = msg.Ack()
	default:
		parkedAt := jobstore.ParkedAt(msg.Headers())
		if parkedAt.IsZero() {
			parkedAt = s.now()
		}
		if err := s.materialize(ctx, j); err != nil {
			if errors.Is(err, errStale) {
				_ = msg.Ack()
				return nil
			}
			return err
		}
		if err := s.store.Park(ctx, r.entry.Name(), j, parkedAt); err != nil {
			return err
		}
		_ = msg.Ack()
		s.promoter.kick(r.entry) // arms its timers
	}
	return nil
}

// materialize writes the record of a job read from its seed (a job
// stored as its ready message alone, jobstore/seed.go), unchanged, before
// the job outlives that message: a parked waiter's ready message is
// acknowledged, and its promotion publishes one that does not carry the
// job. errStale when the job moved on meanwhile.
func (s *Service) materialize(ctx context.Context, j *ojs.Job) error {
	if !j.Seed {
		return nil
	}
	token := j.Internal.Token
	_, _, err := s.transition(ctx, j.ID, func(cur *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		switch {
		case cur.State != ojs.StateAvailable || cur.Internal.Token != token:
			return nil, nil, errStale
		case !cur.Seed:
			return nil, nil, errWritten
		}
		return cur.Clone(), nil, nil
	})
	if errors.Is(err, errWritten) {
		return nil
	}
	return err
}

// errWritten ends a materialize that finds the record written already.
var errWritten = errors.New("record already written")

// rescheduleLimited moves an available job refused by a limit to
// scheduled at at (on_limit reschedule), or at ojs.LatestTime when a
// window's period puts at past it.
func (s *Service) rescheduleLimited(ctx context.Context, j *ojs.Job, at time.Time) error {
	at = ojs.Schedulable(at)
	token := j.Internal.Token
	nj, old, err := s.transition(ctx, j.ID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateAvailable || j.Internal.Token != token {
			return nil, nil, errStale
		}
		nj := j.Clone()
		nj.State = ojs.StateScheduled
		nj.ScheduledAt = ojs.NewTime(at)
		nj.Internal.Token = jobstore.NewToken()
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			return s.store.SetJobTimer(ctx, topology.TimerDue, nj, at)
		}, nil
	})
	if err != nil {
		return err
	}
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	s.events.PublishJob(EventJobScheduled, nj, map[string]any{"reason": "rate_limit"})
	return nil
}

// dropLimited discards an available job refused by a limit (on_limit
// drop), with the reason in its error.
func (s *Service) dropLimited(ctx context.Context, j *ojs.Job, r *limitRefusal) error {
	token := j.Internal.Token
	nj, old, err := s.transition(ctx, j.ID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateAvailable || j.Internal.Token != token {
			return nil, nil, errStale
		}
		now := s.now()
		nj := j.Clone()
		nj.State = ojs.StateDiscarded
		nj.DiscardedAt = ojs.NewTime(now)
		msg := fmt.Sprintf("dropped by rate limit %s %q (%s limit reached; on_limit drop)", r.entry.Scope, r.entry.Key, r.denial.Strategy)
		nj.Error = &ojs.JobError{Code: ojs.ErrorTypeRateLimited, Type: ojs.ErrorTypeRateLimited, Message: msg, At: ojs.NewTime(now)}
		nj.Errors = ojs.AppendError(nj.Errors, *nj.Error, s.sizes.Errors)
		nj.Internal.Token = jobstore.NewToken()
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			return s.store.PutDead(ctx, jobstore.DeadEntry{JobID: nj.ID, Queue: nj.Queue, DiscardedAt: nj.DiscardedAt})
		}, nil
	})
	if err != nil {
		return err
	}
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	s.releaseDepth(nj)
	s.events.Publish(EventRateLimitDropped, nj.ID, map[string]any{
		"key": r.entry.Key, "scope": r.entry.Scope, "strategy": r.denial.Strategy, "job_id": nj.ID, "job_type": nj.Type, "queue": nj.Queue,
	})
	s.events.PublishJob(EventJobDiscarded, nj, nil)
	s.met.JobDiscarded(ctx, nj.Queue, nj.Type, 0)
	return nil
}

// holdKey applies a handler's rate_limit_until to the failed job's key
// (RL-R003): no job of the key starts before it.
func (s *Service) holdKey(ctx context.Context, j *ojs.Job, e ojs.JobError) {
	if e.RateLimitUntil == nil || j.RateLimit == nil || !e.RateLimitUntil.After(s.now()) {
		return
	}
	entry := kvlimits.KeyEntry(j.RateLimit.Key)
	until := e.RateLimitUntil.Time
	reason := e.Message
	var changed bool
	err := s.limits.Update(ctx, entry, func(st *kvlimits.State) bool {
		changed = st.Hold(until, reason)
		return changed
	})
	if err != nil {
		s.log.Warn("rate_limit_until not applied", "limit", entry, "job", j.ID, "error", err)
		return
	}
	if changed {
		s.events.Publish(EventRateLimitAdjusted, entry.Key, map[string]any{
			"key": entry.Key, "until": ojs.NewTime(until), "reason": reason, "job_id": j.ID,
		})
		s.promoter.kick(entry)
	}
}

// StaleLeaseAge is how old a concurrency lease must be before it can be
// reclaimed for a job that is not active with the lease's token: longer
// than a claim can take between counting the start and its own
// compare-and-swap, so a claim in flight is never robbed.
const StaleLeaseAge = time.Minute

// verifyLeases reclaims leases of jobs that are no longer active with the
// lease's token (a process died between a job leaving active and the
// release). It reads the records of an entry's leases only when the entry
// is full and has waiters.
func (s *Service) verifyLeases(ctx context.Context, e kvlimits.Entry) (reclaimed bool, err error) {
	st, err := s.limits.Get(ctx, e)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	l := st.Effective(s.now())
	if st.Waiting == 0 || l.Concurrency == nil || len(st.Active) < *l.Concurrency {
		return false, nil
	}
	var stale []kvlimits.Lease
	for _, lease := range st.Active {
		if s.now().Sub(lease.Since.Time) < StaleLeaseAge {
			continue
		}
		j, _, err := s.store.Get(ctx, lease.JobID)
		switch {
		case isNotFound(err):
			stale = append(stale, lease)
		case err != nil:
			return false, err
		case j.State != ojs.StateActive || j.Internal.Token != lease.Token:
			stale = append(stale, lease)
		}
	}
	if len(stale) == 0 {
		return false, nil
	}
	err = s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		changed := false
		for _, l := range stale {
			if st.Release(l.JobID, l.Token) {
				changed = true
			}
		}
		return changed
	})
	if err == nil {
		s.log.Info("reclaimed rate limit slots of jobs no longer active", "limit", e, "slots", len(stale))
	}
	return err == nil, err
}

// startedLimited records a limited job's start: the wait the limits caused
// (for a job released from waiters), and a look at the entries' waiters
// (a start under a throttle or window decides when the next may go). The
// start of a promoted waiter is always looked at: it ends the promise a
// throttle releases one waiter at a time behind, and the Waiting hint
// may be behind the waiters.
func (s *Service) startedLimited(ctx context.Context, msg jetstream.Msg, held []heldStart) {
	parked := jobstore.ParkedAt(msg.Headers())
	promoted := jobstore.Promoted(msg.Headers())
	for _, h := range held {
		if !parked.IsZero() {
			s.met.RateLimitWaited(ctx, h.entry.Key, s.now().Sub(parked))
		}
		if h.waiting || promoted {
			s.promoter.kick(h.entry)
		}
	}
}
