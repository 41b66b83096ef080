package admission

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller serves the concurrent fetches of one queue together: fetches that
// arrive while a pull is under way wait for the next one, which asks
// JetStream once for all of them (one level lookup, one pull per level)
// instead of once each. Messages are handed out in arrival order, so the
// oldest waiting fetch gets the highest-priority jobs. There is no
// goroutine of its own: the first fetch to find the puller idle leads,
// running pulls until its own fetch is served; then, if fetches are
// waiting, the oldest of them leads the next pull. A fetch never pulls for
// others after it got its messages, so its claim is not held up by pulls
// it does not need (a leader that kept pulling while fetches kept coming
// left its own job unclaimed for many rounds, and its worker idle).
type puller struct {
	s     *Service
	queue string

	mu      sync.Mutex
	waiting []*pullWaiter
	busy    bool
	// claiming are the claim orders of pulls whose messages are not all
	// claimed or put back yet (claimorder.go).
	claiming []*claimOrder

	// Messages pulled ahead of the fetches that will take them
	// (prefetch.go), oldest first; pulledAll is whether the last pull got
	// all it asked for (a backlog); sweep puts back what waits too long,
	// sweeps counts its runs.
	ahead     []aheadMsg
	pulledAll bool
	sweep     *time.Timer
	sweeps    sync.WaitGroup
	// target is how many messages to keep ahead; a fetch that leaves
	// fewer than half of it starts a refill, which refills counts.
	target  int
	refills sync.WaitGroup

	// Giving back what is held ahead to other processes' fetches
	// (visible.go): sub listens on the queue's give-back subject while
	// messages may be held ahead; aheadPull is set while a pull that may
	// keep messages ahead is under way; yields counts give-backs, so that
	// such a pull keeps nothing when one came meanwhile; landed are the
	// give-backs waiting for that pull to land.
	sub       *nats.Subscription
	aheadPull bool
	yields    uint64
	landed    []chan struct{}
	// looking counts this process's looks at the queue under way
	// (beginLook): no pull keeps messages ahead meanwhile.
	looking int

	// jobSize is the average reply size of the jobs of the queue's last
	// fetch under a byte budget (pullSize), 0 before any.
	jobSize atomic.Int64
}

// maxPull bounds the messages asked for in one pull.
const maxPull = 256

type pullWaiter struct {
	want int
	// Set under puller.mu: served once msgs and err are final, lead when
	// the waiter must run the next pull. wake is signalled after either.
	served, lead bool
	msgs         []jetstream.Msg
	turns        []*claimTurn // msgs' turns at the limits (claimorder.go)
	err          error
	wake         chan struct{}
}

func (s *Service) puller(queue string) *puller {
	if p, ok := s.pullers.Load(queue); ok {
		return p.(*puller)
	}
	p, _ := s.pullers.LoadOrStore(queue, &puller{s: s, queue: queue})
	return p.(*puller)
}

// take returns up to want ready messages, highest priority first, with
// their turns at the limits (claimorder.go): each turn must pass once its
// message is claimed or put back.
func (p *puller) take(ctx context.Context, want int) ([]jetstream.Msg, []*claimTurn, error) {
	p.mu.Lock()
	if msgs, turns, ok := p.takeReadyLocked(want, time.Now()); ok {
		refill := p.refillDueLocked()
		p.mu.Unlock()
		if refill {
			go p.refill()
		}
		return msgs, turns, nil
	}
	w := &pullWaiter{want: want, wake: make(chan struct{}, 1)}
	p.waiting = append(p.waiting, w)
	lead := !p.busy
	p.busy = true
	p.mu.Unlock()
	for !lead {
		<-w.wake
		p.mu.Lock()
		served := w.served
		lead, w.lead = w.lead, false
		p.mu.Unlock()
		if served {
			return w.msgs, w.turns, w.err
		}
	}
	p.run(ctx, w)
	return w.msgs, w.turns, w.err
}

// run pulls for the waiting fetches, oldest first, until self is served,
// then hands the lead to the oldest fetch still waiting, if any. Pulls
// never wait for messages to arrive, so a waiter is answered within one
// round trip of the pull that serves it, unless the level it pulls holds a
// message its consumer does not count yet (levels.go). A refill runs with self nil: one
// round, which serves the fetches waiting by then and pulls ahead
// (prefetch.go), then the lead goes on as after a served fetch.
func (p *puller) run(ctx context.Context, self *pullWaiter) {
	refilled := false
	for {
		p.mu.Lock()
		if self == nil && refilled || self != nil && self.served {
			if len(p.waiting) == 0 {
				p.busy = false
			} else {
				next := p.waiting[0]
				next.lead = true
				signal(next.wake)
			}
			p.mu.Unlock()
			return
		}
		// Serve the oldest waiters, up to maxPull messages per pull; the
		// rest wait for the next round.
		total, n := 0, 0
		for n < len(p.waiting) && (n == 0 || total+p.waiting[n].want <= maxPull) {
			total += p.waiting[n].want
			n++
		}
		batch := p.waiting[:n:n]
		p.waiting = p.waiting[n:]
		// Messages pulled ahead go first (they are older), then a pull
		// for the rest, which takes more ahead while the queue has a
		// backlog (prefetch.go).
		msgs, stale, plan := p.planLocked(total, self == nil)
		p.mu.Unlock()
		p.s.putBack(stale)
		pulled, landed, err := p.pullRound(ctx, plan)
		p.mu.Lock()
		msgs = append(msgs, pulled...)
		refilled = true
		// A give-back since the plan (prefetch.go) keeps the surplus
		// from being held ahead.
		yielded := plan.yields != p.yields
		var surplus []jetstream.Msg
		if len(msgs) > total {
			msgs, surplus = msgs[:total:total], msgs[total:]
			if plan.extra > 0 && !p.s.noPullAhead.Load() && !yielded {
				p.keepAheadLocked(surplus, plan.prio, time.Now())
				surplus = nil
			}
		}
		p.settleLocked()
		// The claims of all the fetches served take their turns at the
		// limits in the order of the pull.
		turns := p.turnsLocked(len(msgs))
		for _, w := range batch {
			n := min(w.want, len(msgs))
			w.msgs, msgs = msgs[:n:n], msgs[n:]
			w.turns, turns = turns[:n:n], turns[n:]
			if n == 0 {
				w.err = err
			}
			w.served = true
			if w != self {
				signal(w.wake)
			}
		}
		p.mu.Unlock()
		if yielded {
			// Given back: in the queue before the give-back is answered.
			p.s.putBack(surplus)
		} else {
			nakAll(surplus)
		}
		closeAll(landed)
		nakAll(msgs)
		passAll(turns)
	}
}

// pullPlan is what a round of run pulls: need messages for the fetches it
// serves, extra more to keep ahead at level prio; yields is the puller's
// count of give-backs when it was planned.
type pullPlan struct {
	need, extra, prio int
	yields            uint64
}

// planLocked takes the messages held ahead for total wanted, and plans
// the pull for the rest (refill: the round is a refill, which pulls
// ahead even when those cover total). It returns the messages taken and
// those held too long, to be put back before the pull. A pull that may
// keep messages ahead listens for give-backs from before it starts.
// p.mu is held.
func (p *puller) planLocked(total int, refill bool) (msgs, stale []jetstream.Msg, plan pullPlan) {
	msgs, stale = p.takeAheadLocked(total, time.Now())
	plan = pullPlan{need: total - len(msgs), yields: p.yields}
	if plan.need > 0 || refill {
		plan.extra, plan.prio = p.aheadWanted(total, plan.need > 0)
	}
	if plan.extra > 0 && (p.looking > 0 || !p.listenLocked()) {
		// Not while this process asks the others for theirs.
		plan.extra = 0
	}
	p.aheadPull = plan.extra > 0
	return msgs, stale, plan
}

// pullRound pulls what plan says. A pull that found nothing for the
// fetches (the queue looks empty from here) stops the puller listening
// for give-backs: it holds nothing of the queue ahead then, and its
// fetches may ask the other processes (visible.go). It returns the
// messages, and the give-backs that waited for the pull to land (closeAll
// once what must go back is back).
func (p *puller) pullRound(ctx context.Context, plan pullPlan) ([]jetstream.Msg, []chan struct{}, error) {
	var err error
	var pulled []jetstream.Msg
	n := plan.need + plan.extra
	if n > 0 {
		// The pull is not cancelled with the leading request: it
		// serves other requests too. Every JetStream call in it has a
		// timeout.
		pulled, err = p.s.pull(context.WithoutCancel(ctx), p.queue, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > 0 {
		// After a give-back, no more is pulled ahead until a pull gets
		// all it asks for again.
		p.pulledAll = err == nil && len(pulled) == n && plan.yields == p.yields
	}
	landed := p.landLocked()
	if plan.need > 0 && len(pulled) == 0 {
		p.quietLocked()
	}
	return pulled, landed, err
}

// turnsLocked returns the turns at the limits of n messages handed out
// now, in their order, after those of earlier hand-outs still being
// claimed (claimorder.go). p.mu is held.
func (p *puller) turnsLocked(n int) []*claimTurn {
	order := newClaimOrder(n, slices.Clone(p.claiming), p.retire)
	if n > 0 {
		p.claiming = append(p.claiming, order)
	}
	return order.turns
}

// retire forgets a claim order whose turns all passed.
func (p *puller) retire(o *claimOrder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.claiming, o); i >= 0 {
		p.claiming = slices.Delete(p.claiming, i, i+1)
	}
}
