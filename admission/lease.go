package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Leases of active jobs.
//
// An active job's deadlines (heartbeat, execution timeout, grace period;
// timeouts.go) are a lease timer in JetStream (a message schedule on
// ojs.timer.lease.<job>). Most jobs finish in far less than their
// visibility timeout, so writing that timer at claim time and cancelling
// it at ack costs two writes for nothing. Instead, a claim keeps the
// ready message it was claimed from unacknowledged: JetStream redelivers
// it after the ready consumer's AckWait (ClaimAckWait, 30 s) unless
// someone acks it. The claiming process writes the lease timer only if
// the job is still active after the lease deferral (a third of
// ClaimAckWait), then acks the message. A job that finishes sooner just
// acks the message. Visibility timeouts shorter than ClaimAckWait are not
// deferred, nor are claims while the process stops.
//
// The held message is the lease's backstop while the timer is not
// written: if the claiming process dies first, the message comes back,
// and whoever meets it (a fetch, levels.go; or a walk, below) sees the
// job still active and claimed from that very message
// (Internal.HeldToken) and writes the lease timer then, with the job's
// original deadline, so a silent worker's job stalls as it would have.
// The timer stays in JetStream either way: no lease lives only in memory.
//
// JetStream hands a redelivered message only to the next pull on its
// consumer, so a dead process's held message would wait for the next
// fetch of its queue level, forever if none comes (issue 31 item 1).
// What pulls it instead is a sentinel of the process (holder.go): one
// message schedule per process, renewed every refresh period (a sixth of
// ClaimAckWait) while it holds messages, that fires only once the
// process stopped renewing it, due ClaimAckWait + a refresh period + a
// margin (a tenth of ClaimAckWait, at least 1 s) after its last renewal,
// and lists the ready consumers the process holds messages on. The
// timers consumer, shared by every process, hands the fired sentinel to
// one of them (or to the next one to start), which pulls the held
// messages back and writes their leases (holderwalk.go). A claim whose
// consumer the last sentinel does not list sends one that does before
// its record is written (cover), on the same connection and without
// waiting for its answer: a record the server took in comes after the
// sentinel that covers it, so a process that dies between the two leaves
// nothing unlisted, and no claim waits for the sentinel.
//
// The arithmetic, at the default 30 s: a process that dies at D renewed
// its sentinel at R, D-5 s <= R <= D, so it fires at R+30+5+3 <= D+38 s,
// when every message it held (delivered before D) was redeliverable since
// D+30 at the latest. The leases that rely on it are those of claims at F
// in (D-10 s, D] (older claims wrote their lease timer at F+10 s), whose
// deadline is F + the visibility timeout >= F+30 > D+20 s. So the walk
// that follows the sentinel writes the lease before deadline + 30 s >
// D+50 s, with 12 s to spare, and the lease, if due, fires at once: a
// lease is enforced within one AckWait after its deadline whatever process
// died, whether or not anything fetches its queue again. What the
// sentinel does not do is spare the AckWait: a job whose process died is
// still seen late by up to that much.
//
// Why a bound per consumer in the sentinel (the simpler rule, "take the
// redeliveries, stop at the first new message", needs none): ready
// consumers keep their state in memory (fetch.go), so a NATS server
// restart loses what they delivered, and the embedded server dies with
// its jetgate process. A consumer created again hands out every message
// not acked, each for the first time, in stream order; the held ones are
// told from the others only by their records. The bound says how far to
// read: the process holds nothing of that consumer past it. It runs
// ahead of the claims by a few seconds of their pace, so a claim seldom
// sends a new sentinel, and a walk reads a few seconds of claims at
// most. Per-job writes stay what they were: none.
//
// A process that stops cleanly (SIGTERM, Service.Stop) writes every
// deferred lease before it exits and then cancels its sentinel; one that
// cannot write them leaves the sentinel to fire. Service.Kill stops as a
// crash would, writing nothing.

// leaseDeferral returns how long a claim may hold its ready message instead
// of writing the lease timer; 0 means write it at once. Only a visibility
// timeout at least as long as ClaimAckWait can be deferred: the held
// message of a claiming process that died comes back after ClaimAckWait,
// and the lease it then writes must still fire on time.
func (s *Service) leaseDeferral(vis time.Duration) time.Duration {
	d := s.cfg.ClaimAckWait / 3
	if vis < s.cfg.ClaimAckWait || d < time.Second || s.stopping.Load() {
		return 0
	}
	return d
}

// leaseRetry is how soon a deferred lease write that failed is tried again.
const leaseRetry = time.Second

// deferredLeases are this process's pending lease writes, by job id.
type deferredLeases struct {
	// release ends the hold of a written or dropped lease on its level
	// (holder.release).
	release func(level string)

	mu      sync.Mutex
	pending map[string]*deferredLease
	// stopped: no write is deferred any more; abandoned: none is written
	// either (Kill). failed counts writes that failed after stopped.
	stopped, abandoned bool
	failed             int
	wg                 sync.WaitGroup // timers armed or running
}

// deferredLease is one pending write: of the lease of a job whose ready
// message is held on level (a ready consumer).
type deferredLease struct {
	timer *time.Timer
	level string
	write func(context.Context) error
}

// add defers write by after. Once stopped, write runs at once, in the
// caller (or not at all once abandoned).
func (d *deferredLeases) add(id, level string, after time.Duration, write func(context.Context) error) {
	d.mu.Lock()
	if d.stopped {
		abandoned := d.abandoned
		d.mu.Unlock()
		if !abandoned {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = write(ctx)
			cancel()
		}
		d.release(level)
		return
	}
	if d.pending == nil {
		d.pending = map[string]*deferredLease{}
	}
	if old, ok := d.pending[id]; ok {
		// An earlier attempt's write, whose attempt ended in another
		// process: its record moved on, so there is nothing to write.
		d.dropLocked(id, old)
	}
	e := &deferredLease{level: level, write: write}
	d.pending[id] = e
	d.armLocked(id, e, after)
	d.mu.Unlock()
}

// armLocked runs e's write after a delay. d.mu is held.
func (d *deferredLeases) armLocked(id string, e *deferredLease, after time.Duration) {
	d.wg.Add(1)
	e.timer = time.AfterFunc(after, func() { d.fire(id, e) })
}

// dropLocked forgets e, the pending write of id. d.mu is held.
func (d *deferredLeases) dropLocked(id string, e *deferredLease) {
	if e.timer.Stop() {
		d.wg.Done()
	}
	delete(d.pending, id)
	d.release(e.level)
}

// fire runs a pending write; one that fails is tried again until it
// lands or the job leaves active (cancel).
func (d *deferredLeases) fire(id string, e *deferredLease) {
	defer d.wg.Done()
	d.mu.Lock()
	if d.pending[id] != e || d.abandoned {
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := e.write(ctx)
	cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[id] != e {
		return // cancelled meanwhile
	}
	if err != nil && !d.stopped {
		d.armLocked(id, e, leaseRetry)
		return
	}
	if err != nil {
		d.failed++
	}
	delete(d.pending, id)
	d.release(e.level)
}

// cancel drops the pending write of id, if this process has one.
func (d *deferredLeases) cancel(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.pending[id]; ok {
		d.dropLocked(id, e)
	}
}

// flush writes every pending lease now, at most 16 at once, and reports
// whether all of them landed. No write is deferred after it.
func (d *deferredLeases) flush(ctx context.Context) bool {
	d.mu.Lock()
	d.stopped = true
	type job struct {
		id string
		e  *deferredLease
	}
	var now []job
	for id, e := range d.pending {
		if e.timer.Stop() {
			d.wg.Done()
			now = append(now, job{id, e})
		} // else it is being written: fire finishes it
	}
	d.mu.Unlock()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, j := range now {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := j.e.write(ctx)
			d.mu.Lock()
			defer d.mu.Unlock()
			if err != nil {
				d.failed++
			}
			if d.pending[j.id] == j.e {
				delete(d.pending, j.id)
				d.release(j.e.level)
			}
		}()
	}
	wg.Wait()
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed == 0
}

// abandon drops every pending write and waits for running ones, as a
// crash would: the held messages come back through the sentinel.
func (d *deferredLeases) abandon() {
	d.mu.Lock()
	d.stopped, d.abandoned = true, true
	for id, e := range d.pending {
		if e.timer.Stop() {
			d.wg.Done()
		}
		delete(d.pending, id)
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// holdLease keeps nj's ready message unacknowledged as the backstop of
// its lease, on level (the sentinel's cover, which the pending write
// holds from now on), and schedules the lease write.
func (s *Service) holdLease(nj *ojs.Job, after time.Duration, level string) {
	id, token, held := nj.ID, nj.Internal.Token, nj.Internal.HeldAck
	warned := false // the write runs once at a time
	s.leases.add(id, level, after, func(ctx context.Context) error {
		err := s.secureLease(ctx, id, token, held)
		if err != nil && !warned {
			// Tried again every leaseRetry; meanwhile the held message
			// stays the backstop, under the sentinel.
			s.log.Warn("lease write failed, will retry", "job", id, "error", err)
			warned = true
		}
		return err
	})
}

// secureLease writes the lease timer of an active job claimed with token,
// unless one is there already, then releases the ready message held
// since that claim (acked by its ack subject held). It never touches the
// message the record holds now if that is another claim's: a later
// attempt's held message is its only backstop until its own lease is
// written.
func (s *Service) secureLease(ctx context.Context, id, token, held string) error {
	j, _, err := s.store.Get(ctx, id)
	if err != nil {
		if isNotFound(err) {
			s.ackHeld(held)
			return nil
		}
		return err
	}
	secure := j.State == ojs.StateActive && j.Internal.Token == token && j.StartedAt != nil
	if secure {
		at, kv := s.firstLease(j)
		if _, err := s.store.EnsureTimer(ctx, topology.TimerLease, id, token, at, kv...); err != nil {
			return err
		}
	}
	s.log.Debug("lease secured", "job", id, "token", token, "state", j.State, "record_token", j.Internal.Token,
		"timer", secure)
	s.ackHeld(held)
	return nil
}

// coverHeld makes sure a holder sentinel covering msg, the ready message
// nj's claim holds, goes out before the claim's record is written
// (holder.go), and sets *level to the level to release; if none can, the
// claim writes its lease timer at once instead and holds nothing.
func (s *Service) coverHeld(ctx context.Context, msg jetstream.Msg, nj *ojs.Job, level *string) error {
	if *level != "" {
		return nil // covered in an earlier round of the claim
	}
	name, err := s.holder.cover(msg)
	if err == nil {
		*level = name
		return nil
	}
	if !errors.Is(err, errHolderClosed) {
		s.log.Warn("lease written at claim: the holder sentinel could not cover it", "job", nj.ID, "error", err)
	}
	clearHeld(nj)
	at, kv := s.firstLease(nj)
	return s.store.SetJobTimer(ctx, topology.TimerLease, nj, at, kv...)
}

// releaseLease ends the lease of a job that left active: the held ready
// message is acked, a pending deferred write dropped, and a lease timer
// that may exist cancelled.
func (s *Service) releaseLease(old *ojs.Job) {
	if s.debugging() {
		s.log.Debug("lease released", "job", old.ID, "token", old.Internal.Token, "held_acked", old.Internal.HeldAck != "")
	}
	s.leases.cancel(old.ID)
	held := old.Internal.HeldAck != ""
	s.ackHeld(old.Internal.HeldAck)
	if held && old.StartedAt != nil && old.Internal.LeaseUntil != nil {
		vis := old.Internal.LeaseUntil.Sub(old.StartedAt.Time)
		if s.now().Sub(old.StartedAt.Time) < s.leaseDeferral(vis)/2 {
			// No lease timer was written by the deferral yet; one written
			// by an early heartbeat fires later as stale, harmlessly.
			return
		}
	}
	s.store.CancelTimer(topology.TimerLease, old.ID)
}

// redelivered handles a held ready message that came back because its
// claiming process did not release it: the job is still active from that
// claim, so its lease timer is written now (firing at once if the deadline
// passed).
func (s *Service) redelivered(ctx context.Context, j *ojs.Job, msg jetstream.Msg) error {
	s.log.Debug("held message redelivered", "job", j.ID, "token", j.Internal.Token)
	if j.StartedAt != nil {
		at, kv := s.firstLease(j)
		if _, err := s.store.EnsureTimer(ctx, topology.TimerLease, j.ID, j.Internal.Token, at, kv...); err != nil {
			return err
		}
	}
	_ = msg.Ack()
	return nil
}

// endAttempt gives j a fresh token and drops what an attempt holds: its
// lease deadline, its rate limit starts and its held ready message. Every
// transition that takes a job out of active (or out of the running for
// one) starts from it.
func endAttempt(j *ojs.Job) {
	j.Internal.Token = jobstore.NewToken()
	j.Internal.LeaseUntil = nil
	j.Internal.Limits = nil
	clearHeld(j)
}

// clearHeld forgets the held message of a record that leaves active.
func clearHeld(j *ojs.Job) {
	j.Internal.HeldAck = ""
	j.Internal.HeldToken = ""
}
