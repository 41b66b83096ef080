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
)

// maxDropScan bounds the ready messages looked at per level in one drop.
const maxDropScan = 64

// A level's messages are read from its consumer's ack floor on: every
// message of the level up to it is acknowledged, so gone from the
// work-queue stream, and the oldest one left comes after it. Each read is
// the next message of the level's subjects after a sequence, which stops
// at the first match; the levels come from the registry and their
// consumers' counts (levels.go): a level is read only if it holds
// messages, or this process published there since it was last handed one.
// A level without a consumer is read from the start of the stream, which
// the server answers from the level's own subjects (as creating the
// consumer would). Nothing matches the queue's subjects from the start of
// the stream (a wildcard read there walks every ready job's subject).

// dropOldest discards up to n available jobs of a queue to make room: the
// oldest of the lowest priority (highest number) first (ojs-backpressure
// 5.3 and the .txt's "lower-priority jobs are dropped first"). Only
// available jobs are dropped, never active, scheduled or retryable ones.
// It returns how many were dropped; their units are released before it
// returns.
func (s *Service) dropOldest(ctx context.Context, q *bpQueue, n int) (int, error) {
	levels, _, infos, err := s.levels(ctx, q.name)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for i := len(levels) - 1; i >= 0 && dropped < n; i-- {
		subj := topology.ReadyLevelFilter(q.name, levels[i])
		seq := infos[levels[i]].ackFloor + 1
		for range maxDropScan {
			if dropped == n {
				break
			}
			raw, err := s.assets.Ready.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return dropped, fmt.Errorf("find oldest job of %s: %w", q.name, jobstore.Unavailable(err))
			}
			seq = raw.Sequence + 1
			ref, ok := jobstore.Ref(raw.Header)
			if !ok {
				continue
			}
			ok, err = s.drop(ctx, q.name, ref, raw.Sequence)
			if err != nil {
				return dropped, err
			}
			if ok {
				dropped++
			}
		}
	}
	return dropped, nil
}

// drop discards one available job named by a ready message, with error
// type "overflow" (ojs-queue-config.md 6.1). A message whose job moved on
// is deleted (it would be acked as stale anyway), except the held message
// of an active job, which backs its lease.
func (s *Service) drop(ctx context.Context, queue string, ref jobstore.MsgRef, readySeq uint64) (bool, error) {
	nj, old, err := s.transition(ctx, ref.JobID, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		switch {
		case j.State == ojs.StateActive && j.Internal.HeldToken == ref.Token:
			return nil, nil, errRedelivered
		case j.State != ojs.StateAvailable || j.Internal.Token != ref.Token:
			return nil, nil, staleOrEarly(j, ref)
		}
		now := s.now()
		nj := j.Clone()
		nj.State = ojs.StateDiscarded
		nj.DiscardedAt = ojs.NewTime(now)
		nj.Error = &ojs.JobError{Code: "overflow", Type: "overflow", At: ojs.NewTime(now),
			Message: fmt.Sprintf("dropped by the drop_oldest backpressure of queue '%s' to make room for a newer job", queue)}
		nj.Internal.Token = jobstore.NewToken()
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			return s.store.PutDead(ctx, jobstore.DeadEntry{JobID: nj.ID, Queue: nj.Queue, DiscardedAt: nj.DiscardedAt})
		}, nil
	})
	switch {
	case errors.Is(err, errStale):
		_ = s.assets.Ready.DeleteMsg(ctx, readySeq)
		return false, nil
	case errors.Is(err, errRedelivered), errors.Is(err, errEarly), isNotFound(err):
		// Early: the record has not caught up with the message; it is
		// the job's live ready message, left alone.
		return false, nil
	case err != nil:
		return false, err
	}
	_ = s.assets.Ready.DeleteMsg(ctx, readySeq)
	s.stats.move(nj.Queue, nj.Priority, old.State, nj.State)
	s.met.JobDiscarded(ctx, nj.Queue, nj.Type, 0)
	if pr, ok := s.met.(PressureRecorder); ok {
		pr.QueueDropped(ctx, queue)
	}
	s.events.PublishJob(EventJobDiscarded, nj, map[string]any{"reason": "overflow"})
	s.queueEvent(EventBackpressureDropped, queue, map[string]any{"queue": queue, "job_id": nj.ID, "job_type": nj.Type})
	s.releaseUnit(ctx, depthUnit{queue: queue, seq: nj.Internal.DepthSeq})
	s.releaseOverAsync(queue, nj.Internal.OverSeq)
	return true, nil
}

// maybeReconcile checks a full queue's units for leaks, at most once per
// reconcileEvery in this process, in the background.
func (s *Service) maybeReconcile(q *bpQueue) {
	q.mu.Lock()
	due := time.Since(q.reconcile) > reconcileEvery
	if due {
		q.reconcile = time.Now()
	}
	q.mu.Unlock()
	if !due {
		return
	}
	// Under s.mu, so the goroutine is added to s.wg before Stop waits.
	s.mu.Lock()
	defer s.mu.Unlock()
	runCtx := s.bp.runCtx
	if !s.running || runCtx == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(runCtx, time.Minute)
		defer cancel()
		if n, err := s.ReconcileDepth(ctx, q.name, reconcileGrace); err != nil {
			s.log.Warn("reconcile depth units", "queue", q.name, "error", err)
		} else if n > 0 {
			s.log.Info("released leaked depth units", "queue", q.name, "units", n)
		}
	}()
}

// ReconcileDepth releases the units and overdraft units of a queue, older
// than grace, whose job does not exist, has finished, or holds another
// unit. It reads every unit once (bounded by the queue's bound plus its
// overdraft) and returns how many it released.
func (s *Service) ReconcileDepth(ctx context.Context, queue string, grace time.Duration) (int, error) {
	q := s.bp.queue(queue)
	n := 0
	if _, err := s.depthStream(ctx, q); err == nil {
		if n, err = s.releaseLeaked(ctx, queue, topology.DepthStream(queue), "", grace, false); err != nil {
			return n, err
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, err
	}
	if s.overdraftStream(ctx) == nil {
		return n, nil
	}
	m, err := s.releaseLeaked(ctx, queue, topology.OverdraftStream, topology.OverdraftSubject(queue), grace, true)
	return n + m, err
}

// releaseLeaked reads the units of queue in stream (only subject filter,
// if set; over: overdraft units) and releases those older than grace that
// no longer belong to their job.
func (s *Service) releaseLeaked(ctx context.Context, queue, stream, filter string, grace time.Duration, over bool) (int, error) {
	var occ jetstream.OrderedConsumerConfig
	if filter != "" {
		occ.FilterSubjects = []string{filter}
	}
	cons, err := s.js.OrderedConsumer(ctx, stream, occ)
	if err != nil {
		return 0, fmt.Errorf("read units of %s: %w", queue, jobstore.Unavailable(err))
	}
	released := 0
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return released, fmt.Errorf("read units of %s: %w", queue, jobstore.Unavailable(err))
		}
		n := 0
		var pending uint64
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = md.NumPending
			if time.Since(md.Timestamp) < grace {
				continue
			}
			if s.leaked(ctx, m.Headers().Get(jobstore.HeaderJobID), md.Sequence.Stream, over) {
				s.releaseUnit(ctx, depthUnit{queue: queue, seq: md.Sequence.Stream, over: over})
				released++
			}
		}
		if n == 0 || pending == 0 {
			return released, nil
		}
	}
}

// leaked reports whether unit seq (over: an overdraft unit) no longer
// belongs to job id.
func (s *Service) leaked(ctx context.Context, id string, seq uint64, over bool) bool {
	j, _, err := s.store.Get(ctx, id)
	switch {
	case isNotFound(err):
		return true
	case err != nil:
		return false
	}
	held := j.Internal.DepthSeq
	if over {
		held = j.Internal.OverSeq
	}
	return finished(j.State) || held != seq
}
