package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
		Description:   "jetgate fired timers: scheduled jobs, retry backoff, heartbeat and execution timeouts, expiry",
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
	ref, ok := jobstore.Ref(msg.Headers())
	if !ok {
		_ = msg.Term()
		return
	}
	kind := msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:]
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
	s.log.Debug("timer handled", "kind", kind, "job", ref.JobID, "token", ref.Token, "base_rev", ref.BaseRev, "outcome", outcome(err))
	if err != nil && !errors.Is(err, errStale) && !errors.Is(err, errEarly) && !isNotFound(err) {
		s.log.Warn("timer failed, will retry", "kind", kind, "job", ref.JobID, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
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
