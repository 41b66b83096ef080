package admission

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// QueueConfig returns a queue's effective backpressure config.
func (s *Service) QueueConfig(ctx context.Context, name string) (*ojs.QueueConfig, error) {
	if _, ok := s.queues.get(name); !ok {
		rec, err := s.store.GetQueue(ctx, name)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if rec != nil {
			s.queues.put(rec)
		}
	}
	return s.queueConfig(name), nil
}

func (s *Service) queueConfig(name string) *ojs.QueueConfig {
	cfg, source := s.backpressureOf(name)
	out := &ojs.QueueConfig{Queue: name, Source: source}
	if source != "none" {
		out.Backpressure = &cfg
	} else if q, ok := s.queues.get(name); ok && q.Backpressure != nil {
		// Explicitly unbounded: show the zero bounds that were set.
		bp := q.Backpressure.WithDefaults()
		out.Backpressure, out.Source = &bp, "queue"
	}
	return out
}

// SetQueueBackpressure sets a queue's own bound (BP-003); nil returns the
// queue to the server-wide default. The depth stream's limits are applied
// first, then the queue record, so a bound is never shown before it holds.
// Jobs already in the queue are not touched (ojs-queue-config.md 4.4): a
// lowered max_depth refuses new jobs until the queue drains below it.
func (s *Service) SetQueueBackpressure(ctx context.Context, name string, bp *ojs.Backpressure) (*ojs.QueueConfig, error) {
	if bp != nil {
		if err := bp.Validate("backpressure."); err != nil {
			return nil, err
		}
		v := bp.WithDefaults()
		bp = &v
	}
	effective := s.cfg.DefaultBackpressure.WithDefaults()
	if bp != nil {
		effective = *bp
	}
	if err := s.applyQueueBound(ctx, name, effective); err != nil {
		return nil, err
	}
	if _, _, err := s.updateQueue(ctx, name, func(q *jobstore.QueueRecord) bool {
		q.Backpressure = bp
		return true
	}); err != nil {
		return nil, err
	}
	s.log.Info("queue backpressure set", "queue", name, "max_depth", effective.MaxDepth,
		"max_size_bytes", effective.MaxSizeBytes, "strategy", effective.Strategy)
	return s.queueConfig(name), nil
}

// applyQueueBound brings the queue's depth stream to cfg: created when
// cfg bounds the queue, updated (limits lifted) when it does not and a
// stream exists.
func (s *Service) applyQueueBound(ctx context.Context, name string, cfg ojs.Backpressure) error {
	q := s.bp.queue(name)
	sc := s.depthStreamConfig(name, cfg)
	if !cfg.Bounded() {
		if _, err := s.depthStream(ctx, q); err != nil {
			return nil // no stream: nothing to lift
		}
	}
	st, err := s.applyDepthConfig(ctx, sc)
	if err != nil {
		if errors.Is(err, ojs.ErrConflict) {
			return err
		}
		return fmt.Errorf("depth stream of %s: %w", name, jobstore.Unavailable(err))
	}
	q.mu.Lock()
	q.stream, q.applied, q.ensured = st, cfg, true
	q.mu.Unlock()
	return nil
}

// queuePressure returns a bounded queue's depth, bound and pressure for
// its stats; nil for an unbounded queue.
func (s *Service) queuePressure(ctx context.Context, name string) *ojs.Pressure {
	cfg, source := s.backpressureOf(name)
	if !cfg.Bounded() {
		return nil
	}
	q := s.bp.queue(name)
	if err := s.ensureDepth(ctx, q, cfg, source); err != nil {
		return nil
	}
	p := s.observe(ctx, q, cfg, true)
	return &p
}

// reserveRetry takes the unit a dead job needs to become available again
// (a manual retry enters the queue's depth like an enqueue).
func (s *Service) reserveRetry(ctx context.Context, id string) (uint64, func(), error) {
	j, _, err := s.store.Get(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return 0, nil, &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
		}
		return 0, nil, err
	}
	if j.State != ojs.StateDiscarded {
		return 0, nil, &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
	}
	probe := j.Clone()
	probe.Internal.DepthSeq = 0
	undo, err := s.reserveDepth(ctx, []*ojs.Job{probe}, nil)
	if err != nil {
		return 0, nil, err
	}
	return probe.Internal.DepthSeq, undo, nil
}
