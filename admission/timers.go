package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// startTimers consumes fired timers. The consumer is durable and shared by
// every jetgate process, so each fired timer is handled once, and timers
// that fired while no process was running are handled at the next start.
func (s *Service) startTimers(ctx context.Context) (jetstream.ConsumeContext, error) {
	cons, err := s.assets.Timers.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       topology.TimerConsumer,
		Description:   "jetgate fired timers: scheduled jobs, retry backoff, heartbeat and execution timeouts, expiry, holder sentinels",
		FilterSubject: topology.TimerFiredSubjects,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 10_000,
		MaxDeliver:    -1,
	})
	if err != nil {
		return nil, fmt.Errorf("timer consumer: %w", err)
	}
	cc, err := cons.Consume(s.onTimer, jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("consume timers: %w", err)
	}
	return cc, nil
}

func (s *Service) onTimer(msg jetstream.Msg) {
	kind := msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:]
	if kind == topology.TimerHolder {
		// A process that held ready messages stopped renewing its
		// sentinel (holder.go, holderwalk.go).
		s.holder.fired(msg)
		return
	}
	ref, ok := jobstore.Ref(msg.Headers())
	if !ok {
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	switch kind {
	case topology.TimerDue:
		err = s.due(ctx, ref)
	case topology.TimerLease:
		err = s.leaseFired(ctx, ref, msg.Headers())
	case topology.TimerExpire:
		err = s.expireFired(ctx, ref.JobID)
	case topology.TimerLimit:
		err = s.onLimitTimer(ctx, ref.JobID)
	default:
		_ = msg.TermWithReason("unknown timer kind " + kind)
		return
	}
	if errors.Is(err, errEarly) || (isNotFound(err) && (kind == topology.TimerExpire || ref.BaseRev != 0)) {
		// Fired before its record change landed (an expire timer is
		// written before the record is created), or met a read behind
		// the writes (a timer with a base revision was set for a record
		// that existed): look again shortly, until the change is too old
		// to land (retryOrphan).
		if retryOrphan(msg) {
			return
		}
	}
	if errors.Is(err, errStale) {
		if rerr := s.restoreTimer(ctx, kind, ref, msg.Headers()); rerr != nil {
			err = rerr // the stale timer comes back and the restore is tried again
		}
	}
	s.log.Debug("timer handled", "kind", kind, "job", ref.JobID, "token", ref.Token, "base_rev", ref.BaseRev, "outcome", outcome(err))
	if err != nil && !errors.Is(err, errStale) && !errors.Is(err, errEarly) && !isNotFound(err) {
		s.log.Warn("timer failed, will retry", "kind", kind, "job", ref.JobID, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
}

// restoreTimer gives a job back the lease or due timer its record relies
// on, after a stale timer of that kind fired for it.
//
// A job has one timer of each kind (one schedule subject), and a
// transition writes the timer its next record relies on before its
// compare-and-swap. A transition that then loses the compare-and-swap
// (two claims of one put-back ready message, a nack racing a stall) has
// replaced the winner's timer with its own, whose token matches no record.
// That timer fires stale; had it just been dropped, the winner's job would
// wait forever: active with no lease, or retryable with no due timer
// (issue #3). So a stale timer makes sure the record's own timer is there
// (EnsureTimer: a compare-and-swap on the subject that keeps a timer of
// the record's token, such as a heartbeat's).
//
// The restored lease is due as if the attempt's last sign of life came
// when the stale timer's attempt started: a heartbeat of the job after
// that would have replaced the stale timer, which fired instead. A due
// timer is restored at the record's scheduled_at or next_attempt_at.
func (s *Service) restoreTimer(ctx context.Context, kind string, ref jobstore.MsgRef, h nats.Header) error {
	if kind != topology.TimerLease && kind != topology.TimerDue {
		return nil
	}
	j, _, err := s.store.Get(ctx, ref.JobID)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	if j.Internal.Token == ref.Token {
		return nil
	}
	var at time.Time
	var kv []string
	switch {
	case kind == topology.TimerLease && j.State == ojs.StateActive && j.StartedAt != nil:
		c := s.attemptOf(j)
		last := j.StartedAt.Time
		if lr := readLease(h); lr.lastBeat.After(last) {
			last = lr.lastBeat
		}
		var lk string
		at, lk = c.next(last, c.beat, s.now())
		kv = leaseHeaders(lk, last, c.beat)
	case kind == topology.TimerDue && j.State == ojs.StateScheduled && j.ScheduledAt != nil:
		at = j.ScheduledAt.Time
	case kind == topology.TimerDue && j.State == ojs.StateRetryable && j.NextAttemptAt != nil:
		at = j.NextAttemptAt.Time
	default:
		return nil
	}
	wrote, err := s.store.EnsureTimer(ctx, kind, j.ID, j.Internal.Token, at, kv...)
	s.log.Debug("timer ensured after a stale one", "kind", kind, "job", j.ID, "token", j.Internal.Token,
		"stale_token", ref.Token, "at", at, "restored", wrote, "outcome", outcome(err))
	return err
}

// errStale marks a ready message or timer whose job moved on; it is acked
// and forgotten.
var errStale = errors.New("stale timer")

// staleOrEarly tells a message whose token does not match the record j
// apart: early when the record is still at the revision the message's
// transition replaces (published before its compare-and-swap, which has
// not landed yet), stale otherwise. A record below that revision was read
// behind the writes (a replica or a new stream leader still applying
// them after a node restart): the message was published after a write
// the read does not show yet, so it is early too, never stale. Only a
// record past the base revision with another token proves the message
// was overtaken.
func staleOrEarly(j *ojs.Job, ref jobstore.MsgRef) error {
	if ref.BaseRev != 0 && j.Rev <= ref.BaseRev {
		return errEarly
	}
	return errStale
}

// due makes a scheduled or retrying job available.
func (s *Service) due(ctx context.Context, ref jobstore.MsgRef) error {
	nj, old, err := s.transition(ctx, ref.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if (j.State != ojs.StateScheduled && j.State != ojs.StateRetryable) || j.Internal.Token != ref.Token {
			return nil, nil, staleOrEarly(j, ref)
		}
		return s.ready(j, s.now()), s.store.PublishReady, nil
	})
	if err != nil {
		return err
	}
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	s.notify.ready(nj.Queue)
	if old.State == ojs.StateScheduled {
		s.events.PublishJob(EventJobEnqueued, nj, nil)
	}
	return nil
}

func quoteOr(s, def string) string {
	if s == "" {
		return def
	}
	return "'" + s + "'"
}

// outcome names err for debug logs ("ok" for nil).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
