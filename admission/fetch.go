package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Fetch claims up to req.Count jobs for a worker. Queues are tried in the
// order given; inside a queue the lowest priority value goes first and
// equal priorities go oldest first (PRI-003, PRI-004). Each claimed job is
// active, its attempt counted, and its visibility timer set.
func (s *Service) Fetch(ctx context.Context, req ojs.FetchRequest) ([]*ojs.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, jobstore.Unavailable(err)
	}
	if w := s.cfg.Workers; w != nil {
		var ok bool
		if req, ok = w.Admit(req); !ok {
			return []*ojs.Job{}, nil // quiet or stopping: no new jobs (ojs-graceful-shutdown.md 5.1)
		}
	}
	req, err := s.withGroup(ctx, req)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	key := ""
	if len(req.Queues) == 1 {
		key = req.Queues[0]
	}
	// A fetch that finds nothing waits up to FetchWait for a job this
	// process makes ready (notify.go), and only a fetch about to answer
	// empty looks for jobs this process does not know of (visible.go).
	var expired <-chan time.Time
	if s.cfg.FetchWait > 0 {
		t := time.NewTimer(s.cfg.FetchWait)
		defer t.Stop()
		expired = t.C
	}
	for {
		// Taken before looking, so a job made ready meanwhile is not missed.
		woken := s.notify.channel(key)
		out, err := s.fetchOnce(ctx, req, since, expired == nil)
		if err != nil || len(out) > 0 || expired == nil || req.Budget.Full() {
			return out, err
		}
		select {
		case <-woken:
			continue // another fetch may take it first: wait on
		case <-expired:
			return s.fetchOnce(ctx, req, since, true)
		case <-ctx.Done():
			return out, nil
		}
	}
}

// fetchOnce claims up to req.Count jobs from req.Queues without waiting
// for jobs to come; since is when the fetch started, and look whether a
// queue found empty is looked at again before it counts as empty
// (visible.go).
func (s *Service) fetchOnce(ctx context.Context, req ojs.FetchRequest, since time.Time, look bool) ([]*ojs.Job, error) {
	want := min(max(req.Count, 1), s.cfg.MaxFetch)
	var out []*ojs.Job
	for _, q := range queueOrder(req) {
		if len(out) == want || req.Budget.Full() {
			break
		}
		if s.queues.paused(q) {
			continue
		}
		got, err := s.fetchQueue(ctx, q, want-len(out), req, since, look)
		out = append(out, got...)
		if err != nil {
			if len(out) > 0 {
				s.log.Warn("fetch stopped early", "queue", q, "error", err)
				return out, nil
			}
			return nil, err
		}
	}
	return out, nil
}

// queueOrder is the order a fetch tries its queues in: as listed (strict,
// ojs-priority.md 7.1), or a random order in which each queue comes first
// with a probability proportional to its weight (weighted, 7.2: weighted
// sampling without replacement, key = u^(1/w)). Every queue of weight > 0
// has a chance at every fetch, so none starves; weight 0 leaves it out.
func queueOrder(req ojs.FetchRequest) []string {
	if req.Strategy != ojs.StrategyWeighted || len(req.Queues) < 2 {
		return req.Queues
	}
	type keyed struct {
		q   string
		key float64
	}
	ks := make([]keyed, 0, len(req.Queues))
	for _, q := range req.Queues {
		w, ok := req.Weights[q]
		if !ok {
			w = 1
		}
		if w <= 0 {
			continue
		}
		ks = append(ks, keyed{q, math.Pow(rand.Float64(), 1/float64(w))})
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp.Compare(b.key, a.key) })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.q
	}
	return out
}

// fetchQueue claims up to want jobs from one queue. Ready messages come
// from the queue's puller, which serves concurrent fetches together;
// the messages are then claimed in parallel, and a message whose job
// moved on (stale) is replaced in another round. With look, a fetch that
// would answer empty looks at the stream and at other processes'
// messages pulled ahead first (visible.go), and pulls again if they hold
// some. Under a byte budget (req.Budget) it stops once a job did not fit.
func (s *Service) fetchQueue(ctx context.Context, queue string, want int, req ojs.FetchRequest, since time.Time, look bool) ([]*ojs.Job, error) {
	var out []*ojs.Job
	looked := !look
	p := s.puller(queue)
	if req.Budget != nil {
		defer func() {
			if avg := req.Budget.Average(); avg > 0 {
				p.jobSize.Store(avg)
			}
		}()
	}
	for round := 0; round < 8 && len(out) < want && !req.Budget.Full(); round++ {
		msgs, turns, err := p.take(ctx, pullSize(want-len(out), req.Budget, p.jobSize.Load()))
		if err != nil {
			passAll(turns)
			return out, err
		}
		if len(msgs) == 0 {
			switch {
			case len(out) > 0 || looked:
				return out, nil
			case p.holding():
				// Pulled ahead here since: not empty after all.
				continue
			}
			looked = true
			if !s.lookAgain(ctx, queue, since) {
				return out, nil
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			// The worker is gone: its claims would fail one by one. The
			// messages go back at once for another fetch.
			for _, m := range msgs {
				_ = m.Nak()
			}
			passAll(turns)
			return out, jobstore.Unavailable(err)
		}
		out = append(out, s.claimAll(ctx, queue, msgs, turns, req)...)
	}
	return out, nil
}

// probePull is how many messages the first round of a fetch under a byte
// budget asks for while the size of the queue's jobs is not known.
const probePull = 8

// pullSize is how many messages a round of a fetch asks for: all it still
// wants, or, under a byte budget, as many as the budget has room for at
// the average size of the jobs claimed so far (or, before any, of those
// of the queue's last budgeted fetch, hint), and one more to find out
// whether it fits; probePull when neither is known. A fetch of many large
// jobs then pulls about what its reply carries, not count jobs to give
// most of them back.
func pullSize(want int, b *ojs.FetchBudget, hint int64) int {
	if b == nil {
		return want
	}
	avg := cmp.Or(b.Average(), hint)
	if avg <= 0 {
		return min(want, probePull)
	}
	return int(min(int64(want), max(b.Left()/avg, 0)+1))
}

// seedSlack is how much smaller than its ready message a claimed job's
// public JSON may be: the message carries the job's server bookkeeping
// (x_jetgate), which a reply leaves out.
const seedSlack = 1 << 10

// cutToBudget keeps, of msgs in order, those whose jobs may fit what is
// left of the fetch's byte budget, judged by the size of the messages
// that carry their job (an available job's first ready message): the
// rest go back at once (in order, putBack) and their turns pass; cut
// reports whether any did, and the fetch is then full once the kept ones
// are claimed. A message without its job (a retry's) costs nothing here;
// its claim takes the exact cost (claim).
func (s *Service) cutToBudget(msgs []jetstream.Msg, turns []*claimTurn, b *ojs.FetchBudget) (_ []jetstream.Msg, _ []*claimTurn, cut bool) {
	left, sum := b.Left(), int64(0)
	for i, m := range msgs {
		if sum += max(int64(len(m.Data()))-seedSlack, 0); sum > left {
			s.putBack(msgs[i:])
			passAll(turns[i:])
			return msgs[:i], turns[:i], true
		}
	}
	return msgs, turns, false
}

// claimAll claims each message's job, in parallel, keeping message order
// (which is priority order); the claims pass rate limits in that order
// too (turns, claimorder.go). Under a byte budget, messages whose jobs
// did not fit are put back at once, in order.
func (s *Service) claimAll(ctx context.Context, queue string, msgs []jetstream.Msg, turns []*claimTurn, req ojs.FetchRequest) []*ojs.Job {
	if req.Budget != nil {
		var cut bool
		if msgs, turns, cut = s.cutToBudget(msgs, turns, req.Budget); cut {
			// Full, but only once the messages kept took their part.
			defer req.Budget.Refuse()
		}
		if len(msgs) == 0 {
			return nil
		}
	}
	jobs := make([]*ojs.Job, len(msgs))
	var refused []bool // errOverBudget comes only under a budget
	if req.Budget != nil {
		refused = make([]bool, len(msgs))
	}
	claim := func(i int) {
		j, err := s.claim(ctx, msgs[i], turns[i], req)
		switch {
		case errors.Is(err, errOverBudget):
			refused[i] = true
		case err != nil:
			_ = msgs[i].Nak()
			s.log.Warn("claim failed", "queue", queue, "error", err)
		default:
			jobs[i] = j
		}
	}
	if len(msgs) == 1 {
		claim(0)
	} else {
		var wg sync.WaitGroup
		for i := range msgs {
			wg.Add(1)
			s.claimers.run(func() {
				defer wg.Done()
				claim(i)
			})
		}
		wg.Wait()
	}
	var back []jetstream.Msg
	for i, r := range refused {
		if r {
			back = append(back, msgs[i])
		}
	}
	s.putBack(back)
	out := jobs[:0]
	for _, j := range jobs {
		if j != nil {
			out = append(out, j)
		}
	}
	return out
}

// pull takes up to want ready messages of a queue, lowest priority level
// first (lowest effective level first in a queue with aging, aging.go).
// A queue with one registered level is pulled directly. Otherwise the
// consumers of its registered levels tell which levels hold messages and
// how many (levels.go), or, for a queue with many levels, the counts of a
// recent lookup do (levelpull.go); the levels are then pulled in waves
// (pullLevels), in order. A pull that finds nothing reads the queue's
// record once, for levels registered by other processes that this one's
// watch has not delivered yet.
func (s *Service) pull(ctx context.Context, queue string, want int) ([]jetstream.Msg, error) {
	known := len(s.store.Levels(queue))
	out, err := s.pullKnown(ctx, queue, want)
	if len(out) > 0 || err != nil || !s.learnLevels(ctx, queue, known) {
		return out, err
	}
	return s.pullKnown(ctx, queue, want)
}

// learnLevels reads a queue's record when its known levels gave nothing:
// a level registered by another process reaches this one through the
// queue watch, a moment after the job that registered it may have been
// enqueued. It reports whether more than the known levels the pull asked
// are known now (from the record, or the watch meanwhile).
func (s *Service) learnLevels(ctx context.Context, queue string, known int) bool {
	if rec, err := s.store.GetQueue(ctx, queue); err == nil {
		s.queues.put(rec) // notes its levels
	}
	return len(s.store.Levels(queue)) > known
}

// pullKnown is pull over the levels of the queue known here.
func (s *Service) pullKnown(ctx context.Context, queue string, want int) ([]jetstream.Msg, error) {
	reg := s.store.Levels(queue)
	switch len(reg) {
	case 0:
		return nil, nil
	case 1:
		return s.fetchLevel(ctx, queue, reg[0], want)
	}
	if _, aging := s.agingOf(queue); !aging && len(reg) > maxInfoLevels {
		return s.pullMany(ctx, queue, reg, want) // levelpull.go
	}
	levels, counts, err := s.fetchLevels(ctx, queue)
	if err != nil || len(levels) == 0 {
		return nil, err
	}
	return s.pullLevels(ctx, queue, levels, counts, want) // levelpull.go
}

// fetchLevel pulls up to want ready messages of one level without waiting.
func (s *Service) fetchLevel(ctx context.Context, queue string, prio, want int) ([]jetstream.Msg, error) {
	r := s.pullLevel(ctx, queue, prio, want)
	if r.complete {
		return s.afterLevelPull(ctx, r.cons, queue, prio, r.msgs), nil // levels.go
	}
	return r.msgs, r.err
}

// levelPull is the outcome of one no-wait pull on a level: complete when
// the pull ended normally (cons is the consumer pulled from), otherwise
// the messages it got before failing, or the error.
type levelPull struct {
	cons     jetstream.Consumer
	msgs     []jetstream.Msg
	complete bool
	err      error
}

// pullLevel pulls up to want ready messages of one level without waiting.
// A consumer that vanished (removed while idle) is created again, and a
// pull that found no responder (503: the consumer's request subscription
// is being set up, as when another process updates it) is tried again
// shortly, up to three tries in all.
func (s *Service) pullLevel(ctx context.Context, queue string, prio, want int) levelPull {
	var lastErr error
	for try := range 3 {
		if try > 0 && !sleepCtx(ctx, time.Duration(try)*5*time.Millisecond) {
			break
		}
		cons, err := s.consumer(ctx, queue, prio)
		if err != nil {
			return levelPull{err: err}
		}
		msgs, err := s.store.PullNoWait(ctx, topology.ReadyConsumer(queue, prio), want)
		if err == nil {
			return levelPull{cons: cons, msgs: msgs, complete: true}
		}
		if len(msgs) > 0 {
			return levelPull{msgs: msgs}
		}
		s.consumers.Delete(topology.ReadyConsumer(queue, prio))
		lastErr = err
	}
	return levelPull{err: fmt.Errorf("fetch %s/%d: %w", queue, prio, jobstore.Unavailable(lastErr))}
}

// consumer returns the durable pull consumer of a queue level, creating it
// on first use. Idle consumers are removed by the server after ConsumerIdle.
//
// Level consumers keep their state in memory: with one consumer per level
// in use, writing each one's state file after its acks was a seventh of
// the CPU of a fetch over 256 levels (bench PriorityLevels: 256/1 levels
// from 0.22-0.26 to 0.36-0.46 without it). The state is safe to lose: the
// ready stream is a WorkQueue, so every message not yet acked is still
// there after a server restart, the consumer is created again, and a
// message of a job already active is recognised by its held token
// (lease.go) rather than handed out twice.
func (s *Service) consumer(ctx context.Context, queue string, prio int) (jetstream.Consumer, error) {
	name := topology.ReadyConsumer(queue, prio)
	if c, ok := s.consumers.Load(name); ok {
		return c.(jetstream.Consumer), nil
	}
	c, err := s.assets.Ready.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:           name,
		Description:       fmt.Sprintf("jetgate ready jobs of queue %q at priority %d", queue, prio),
		FilterSubjects:    topology.ReadyLevelFilters(queue, prio),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           s.cfg.ClaimAckWait,
		MaxAckPending:     -1,
		MaxDeliver:        -1,
		InactiveThreshold: s.cfg.ConsumerIdle,
		MemoryStorage:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, jobstore.Unavailable(err))
	}
	s.consumers.Store(name, c)
	return c, nil
}

// claim turns one ready message into an active job, or returns nil when
// the message is stale (the job moved on) or the job expired. It is one
// transition of the job; what happens to the message follows from the
// outcome. turn orders its limit updates after those of the earlier
// messages of its pull (claimorder.go); it passes when claim returns, or
// as soon as the start is counted.
func (s *Service) claim(ctx context.Context, msg jetstream.Msg, turn *claimTurn, req ojs.FetchRequest) (*ojs.Job, error) {
	defer turn.pass()
	ref, ok := jobstore.Ref(msg.Headers())
	if !ok {
		_ = msg.Term()
		return nil, nil
	}
	if b := jobstore.BatchOf(msg.Headers()); b != "" {
		// A job of a batch is one only once the batch committed
		// (jobstore/batchmark.go).
		state, err := s.store.SeedBatch(ctx, b)
		switch {
		case err != nil:
			return nil, err
		case state == jobstore.BatchAborted:
			_ = msg.TermWithReason("the job's batch was not stored")
			return nil, nil
		case state == jobstore.BatchPending:
			_ = msg.NakWithDelay(batchRetry)
			return nil, nil
		}
	}
	promoted := jobstore.Promoted(msg.Headers())
	var deferral time.Duration
	// The holder sentinel's level covering the held message (lease.go),
	// until a deferred lease write holds it.
	var cover string
	defer func() { s.holder.release(cover) }()
	// Starts counted in rate limit entries for the record being written;
	// refusal is set when a limit refused the start.
	var held []heldStart
	var refusal *limitRefusal
	// cost is what the job took of the fetch's byte budget (req.Budget).
	var cost int64
	apply := func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		// An earlier round of this transition took its cost: give it back.
		req.Budget.Give(cost)
		cost = 0
		switch {
		case j.State == ojs.StateActive && j.Internal.HeldToken == ref.Token:
			return nil, nil, errRedelivered
		case j.State != ojs.StateAvailable || j.Internal.Token != ref.Token:
			return nil, nil, staleOrEarly(j, ref)
		}
		if d, ok := s.expiry(j, s.now()); ok {
			return s.expire(j, d)
		}
		nj := s.activate(j, req, s.now())
		if req.Budget != nil {
			n, err := ojs.ReplySize(nj)
			if err != nil {
				return nil, nil, err
			}
			if !req.Budget.Take(n) {
				return nil, nil, errOverBudget
			}
			cost = n
		}
		checks := s.limitChecks(j)
		nj.Internal.Limits = limitEntryNames(checks)
		turn.declare(nj.Internal.Limits)
		var leaseTimer func(context.Context, *ojs.Job) error
		deferral = s.leaseDeferral(nj.Internal.LeaseUntil.Sub(nj.StartedAt.Time))
		if deferral > 0 {
			nj.Internal.HeldAck, nj.Internal.HeldToken = msg.Reply(), ref.Token
			leaseTimer = func(ctx context.Context, nj *ojs.Job) error { return s.coverHeld(ctx, msg, nj, &cover) }
		} else {
			leaseTimer = func(ctx context.Context, nj *ojs.Job) error {
				at, kv := s.firstLease(nj)
				return s.store.SetJobTimer(ctx, topology.TimerLease, nj, at, kv...)
			}
		}
		if len(checks) == 0 {
			return nj, leaseTimer, nil
		}
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			// An earlier round of this transition lost its compare-and-swap:
			// take its starts back before counting this one's.
			s.undoStarts(ctx, held)
			held, refusal = nil, nil
			// Earlier claims of the queue's pulls sharing an entry are
			// counted first (claimorder.go).
			h, r, err := s.acquireLimits(ctx, nj, checks, promoted, turn)
			switch {
			case err != nil:
				return err
			case r != nil:
				refusal = r
				return errLimited
			}
			held = h
			turn.pass()
			if leaseTimer != nil {
				return leaseTimer(ctx, nj)
			}
			return nil
		}, nil
	}
	// A message that carries its job (an available job without a record
	// yet) is claimed from its body: the write creates the record.
	nj, old, err := s.transitionFrom(ctx, ref.JobID, func() *ojs.Job { return jobstore.Seed(msg) }, apply)
	if isNotFound(err) {
		// The record may be being created by this process (its ready
		// message goes out first), or may have landed while the read was
		// on its way (the create's mark is gone by then): read it once
		// more before the message is put back for 50 ms or more.
		s.awaitCreate(ctx, ref.JobID)
		nj, old, err = s.transition(ctx, ref.JobID, apply)
	}
	if err != nil || nj.State != ojs.StateActive {
		req.Budget.Give(cost) // not claimed: the job is not answered
	}
	if err != nil && len(held) > 0 {
		if errors.Is(err, ojs.ErrUnavailable) {
			// The record may have been written all the same (a lost
			// answer): keep the starts, and release the slots later
			// unless the job turns out active with them.
			for _, h := range held {
				if h.grant.Leased {
					s.promoter.reclaimLater(h.entry, h.grant.JobID, h.grant.Token(), reclaimClaimed)
				}
			}
		} else {
			s.undoStarts(ctx, held)
		}
	}
	if s.debugging() {
		s.log.Debug("claim", "job", ref.JobID, "token", ref.Token, "base_rev", ref.BaseRev, "deferral", deferral, "outcome", outcome(err))
	}
	switch {
	case isNotFound(err):
		s.orphan(msg)
		return nil, nil
	case errors.Is(err, errRedelivered):
		return nil, s.redelivered(ctx, old, msg)
	case errors.Is(err, errStale):
		_ = msg.Ack()
		return nil, nil
	case errors.Is(err, errEarly):
		s.orphan(msg)
		return nil, nil
	case errors.Is(err, errOverBudget):
		// Not claimed: the fetch's reply has no room for it. claimAll
		// puts the message back at once.
		return nil, errOverBudget
	case errors.Is(err, errLimited):
		// Parked (or rescheduled, dropped) after the earlier claims
		// sharing an entry went their way: waiters stay in message order.
		if err := turn.await(ctx); err != nil {
			return nil, err
		}
		if err := s.onLimited(ctx, msg, old, refusal); err != nil {
			return nil, err
		}
		return nil, nil
	case err != nil:
		// The message is put back: the job is still available.
		return nil, err
	case nj.State == ojs.StateDiscarded:
		_ = msg.Ack()
		s.expired(ctx, old, nj)
		return nil, nil
	}
	if nj.Internal.HeldAck != "" {
		s.holdLease(nj, deferral, cover)
		cover = ""
	} else {
		_ = msg.Ack()
	}
	s.releaseClaimed(old, nj)
	s.recordStart(ctx, old, nj, nj.StartedAt.Time)
	if len(held) > 0 {
		s.startedLimited(ctx, msg, held)
	}
	return nj, nil
}

// batchRetry is how soon a seed of a batch still being stored comes
// back: a batch's publish takes milliseconds, and one older than
// jobstore.BatchWindow is abandoned by the next claim that meets it.
const batchRetry = 50 * time.Millisecond

// errOverBudget marks a job not claimed because the fetch's reply has no
// room left for it (ojs.FetchBudget).
var errOverBudget = errors.New("no room left in the fetch's reply")

// errRedelivered marks a held ready message that came back while its job
// is still active from the claim that held it.
var errRedelivered = errors.New("held ready message redelivered")

// activate computes the active record of a claimed job.
func (s *Service) activate(j *ojs.Job, req ojs.FetchRequest, now time.Time) *ojs.Job {
	nj := j.Clone()
	nj.State = ojs.StateActive
	nj.Attempt++
	nj.StartedAt = ojs.NewTime(now)
	nj.CompletedAt = nil
	nj.WorkerID = req.WorkerID
	beat := req.VisibilityTimeout
	if beat <= 0 {
		beat = j.HeartbeatTimeoutOr(s.cfg.DefaultHeartbeatTimeout)
	}
	nj.Internal.Token = jobstore.NewToken()
	nj.Internal.BeatMs = max(beat.Milliseconds(), 1)
	// A new attempt starts without progress (ojs-progress.md 5.3); the
	// last checkpoint stays for it to resume from.
	nj.Progress, nj.ProgressData, nj.ProgressMessage, nj.ProgressUpdatedAt = nil, nil, "", nil
	at, _ := s.attemptOf(nj).next(now, beat, now)
	nj.Internal.LeaseUntil = ojs.NewTime(at)
	clearHeld(nj)
	if !s.keepsUnitActive(nj.Queue) {
		// Depth counts waiting jobs, not running ones: the unit goes back
		// once the claim lands (releaseClaimed).
		nj.Internal.DepthSeq, nj.Internal.OverSeq = 0, 0
	}
	return nj
}

// errEarly marks a ready message met before the record change it was
// published for. It is put back like an orphan (growing delays), and a
// transition that never lands (its process died between the message and
// the write) leaves it to be dropped after them.
var errEarly = errors.New("ready message ahead of its record")

// orphan puts back a ready message whose record does not exist yet, or
// is not yet at the change the message was published for (retryOrphan),
// and drops it once that is too old to land.
func (s *Service) orphan(msg jetstream.Msg) {
	if !retryOrphan(msg) {
		_ = msg.TermWithReason("job record never reached the change this message was published for")
	}
}

// orphanWindow is how long a message whose record change has not landed
// keeps coming back. A transition publishes its messages first and writes
// the record right after, so the record normally follows within
// milliseconds; on a cluster electing a new leader (a node restart) the
// write can take seconds. Only after the window is the transition taken as
// failed (its process died between the message and the write) and the
// message dropped: dropping it sooner strands a job whose write was only
// slow — active with no lease, or available with no ready message.
const orphanWindow = 2 * time.Minute

// retryOrphan puts msg back with a growing delay (50 ms doubling to 3.2 s)
// while it is younger than orphanWindow; false means the window is over.
func retryOrphan(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil || time.Since(md.Timestamp) > orphanWindow {
		return false
	}
	n := min(max(md.NumDelivered, 1), 7)
	_ = msg.NakWithDelay(50 * time.Millisecond << (n - 1))
	return true
}

// recordStart records a claim in the stats, metrics and events.
func (s *Service) recordStart(ctx context.Context, j, nj *ojs.Job, now time.Time) {
	var wait time.Duration
	if j.EnqueuedAt != nil {
		wait = now.Sub(j.EnqueuedAt.Time)
	}
	s.stats.move(nj.Queue, nj.Priority, ojs.StateAvailable, ojs.StateActive)
	s.stats.sample(nj.Queue, func(smp *statSample) {
		smp.Started++
		smp.WaitMs += wait.Milliseconds()
	})
	s.met.JobStarted(ctx, nj.Queue, nj.Type, nj.Attempt, wait)
	if nj.Attempt <= 1 {
		s.met.JobWaitedByPriority(ctx, nj.Queue, nj.Priority, wait)
		if j.CreatedAt != nil {
			s.met.JobEnqueueWait(ctx, nj.Queue, now.Sub(j.CreatedAt.Time))
		}
	}
	s.beats.start(nj, now)
	s.events.PublishJob(EventJobStarted, nj, nil)
}
