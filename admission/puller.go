package admission

import (
	"context"
	"slices"
	"sync"
	"time"

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
// round trip of the pull that serves it. A refill runs with self nil: one
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
		msgs, stale := p.takeAheadLocked(total, time.Now())
		need := total - len(msgs)
		extra, prio := 0, 0
		if need > 0 || self == nil {
			extra, prio = p.aheadWanted(total, need > 0)
		}
		p.mu.Unlock()
		p.s.putBack(stale)
		var err error
		var pulled []jetstream.Msg
		if need+extra > 0 {
			// The pull is not cancelled with the leading request: it
			// serves other requests too. Every JetStream call in it has a
			// timeout.
			pulled, err = p.s.pull(context.WithoutCancel(ctx), p.queue, need+extra)
			msgs = append(msgs, pulled...)
		}
		p.mu.Lock()
		if need+extra > 0 {
			p.pulledAll = err == nil && len(pulled) == need+extra
		}
		refilled = true
		var surplus []jetstream.Msg
		if len(msgs) > total {
			msgs, surplus = msgs[:total:total], msgs[total:]
			if extra > 0 && !p.s.noPullAhead.Load() {
				p.keepAheadLocked(surplus, prio, time.Now())
				surplus = nil
			}
		}
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
		nakAll(surplus)
		nakAll(msgs)
		passAll(turns)
	}
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
