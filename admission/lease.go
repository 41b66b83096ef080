package admission

import (
	"context"
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
// ojs.timer.lease.<job>). Most jobs finish in far less
// than their visibility timeout, so writing that timer at claim time and
// cancelling it at ack costs two writes for nothing. Instead, a claim keeps
// the ready message it was claimed from unacknowledged: JetStream redelivers
// it after the ready consumer's AckWait (ClaimAckWait) unless someone acks
// it. The claiming process writes the lease timer only if the job is still
// active after the lease deferral (a third of ClaimAckWait), then acks the
// message. Visibility timeouts shorter than ClaimAckWait are not deferred. A job that finishes
// sooner just acks the message.
//
// If the claiming process dies first, the message comes back to a fetch,
// which sees the job still active and claimed from that very message
// (Internal.HeldToken) and writes the lease timer then, with the job's
// original deadline, so a silent worker's job stalls as it would have.
// The timer stays in JetStream either way: no lease lives only in memory.

// leaseDeferral returns how long a claim may hold its ready message instead
// of writing the lease timer; 0 means write it at once. Only a visibility
// timeout at least as long as ClaimAckWait can be deferred: the held
// message of a claiming process that died comes back after ClaimAckWait,
// and the lease it then writes must still fire on time.
func (s *Service) leaseDeferral(vis time.Duration) time.Duration {
	d := s.cfg.ClaimAckWait / 3
	if vis < s.cfg.ClaimAckWait || d < time.Second {
		return 0
	}
	return d
}

// deferredLeases are this process's pending lease writes, by job id.
type deferredLeases struct {
	mu      sync.Mutex
	timers  map[string]*time.Timer
	stopped bool
	wg      sync.WaitGroup
}

func (d *deferredLeases) add(id string, after time.Duration, f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return // the held message's redelivery takes over
	}
	if d.timers == nil {
		d.timers = map[string]*time.Timer{}
	}
	if t, ok := d.timers[id]; ok && t.Stop() {
		// An earlier attempt's write, whose attempt ended in another
		// process: its record moved on, so there is nothing to write.
		d.wg.Done()
	}
	d.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(after, func() {
		defer d.wg.Done()
		d.mu.Lock()
		if d.timers[id] == t { // not a later attempt's write
			delete(d.timers, id)
		}
		stopped := d.stopped
		d.mu.Unlock()
		if !stopped {
			f()
		}
	})
	d.timers[id] = t
}

// cancel drops the pending write of id, if this process has one.
func (d *deferredLeases) cancel(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.timers[id]; ok && t.Stop() {
		delete(d.timers, id)
		d.wg.Done()
	}
}

// stop drops every pending write and waits for running ones.
func (d *deferredLeases) stop() {
	d.mu.Lock()
	d.stopped = true
	for id, t := range d.timers {
		if t.Stop() {
			d.wg.Done()
		}
		delete(d.timers, id)
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// holdLease keeps msg unacknowledged as the backstop of nj's lease and
// schedules the lease write.
func (s *Service) holdLease(nj *ojs.Job, after time.Duration) {
	id, token, held := nj.ID, nj.Internal.Token, nj.Internal.HeldAck
	s.leases.add(id, after, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.secureLease(ctx, id, token, held); err != nil {
			// The held message comes back after ClaimAckWait and the
			// fetch that meets it writes the lease then.
			s.log.Warn("lease write deferred to redelivery", "job", id, "error", err)
		}
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
