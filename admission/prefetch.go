package admission

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// Pulling ahead (issue 17: "a fetch's pull happens ahead of the fetch that
// needs it").
//
// A fetch spends one JetStream round trip pulling its ready messages and
// another claiming them. While a queue has a backlog, the pull that serves
// the fetches waiting now also takes the messages the next fetches will
// want, and keeps them in the queue's puller ("ahead"); the next pull
// hands them out first and pulls only for the rest, so a fetch they cover
// makes no round trip to JetStream and waits only for its claims.
//
// A fetch that finds no fetch waiting before it and enough messages ahead
// takes them at once, even while a pull is under way. The fetch that
// leaves fewer than half the queue's target ahead starts a refill: a pull
// round of its own (refill) that tops the messages ahead up to the target
// and serves the fetches that wait by then, so the fetches of a queue with
// a backlog do not wait for pulls at all. The target starts at
// aheadFetches fetches' worth of a pull, doubles (within maxPull) when
// fetches still find too few messages ahead, and halves when messages
// waited aheadFor untaken. Measured on the HTTP round trip at 8 workers,
// fetches waited 190 us on average for their messages before the refill
// (docs/performance.md).
//
// What keeps this exact:
//   - Only a queue with one registered priority level and no aging pulls
//     ahead: messages of one level are handed out oldest first whether
//     they wait here or in JetStream. A queue that gains a level, starts
//     aging or is paused uses none of what waits here: those messages
//     are put back (Nak), the server's answer to each awaited before the
//     next pull (levelpull.go, putBack), so JetStream hands them out
//     again before the level's later messages.
//   - A message waits here at most aheadFor. The ready consumer's AckWait
//     (ClaimAckWait, 30 s by default) runs from the pull, and a claim may
//     defer its lease for a third of it (lease.go), so the message is
//     still held by the claim long after aheadFor. A message older than
//     that, and every one left when the service stops, is put back.
//   - Nothing is decided ahead: the claim (the record's create-if-absent,
//     the limits in message order, claimorder.go) happens when a fetch
//     takes the message, as for a message pulled for it.
//   - A pull asks for more only after the queue's last pull got all it
//     asked for, so a queue that is drained (or kept empty by its
//     workers) never has its jobs held here, away from other processes.
//
//   - Messages held here are not hidden from other processes: while it
//     may hold some, the puller listens on the queue's give-back subject,
//     from before the pull whose messages it may keep; a fetch of another
//     process that finds the queue empty asks there, and every message
//     held ahead is put back before it is answered (giveBack, visible.go).
//
// Other processes' fetches are handed the messages after these while
// JetStream has more; when it has none, the messages held here are given
// back to them.

// defaultAheadFor is the longest a message pulled ahead waits for a fetch
// (Config.aheadFor, "aheadFor" below).
const defaultAheadFor = 250 * time.Millisecond

// aheadFetches is how many more fetches' worth of messages a pull takes
// ahead, within maxPull.
const aheadFetches = 2

// aheadMsg is a message pulled ahead, with its level and when it came.
type aheadMsg struct {
	msg   jetstream.Msg
	prio  int
	since time.Time
}

// mayPullAhead reports whether the queue's pulls may take messages ahead:
// one registered level (prio), no aging, not paused.
func (p *puller) mayPullAhead() (prio int, ok bool) {
	levels := p.s.store.Levels(p.queue)
	if len(levels) != 1 || p.s.queues.paused(p.queue) {
		return 0, false
	}
	if _, aging := p.s.agingOf(p.queue); aging {
		return 0, false
	}
	return levels[0], true
}

// takeAheadLocked drops the messages pulled ahead that may no longer be
// handed out (stale, for the caller to put back outside the lock and
// before its next pull) and takes up to want of the rest, oldest first.
// p.mu is held.
func (p *puller) takeAheadLocked(want int, now time.Time) (msgs, stale []jetstream.Msg) {
	if len(p.ahead) == 0 {
		return nil, nil
	}
	prio, ok := p.mayPullAhead()
	stale = p.dropLocked(func(a aheadMsg) bool { return !ok || !p.handable(a, prio, now) })
	return p.popAheadLocked(want), stale
}

// handable reports whether a message pulled ahead may still be handed
// out, the queue's one level being prio: it is of that level and has not
// waited longer than aheadFor.
func (p *puller) handable(a aheadMsg, prio int, now time.Time) bool {
	return a.prio == prio && now.Sub(a.since) <= p.s.cfg.aheadFor
}

// popAheadLocked takes up to n of the messages pulled ahead, oldest first.
// p.mu is held.
func (p *puller) popAheadLocked(n int) []jetstream.Msg {
	n = min(n, len(p.ahead))
	msgs := make([]jetstream.Msg, n)
	for i := range n {
		msgs[i] = p.ahead[i].msg
	}
	clear(p.ahead[:n])
	p.ahead = p.ahead[n:]
	return msgs
}

// dropLocked removes the messages pulled ahead that drop says may no
// longer be handed out, keeping the others in order, and returns them.
// p.mu is held.
func (p *puller) dropLocked(drop func(aheadMsg) bool) []jetstream.Msg {
	var dropped []jetstream.Msg
	keep := 0
	for _, a := range p.ahead {
		if drop(a) {
			dropped = append(dropped, a.msg)
			continue
		}
		p.ahead[keep] = a
		keep++
	}
	clear(p.ahead[keep:])
	p.ahead = p.ahead[:keep]
	return dropped
}

// aheadWanted is how many messages a pull for total should take beyond
// it, up to the target, within maxPull. short is whether the fetches of
// this pull found too few messages ahead: while the queue has a backlog,
// that means the refills fell behind the fetches, and the target grows
// (doubles, to at least aheadFetches fetches' worth of this pull). p.mu
// is held.
func (p *puller) aheadWanted(total int, short bool) (extra, prio int) {
	if !p.pulledAll || p.s.noPullAhead.Load() {
		return 0, 0
	}
	prio, ok := p.mayPullAhead()
	if !ok {
		return 0, 0
	}
	if short {
		p.target = min(maxPull, max(2*p.target, aheadFetches*total))
	}
	return max(0, min(p.target-len(p.ahead), maxPull-total-len(p.ahead))), prio
}

// takeReadyLocked serves a fetch at once from the messages pulled ahead
// when no fetch waits before it and they cover all it wants: it neither
// leads a pull nor waits for one under way (a refill's, whose messages
// come after these). ok is false, and nothing is taken, otherwise; the
// fetch then waits its turn as before, and the pull round drops what may
// no longer be handed out. p.mu is held.
func (p *puller) takeReadyLocked(want int, now time.Time) (msgs []jetstream.Msg, turns []*claimTurn, ok bool) {
	if want <= 0 || len(p.waiting) > 0 || len(p.ahead) < want {
		return nil, nil, false
	}
	prio, may := p.mayPullAhead()
	if !may {
		return nil, nil, false
	}
	for _, a := range p.ahead[:want] {
		if !p.handable(a, prio, now) {
			return nil, nil, false
		}
	}
	return p.popAheadLocked(want), p.turnsLocked(want), true
}

// refillDueLocked reports whether the fetch that just took messages ahead
// must start a refill: fewer than half the target are left, the last pull
// got all it asked for (a backlog), no pull is under way and the service
// is not stopping. The puller is then busy with the refill, and the
// caller runs refill. p.mu is held.
func (p *puller) refillDueLocked() bool {
	if p.busy || !p.pulledAll || 2*len(p.ahead) >= p.target || p.s.noPullAhead.Load() {
		return false
	}
	p.busy = true
	p.refills.Add(1)
	return true
}

// refill pulls ahead of the fetches to come, on a goroutine of its own
// that stopAhead waits for, so that no fetch waits for the pull: the
// round of run without a fetch of its own. The pull is not cancelled by
// any request; every JetStream call in it has a timeout.
func (p *puller) refill() {
	defer p.refills.Done()
	p.run(context.Background(), nil)
}

// keepAheadLocked keeps msgs, pulled ahead on level prio, for the next
// fetches, and arms the sweep that puts back those no fetch takes in
// time. p.mu is held.
func (p *puller) keepAheadLocked(msgs []jetstream.Msg, prio int, now time.Time) {
	for _, m := range msgs {
		p.ahead = append(p.ahead, aheadMsg{msg: m, prio: prio, since: now})
	}
	if len(p.ahead) > 0 && p.sweep == nil && !p.s.noPullAhead.Load() {
		p.armSweepLocked(p.s.cfg.aheadFor * 5 / 4)
	}
}

// armSweepLocked runs sweepAhead after d. p.mu is held.
func (p *puller) armSweepLocked(d time.Duration) {
	p.sweeps.Add(1)
	p.sweep = time.AfterFunc(d, p.sweepAhead)
}

// sweepAhead puts back the messages that waited longer than aheadFor, and
// re-arms itself while any wait.
func (p *puller) sweepAhead() {
	defer p.sweeps.Done()
	now := time.Now()
	p.mu.Lock()
	stale := p.dropLocked(func(a aheadMsg) bool { return now.Sub(a.since) > p.s.cfg.aheadFor })
	if len(stale) > 0 {
		// Fetches took fewer than the target within aheadFor: hold
		// fewer from now on.
		p.target /= 2
	}
	p.sweep = nil
	if len(p.ahead) > 0 && !p.s.noPullAhead.Load() {
		p.armSweepLocked(p.ahead[0].since.Add(p.s.cfg.aheadFor * 5 / 4).Sub(now))
	}
	p.settleLocked()
	p.mu.Unlock()
	p.s.putBack(stale)
}

// stopAhead puts back every message pulled ahead; the service is
// stopping (noPullAhead is set, so no more are kept and no sweep is
// armed again).
func (p *puller) stopAhead() {
	p.mu.Lock()
	if p.sweep != nil && p.sweep.Stop() {
		p.sweeps.Done() // it will not run
	}
	p.sweep = nil
	stale := p.dropLocked(func(aheadMsg) bool { return true })
	p.unlistenLocked()
	p.mu.Unlock()
	p.s.putBack(stale)
	p.sweeps.Wait()
	// A refill under way keeps nothing now (noPullAhead) and puts back
	// what it pulled.
	p.refills.Wait()
}

// stopPullingAhead puts back what every queue's puller holds ahead.
func (s *Service) stopPullingAhead() {
	// Set before any puller is emptied: a pull that lands after its
	// puller was emptied sees it under the puller's lock and keeps
	// nothing, and a puller made after the Range pulls nothing ahead.
	s.noPullAhead.Store(true)
	s.pullers.Range(func(_, v any) bool {
		v.(*puller).stopAhead()
		return true
	})
}

// listenLocked makes the puller listen for give-back requests, before a
// pull whose messages it may keep ahead; false when it cannot (the
// service is stopping, or the connection refused the subscription), and
// then nothing may be kept ahead. p.mu is held.
func (p *puller) listenLocked() bool {
	if p.sub != nil {
		return true
	}
	if p.s.noPullAhead.Load() {
		return false
	}
	sub, err := p.s.nc.Subscribe(topology.AheadSubject(p.queue), p.onGiveBack)
	if err != nil {
		p.s.log.Warn("cannot listen for give-back requests: nothing pulled ahead", "queue", p.queue, "error", err)
		return false
	}
	p.sub = sub
	return true
}

// unlistenLocked stops listening for give-back requests. The subscription
// is drained, not dropped: a request the server sent before it took the
// unsubscribe in is still answered, rather than left to time out. p.mu is
// held.
func (p *puller) unlistenLocked() {
	if p.sub != nil {
		_ = p.sub.Drain()
		p.sub = nil
	}
}

// holding reports whether the puller holds messages ahead or has a pull
// that may keep some under way: its queue is not empty from here, and a
// fetch takes again rather than asking the other processes.
func (p *puller) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holdingLocked()
}

func (p *puller) holdingLocked() bool { return len(p.ahead) > 0 || p.aheadPull }

// beginLook is called before this process asks the others to give back
// what they hold of the queue (visible.go): unless the puller holds
// messages ahead itself (false: the fetch takes again instead), it stops
// listening, so that the request, sent after the unsubscribe on the same
// connection, does not reach it, and pulls nothing ahead until endLook.
func (p *puller) beginLook() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdingLocked() {
		return false
	}
	p.looking++
	p.quietLocked()
	return true
}

// endLook ends what beginLook began.
func (p *puller) endLook() {
	p.mu.Lock()
	p.looking--
	p.mu.Unlock()
}

// settleLocked stops listening once nothing is held ahead, no pull ahead
// is under way and no sweep is armed (the puller keeps listening until
// the sweep after its last messages ahead, not after each take). p.mu is
// held.
func (p *puller) settleLocked() {
	if len(p.ahead) == 0 && !p.aheadPull && p.sweep == nil {
		p.unlistenLocked()
	}
}

// quietLocked stops listening at once if nothing is held ahead and no
// pull ahead is under way: the sweep armed for messages taken since has
// nothing left to do. p.mu is held.
func (p *puller) quietLocked() {
	if p.holdingLocked() {
		return
	}
	if p.sweep != nil && p.sweep.Stop() {
		p.sweeps.Done() // it will not run
	}
	p.sweep = nil
	p.unlistenLocked()
}

// landLocked notes that the pull under way landed, and returns the
// give-backs that waited for it, to be released (closeAll) once what it
// must put back is back. p.mu is held.
func (p *puller) landLocked() []chan struct{} {
	p.aheadPull = false
	landed := p.landed
	p.landed = nil
	return landed
}

func closeAll(chs []chan struct{}) {
	for _, c := range chs {
		close(c)
	}
}

// onGiveBack answers a give-back request (visible.go) once what this
// process held of the queue ahead is back in JetStream.
func (p *puller) onGiveBack(m *nats.Msg) {
	n := p.giveBack()
	if m.Reply != "" {
		_ = p.s.nc.Publish(m.Reply, strconv.AppendInt(nil, int64(n), 10))
	}
}

// giveBack puts back every message held ahead, waits for a pull ahead
// under way to land and put its messages back too (run keeps none once
// yields changed), stops pulling ahead until a pull gets all it asks for
// again, and stops listening. It returns how many messages it put back
// itself.
func (p *puller) giveBack() int {
	p.mu.Lock()
	p.yields++
	p.pulledAll = false
	stale := p.dropLocked(func(aheadMsg) bool { return true })
	var landed chan struct{}
	if p.aheadPull {
		landed = make(chan struct{})
		p.landed = append(p.landed, landed)
	}
	p.mu.Unlock()
	p.s.putBack(stale)
	if landed != nil {
		t := time.NewTimer(putBackWait)
		select {
		case <-landed:
		case <-t.C:
		}
		t.Stop()
	}
	p.mu.Lock()
	p.quietLocked()
	p.mu.Unlock()
	return len(stale)
}

// nakAll returns messages to JetStream for another fetch without waiting
// for the server to take the Naks in.
func nakAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}
