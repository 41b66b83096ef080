package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Depth is what the spec counts (ojs-backpressure.md 3): available +
// scheduled + retryable (and pending, which becomes available without
// passing the bound again). A job gives its unit back when a worker claims
// it, and a failed attempt that will be retried takes one again, in the
// pre-write step of its transition, so the retryable record names it.
//
// A retry is never refused: the job was accepted, and jetgate does not
// lose accepted jobs. When its queue is full at that moment, the job takes
// an overdraft unit instead, in OJS_OVERDRAFT (no limits), and counts over
// the bound until it is claimed again or finishes. Reported depth is units
// plus overdraft units, so X-OJS-Queue-Depth can read above the bound
// while retries overdraw it. Producers are admitted by the depth stream's
// limits alone, so a queue holds at most max_depth jobs admitted by
// producers plus the retries of jobs that were running when it filled.
// Queues that must never exceed the bound, retries included, set
// count_active: a job then keeps its unit while active, and its retry
// finds its place still held.

// keepsUnitActive reports whether an active job of queue keeps its unit.
func (s *Service) keepsUnitActive(queue string) bool {
	cfg, _ := s.backpressureOf(queue)
	return cfg.Bounded() && cfg.CountActive
}

// releaseClaimed gives back the units a claim let go of: those of old (the
// available record) that nj (the active one) no longer names.
func (s *Service) releaseClaimed(old, nj *ojs.Job) {
	if seq := old.Internal.DepthSeq; seq != 0 && nj.Internal.DepthSeq != seq {
		s.releaseAsync(old.Queue, seq)
	}
	if seq := old.Internal.OverSeq; seq != 0 && nj.Internal.OverSeq != seq {
		s.releaseOverAsync(old.Queue, seq)
	}
}

// reentry is the unit a failed attempt takes to retry. One transition may
// compute its record several times (compare-and-swap conflicts); the unit
// is taken once and reused, and given back by done when the record that
// landed does not name it.
type reentry struct {
	queue string
	depth uint64
	over  uint64
}

// take gives nj (a retryable record of a job that holds no unit) a unit of
// its queue, or an overdraft unit when the queue is full. Queues that are
// unbounded or count active jobs need none.
func (s *Service) take(ctx context.Context, re *reentry, nj *ojs.Job) error {
	if nj.Internal.DepthSeq != 0 || nj.Internal.OverSeq != 0 {
		return nil
	}
	cfg, source := s.backpressureOf(nj.Queue)
	if !cfg.Bounded() || cfg.CountActive {
		return nil
	}
	re.queue = nj.Queue
	if re.depth == 0 && re.over == 0 {
		q := s.bp.queue(nj.Queue)
		if err := s.ensureDepth(ctx, q, cfg, source); err != nil {
			return err
		}
		probe := nj.Clone() // sized and tenanted like the job
		err := s.tryAcquire(ctx, q, cfg, []*ojs.Job{probe})
		if _, full := errors.AsType[*fullError](err); full {
			seq, err := s.overdraw(ctx, nj)
			if err != nil {
				return err
			}
			re.over = seq
			s.overdrawn(ctx, q, cfg, nj)
		} else if err != nil {
			return err
		} else {
			re.depth = probe.Internal.DepthSeq
			s.acquired(ctx, q, cfg, 1)
		}
	}
	nj.Internal.DepthSeq, nj.Internal.OverSeq = re.depth, re.over
	return nil
}

// done gives back the unit taken for a transition that did not land, or
// landed a record without it (the retry turned into a discard).
func (s *Service) done(re *reentry, nj *ojs.Job) {
	if re.depth != 0 && (nj == nil || nj.Internal.DepthSeq != re.depth) {
		s.releaseAsync(re.queue, re.depth)
	}
	if re.over != 0 && (nj == nil || nj.Internal.OverSeq != re.over) {
		s.releaseOverAsync(re.queue, re.over)
	}
}

// overdraw publishes a job's overdraft unit.
func (s *Service) overdraw(ctx context.Context, j *ojs.Job) (uint64, error) {
	if err := s.ensureOverdraft(ctx); err != nil {
		return 0, err
	}
	m := nats.NewMsg(topology.OverdraftSubject(j.Queue))
	m.Header.Set(jobstore.HeaderJobID, j.ID)
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("overdraft unit of %s: %w", j.Queue, jobstore.Unavailable(err))
	}
	return ack.Sequence, nil
}

// overdrawn accounts an overdraft unit just taken: the queue's depth went
// over its bound, which is an overflow the operator hears about.
func (s *Service) overdrawn(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, j *ojs.Job) {
	q.mu.Lock()
	q.over++
	q.mu.Unlock()
	p := s.observe(ctx, q, cfg, true)
	s.queueEvent(EventQueueOverflow, q.name, map[string]any{
		"queue": q.name, "depth": p.Depth, "bound": cfg.MaxDepth, "max_depth": cfg.MaxDepth,
		"strategy": cfg.Strategy, "bound_type": "overdraft", "job_type": j.Type, "job_id": j.ID, "jobs": 1,
	})
}

// overdraft is this process's handle of OJS_OVERDRAFT.
type overdraft struct {
	mu      sync.Mutex
	stream  jetstream.Stream
	checked time.Time // when the stream was last found missing
}

// overdraftRecheck spaces the lookups of a missing overdraft stream.
const overdraftRecheck = 2 * time.Second

// ensureOverdraft creates the overdraft stream (once per process).
func (s *Service) ensureOverdraft(ctx context.Context) error {
	s.bp.over.mu.Lock()
	defer s.bp.over.mu.Unlock()
	if s.bp.over.stream != nil {
		return nil
	}
	info := s.assets.Ready.CachedInfo()
	st, err := s.sideStream(ctx, jetstream.StreamConfig{
		Name:        topology.OverdraftStream,
		Description: "jetgate overdraft units: one message per retry that came back to a full bounded queue",
		Subjects:    []string{topology.OverdraftSubjects},
		Storage:     info.Config.Storage,
	})
	if err != nil {
		return err
	}
	s.bp.over.stream = st
	return nil
}

// overdraftStream returns the overdraft stream, nil while it does not
// exist (looked up at most every overdraftRecheck).
func (s *Service) overdraftStream(ctx context.Context) jetstream.Stream {
	o := &s.bp.over
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stream != nil || time.Since(o.checked) < overdraftRecheck {
		return o.stream
	}
	st, err := s.js.Stream(ctx, topology.OverdraftStream)
	if err != nil {
		o.checked = time.Now()
		return nil
	}
	o.stream = st
	return st
}

// overdraftCount reads how many overdraft units queue holds.
func (s *Service) overdraftCount(ctx context.Context, queue string) (int64, bool) {
	st := s.overdraftStream(ctx)
	if st == nil {
		return 0, true
	}
	subj := topology.OverdraftSubject(queue)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, false
	}
	return int64(info.State.Subjects[subj]), true
}

// releaseOverAsync deletes an overdraft unit in the background, like
// releaseAsync.
func (s *Service) releaseOverAsync(queue string, seq uint64) {
	if seq != 0 {
		s.handOff(depthUnit{queue: queue, seq: seq, over: true})
	}
}

// releaseOver deletes an overdraft unit (idempotent).
func (s *Service) releaseOver(ctx context.Context, u depthUnit) {
	st := s.overdraftStream(ctx)
	if st == nil {
		return
	}
	if err := st.DeleteMsg(ctx, u.seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNoMessage(err) {
		s.log.Warn("release overdraft unit", "queue", u.queue, "seq", u.seq, "error", err)
		return
	}
	q := s.bp.queue(u.queue)
	q.mu.Lock()
	q.over = max(0, q.over-1)
	q.mu.Unlock()
}

// sideStream creates (or updates) one of the backpressure's shared
// streams, limits retention, replicated like the ready stream.
func (s *Service) sideStream(ctx context.Context, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	sc.Retention = jetstream.LimitsPolicy
	sc.Replicas = s.assets.Ready.CachedInfo().Config.Replicas
	st, err := s.js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", sc.Name, jobstore.Unavailable(err))
	}
	return st, nil
}
