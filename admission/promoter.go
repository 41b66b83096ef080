package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/kvlimits"
)

// promoter releases the waiters of limit entries when they may start. It
// is woken by this process's releases, refusals and timers (kick), and by
// the entries' JetStream limit timers, which any process handles: those
// make sure no waiter is left behind when the process that would have
// woken it is gone. Its goroutines belong to the Service and stop with it.
type promoter struct {
	s *Service

	mu      sync.Mutex
	queued  map[string]kvlimits.Entry
	order   []string
	running map[string]bool // entries being promoted now
	again   map[string]bool // kicked while being promoted
	local   map[string]*time.Timer
	// verified is when each entry's leases were last verified by a
	// round of this process (verifyDue).
	verified map[string]time.Time
	armed    map[string]time.Time // JetStream limit timers this process set
	// reclaims are slots whose release or undo failed, or whose acquire
	// had an unknown outcome (NATS unavailable): before the entry's next
	// promotion round, each is released (unless its job may be active
	// with it, reclaim).
	reclaims map[string][]reclaimReq
	wake     chan struct{}
	stopped  bool
	wg       sync.WaitGroup
	// sweepEvery is how often sweep looks for forgotten waiters
	// (LimitBackstop; tests shorten it before start).
	sweepEvery time.Duration
}

// promoterWorkers is how many entries are promoted at once.
const promoterWorkers = 4

// LimitBackstop is when an entry whose waiters wait for a running job is
// looked at again even if no release wakes it (a release lost with its
// process): its leases are verified then.
const LimitBackstop = 15 * time.Second

func newPromoter(s *Service) *promoter {
	return &promoter{
		s:        s,
		queued:   map[string]kvlimits.Entry{},
		running:  map[string]bool{},
		again:    map[string]bool{},
		local:    map[string]*time.Timer{},
		verified: map[string]time.Time{},
		armed:    map[string]time.Time{},
		reclaims: map[string][]reclaimReq{},
		wake:     make(chan struct{}, 1),

		sweepEvery: LimitBackstop,
	}
}

func (p *promoter) start(ctx context.Context) {
	for range promoterWorkers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.work(ctx)
		}()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.sweep(ctx)
	}()
}

// sweep makes sure no waiter is forgotten: every sweepEvery it lists the
// entries with waiters stored and kicks each one this process holds no
// wake-up for (a local timer).
//
// The wake-ups of a waiting entry are a release or park that kicks it, a
// local timer, and a JetStream limit timer; all three can be lost
// together: the process that armed the local timer is killed after its
// JetStream timer failed to be written (a NATS node was down), or a read
// behind the writes cleared the waiting hint, so releases no longer kick.
// The entry then waited for the next park, which may never come (found by
// the chaos suite, cmd/jetgate/chaos: 30 window-limited jobs left
// waiting, their key open, no timer anywhere). The sweep costs one stream
// info per process per interval, plus a round for each waiting entry the
// process had no timer for.
func (p *promoter) sweep(ctx context.Context) {
	t := time.NewTicker(p.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		names, err := p.s.store.WaitingEntries(lctx)
		cancel()
		if err != nil {
			p.s.log.Debug("limit sweep failed; next interval", "error", err)
			continue
		}
		for _, name := range names {
			e, ok := kvlimits.ParseEntry(name)
			if !ok {
				continue
			}
			p.mu.Lock()
			_, armed := p.local[name]
			p.mu.Unlock()
			if !armed {
				p.s.log.Debug("limit sweep: waiters without a wake-up here", "limit", name)
				p.kick(e)
			}
		}
	}
}

// stop ends the workers and local timers; ctx of start must be cancelled.
func (p *promoter) stop() {
	p.mu.Lock()
	p.stopped = true
	for k, t := range p.local {
		t.Stop()
		delete(p.local, k)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// kick asks for an entry to be looked at soon.
func (p *promoter) kick(e kvlimits.Entry) {
	name := e.Name()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if p.running[name] {
		p.again[name] = true
		return
	}
	if _, ok := p.queued[name]; !ok {
		p.queued[name] = e
		p.order = append(p.order, name)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// reclaimKind says what is known of the activation whose slot is
// reclaimed.
type reclaimKind int

const (
	// reclaimEnded: the activation is over for certain (the job left
	// active with a compare-and-swap that landed, or never was active
	// with that token): the slot is released without reading the job.
	reclaimEnded reclaimKind = iota
	// reclaimClaimed: a claim's write got no answer; the job may be
	// active with the token. Released once the job is fenced otherwise
	// (fenceActivation); kept if the job is active with it.
	reclaimClaimed
	// reclaimLeaving: a write taking the job out of active got no
	// answer; it may have landed. Released once the job reads as not
	// active with the token (the activation can never come back); while
	// it reads active with it, looked at again later, since the read may
	// come from a replica behind the write.
	reclaimLeaving
)

// reclaimReq is a slot to reclaim: the activation of a job with a token.
type reclaimReq struct {
	lease kvlimits.Lease
	kind  reclaimKind
}

// reclaimLater queues the slot of an activation of jobID (token) to be
// looked at in a second (reclaim).
func (p *promoter) reclaimLater(e kvlimits.Entry, jobID, token string, kind reclaimKind) {
	p.s.log.Debug("limit reclaim queued", "limit", e.Name(), "job", jobID, "token", token, "kind", int(kind))
	p.mu.Lock()
	p.reclaims[e.Name()] = append(p.reclaims[e.Name()], reclaimReq{lease: kvlimits.Lease{JobID: jobID, Token: token}, kind: kind})
	p.mu.Unlock()
	p.at(e, p.s.now().Add(time.Second))
}

// takeReclaims returns and forgets the pending reclaims of an entry.
func (p *promoter) takeReclaims(e kvlimits.Entry) []reclaimReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.reclaims[e.Name()]
	delete(p.reclaims, e.Name())
	return ls
}

func (p *promoter) next() (kvlimits.Entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.order) > 0 {
		name := p.order[0]
		p.order = p.order[1:]
		e, ok := p.queued[name]
		if !ok {
			continue
		}
		delete(p.queued, name)
		p.running[name] = true
		return e, true
	}
	return kvlimits.Entry{}, false
}

func (p *promoter) done(e kvlimits.Entry) {
	name := e.Name()
	p.mu.Lock()
	delete(p.running, name)
	again := p.again[name]
	delete(p.again, name)
	p.mu.Unlock()
	if again {
		p.kick(e)
	}
}

func (p *promoter) work(ctx context.Context) {
	for {
		e, ok := p.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
				continue
			}
		}
		// Another worker may be waiting on the same wake: pass it on.
		select {
		case p.wake <- struct{}{}:
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := p.s.promote(pctx, e); err != nil && ctx.Err() == nil {
			p.s.log.Warn("rate limit waiters not released; retrying", "limit", e, "error", err)
			p.at(e, p.s.now().Add(time.Second))
		}
		cancel()
		p.done(e)
	}
}

// at wakes the entry at t with a local timer (precise, lost with the
// process) and makes sure a JetStream limit timer fires soon after
// (durable, about a second of precision).
func (p *promoter) at(e kvlimits.Entry, t time.Time) {
	name := e.Name()
	now := p.s.now()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	if old, ok := p.local[name]; ok {
		old.Stop()
	}
	p.local[name] = time.AfterFunc(max(t.Sub(now), 0), func() {
		p.mu.Lock()
		delete(p.local, name)
		p.mu.Unlock()
		p.kick(e)
	})
	backstop := t.Add(time.Second)
	armed, ok := p.armed[name]
	needTimer := !ok || armed.Before(now) || armed.After(backstop.Add(time.Second))
	if needTimer {
		p.armed[name] = backstop
	}
	p.mu.Unlock()
	if needTimer {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.s.store.SetLimitTimer(ctx, name, backstop); err != nil {
			p.s.log.Warn("limit timer not set", "limit", e, "error", err)
			p.mu.Lock()
			delete(p.armed, name)
			p.mu.Unlock()
		}
	}
}

// verifyDue reports whether a round of this process should verify the
// leases of entry name at now (once per LimitBackstop), and notes it.
func (p *promoter) verifyDue(name string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if last, ok := p.verified[name]; ok && now.Sub(last) < LimitBackstop {
		return false
	}
	if len(p.verified) > 10_000 {
		clear(p.verified) // bounded: forgetting only makes a verify come early
	}
	p.verified[name] = now
	return true
}

// maxPromote bounds the waiters released in one round; more follow in
// the next round at once.
const maxPromote = 256

// promote releases as many of an entry's waiters as may start now, oldest
// of the lowest priority value first, and arranges to look again when
// more may.
func (s *Service) promote(ctx context.Context, e kvlimits.Entry) error {
	if err := s.reclaim(ctx, e, s.promoter.takeReclaims(e)); err != nil {
		return err
	}
	now := s.now()
	var n, waiting int
	var rev uint64
	var next time.Time
	var promised map[string]ojs.Time
	if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		c := st.Clone()
		n, next = c.Promotable(now, maxPromote)
		waiting, promised, rev = st.Waiting, c.Promised, st.Revision() // c: expired promises left out
		return false
	}); err != nil {
		return err
	}
	if n == 0 && len(promised) == 0 {
		if waiting == 0 {
			// The hint says nobody waits; make sure (a hint behind the
			// waiters would leave them unwoken).
			count, err := s.store.WaitingCount(ctx, e.Name())
			if err != nil {
				return err
			}
			if waiting = max(count-len(promised), 0); waiting > 0 {
				if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
					if st.Waiting >= waiting {
						return false
					}
					st.Waiting = waiting
					return true
				}); err != nil {
					return err
				}
			}
		}
		if waiting > 0 {
			if next.IsZero() {
				// Waiting for running jobs to finish: a release wakes
				// the entry; the backstop covers a release lost with its
				// process. Leases whose release was lost are verified in
				// this round too, not only when the entry's JetStream
				// timer fires: in the chaos suite two leases of finished
				// jobs held a full key for minutes while its rounds ran
				// every 15 s and the timer's rounds reclaimed nothing,
				// until a process started afresh did.
				// At most once per LimitBackstop per entry and process:
				// parks kick rounds too, and a lease older than
				// StaleLeaseAge costs a read of its job.
				if s.promoter.verifyDue(e.Name(), now) {
					reclaimed, err := s.verifyLeases(ctx, e)
					if err != nil {
						return err
					}
					if reclaimed {
						s.promoter.kick(e)
						return nil
					}
				}
				next = now.Add(LimitBackstop)
			}
			s.promoter.at(e, next)
		}
		return nil
	}
	// Promised waiters are read again too, even when nobody else may
	// start now: one whose ready message did not get out (the promise is
	// written first, and the publish may fail or go unanswered) is
	// published again, which the ready stream deduplicates. A successful
	// promotion removes its waiter, so this reads only the ones left.
	ws, err := s.store.Waiters(ctx, e.Name(), n+len(promised), nil)
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		if waiting > 0 {
			// Nobody waits after all (a process died between counting a
			// waiter and storing it): clear the hint, unless the entry
			// changed meanwhile.
			return s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
				if st.Revision() != rev || st.Waiting == 0 {
					return false
				}
				st.Waiting = 0
				return true
			})
		}
		return nil
	}
	// A waiter whose job moved on (cancelled, or started from a copy of
	// its message) is dropped rather than given a slot. A read behind the
	// park (a revision not past the one the parking claim read, as a
	// newly elected stream leader may answer) proves nothing: the waiter
	// stays for a later round, and the waiters after it are read in its
	// place. Dropping it lost the job: its record stays available with no
	// message left to start it (found by the chaos suite,
	// cmd/jetgate/chaos, with NATS nodes killed).
	live, behind, err := s.liveWaiters(ctx, e, ws)
	if err != nil {
		return err
	}
	if behind {
		s.promoter.at(e, now.Add(time.Second))
	}
	var taken, gone []jobstore.Waiter
	if err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		k, _ := st.Promotable(now, len(live))
		taken, gone = taken[:0], gone[:0]
		changed := false
		for _, w := range live {
			_, promisedNow := st.Promised[w.JobID]
			switch {
			case st.WasReleased(w.Seq) && promisedNow:
				taken = append(taken, w) // publish again, slot already kept
			case st.WasReleased(w.Seq):
				// Released, and its promise taken by a claim (the job
				// started, or parked again as a new waiter). A promise
				// that expired instead took its sequence out of Released
				// (kvlimits.State.PromisedSeq): its message may never
				// have landed, and the waiter is promoted again below.
				// Taking that one for started lost the job (found by the
				// chaos suite, cmd/jetgate/chaos).
				gone = append(gone, w)
			case promisedNow:
				// Promised from another waiter of the same job (parked
				// again): that one carries the promise.
			case k > 0:
				st.Promise(w.JobID, w.Seq, now)
				taken = append(taken, w)
				changed = true
				k--
			}
		}
		return changed
	}); err != nil {
		return err
	}
	for _, w := range gone {
		s.store.Drop(ctx, w)
	}
	for _, w := range taken {
		if err := s.store.Promote(ctx, w); err != nil {
			// The waiter stays stored and promised: the next round
			// publishes it again.
			return err
		}
		s.notify.ready(w.Queue)
		s.events.Publish(EventRateLimitReleased, e.Key, map[string]any{
			"key": e.Key, "scope": e.Scope, "job_id": w.JobID, "queue": w.Queue, "priority": w.Priority,
		})
	}
	if len(taken) == 0 {
		if next.IsZero() {
			next = now.Add(LimitBackstop)
		}
		s.promoter.at(e, next)
		return nil
	}
	// Look again: more may start now (a full round), or later.
	s.promoter.kick(e)
	return nil
}

// liveWaiters returns the waiters of ws whose job is still available with
// their token, dropping those whose job moved on. A waiter whose record
// read is behind its park is kept and replaced, for this round, by the
// next waiters of the entry (a few reads at most); behind reports one.
func (s *Service) liveWaiters(ctx context.Context, e kvlimits.Entry, ws []jobstore.Waiter) (live []jobstore.Waiter, behind bool, err error) {
	seen := map[uint64]bool{}
	for round := 0; len(ws) > 0; round++ {
		skipped := 0
		for _, w := range ws {
			seen[w.Seq] = true
			j, rev, err := s.store.Get(ctx, w.JobID)
			switch {
			case err != nil && !isNotFound(err):
				return nil, behind, err
			case err == nil && j.State == ojs.StateAvailable && j.Internal.Token == w.Token:
				live = append(live, w)
			case err == nil && w.BaseRev != 0 && rev <= w.BaseRev:
				behind = true
				skipped++
			default:
				s.store.Drop(ctx, w)
			}
		}
		if skipped == 0 || round == 3 {
			break
		}
		if ws, err = s.store.Waiters(ctx, e.Name(), skipped, func(seq uint64) bool { return seen[seq] }); err != nil {
			return nil, behind, err
		}
	}
	return live, behind, nil
}

// reclaim releases the slots of rs whose activation is over: those known
// to be, and those whose job is not active with them; on a failure the
// rest are queued again.
//
// A slot whose release failed is released without reading its job: on a
// cluster the read may come from a replica still behind, showing the job
// active from the very activation whose end failed to release it, and the
// slot would never be freed.
//
// A slot whose activation may yet land (a claim whose write had no
// answer) is released only once the job is fenced: its record is written
// again as read, so a claim write still on its way, which expects the
// revision read, can no longer land and make the job active without its
// slot (RL-001: never over the limit). If the fence loses, the record
// changed (or the read was behind): the job is read again next round.
func (s *Service) reclaim(ctx context.Context, e kvlimits.Entry, rs []reclaimReq) error {
	var free []kvlimits.Lease
	for i, r := range rs {
		l := r.lease
		var done, again bool
		var err error
		switch r.kind {
		case reclaimEnded:
			done = true
		case reclaimClaimed:
			done, again, err = s.fenceActivation(ctx, l)
		case reclaimLeaving:
			done, err = s.activationLeft(ctx, l)
			again = err == nil && !done
		}
		if err != nil {
			for _, r := range rs[i:] {
				s.promoter.reclaimLater(e, r.lease.JobID, r.lease.Token, r.kind)
			}
			return err
		}
		if again {
			s.promoter.reclaimLater(e, l.JobID, l.Token, r.kind)
		}
		if done {
			free = append(free, l)
		}
	}
	if len(free) == 0 {
		return nil
	}
	err := s.limits.Update(ctx, e, func(st *kvlimits.State) bool {
		changed := false
		for _, l := range free {
			if st.Release(l.JobID, l.Token) {
				changed = true
			}
		}
		return changed
	})
	for _, l := range free {
		s.log.Debug("limit reclaimed", "limit", e.Name(), "job", l.JobID, "token", l.Token, "outcome", outcome(err))
	}
	if err != nil {
		for _, l := range free {
			s.promoter.reclaimLater(e, l.JobID, l.Token, reclaimEnded)
		}
	}
	return err
}

// activationLeft reports whether job l.JobID reads as no longer active
// with token l.Token.
func (s *Service) activationLeft(ctx context.Context, l kvlimits.Lease) (bool, error) {
	j, _, err := s.store.Get(ctx, l.JobID)
	switch {
	case isNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return j.State != ojs.StateActive || j.Internal.Token != l.Token, nil
}

// fenceActivation makes sure job l.JobID is not and will not become active
// with token l.Token (fenced). It is not fenced if the job is active with
// it (its own release frees the slot), or if the record changed under the
// fence (again: read it once more later).
func (s *Service) fenceActivation(ctx context.Context, l kvlimits.Lease) (fenced, again bool, err error) {
	j, rev, err := s.store.Get(ctx, l.JobID)
	switch {
	case isNotFound(err):
		return true, false, nil
	case err != nil:
		return false, false, err
	case j.State == ojs.StateActive && j.Internal.Token == l.Token:
		s.log.Debug("limit reclaim kept", "job", l.JobID, "token", l.Token)
		return false, false, nil
	case j.State.Terminal():
		// A claim's write expects a revision at which the job was
		// available, older than this one: it cannot land. (Rewriting a
		// finished record would also drop its retention TTL.)
		return true, false, nil
	}
	nrev, err := s.store.Update(ctx, j, rev)
	s.records.drop(l.JobID)
	if errors.Is(err, jobstore.ErrConflict) {
		s.log.Debug("limit reclaim fence lost", "job", l.JobID, "token", l.Token, "rev", rev)
		return false, true, nil
	}
	if err != nil {
		return false, false, err
	}
	s.log.Debug("limit reclaim fenced", "job", l.JobID, "token", l.Token, "rev", nrev)
	return true, false, nil
}

// onLimitTimer handles a fired limit timer: the entry's leases are
// verified if it is full, and its waiters looked at.
func (s *Service) onLimitTimer(ctx context.Context, name string) error {
	e, ok := kvlimits.ParseEntry(name)
	if !ok {
		return nil
	}
	s.promoter.mu.Lock()
	delete(s.promoter.armed, name)
	s.promoter.mu.Unlock()
	if _, err := s.verifyLeases(ctx, e); err != nil {
		return err
	}
	return s.promote(ctx, e)
}
