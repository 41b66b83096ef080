package admission

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// heldCheck is the count keeper's watch over the ready messages that
// claims of a dead process still hold (issue 31 item 2).
//
// The keeper counts a claim's ready message as held (in the ready stream,
// yet not available: held_pNNN) from the claim until the lease deferral
// (heldFor, a third of ClaimAckWait) has passed, when a live claiming
// process writes the lease and acks the message; nothing in the records
// marks that ack, which costs no write. A process that dies holding
// messages acks none: they stay in the ready stream until the walk of its
// holder sentinel (holderwalk.go, about ClaimAckWait + 8 s after the
// death) or a fetch that meets them after the AckWait acks them. Counted
// available in between, they made `available` too high for half a
// minute.
//
// So the keeper watches the holder sentinels (holder.go) while it knows
// of any held claim: once a second, the subjects of the sentinels in
// OJS_TIMERS (one stream info, filtered), the last message of each (one
// get per process holding messages) and the fired sentinels not yet
// handled (one stream info, filtered). A sentinel not renewed for
// staleAfter (its refresh period and two renewer ticks and a second), or
// one fired and not yet handled, says a process died holding messages:
// the keeper is then suspect, and looks for the ready message of every
// held claim past heldFor or about to be (ReadyPresent: one batched direct
// get per 1024 claims; on a cluster one filtered stream info per claim,
// through the leader). A claim whose message is there counts held, and
// is looked for again every second and before each answer to a question,
// until it is gone; one whose message is gone is forgotten. Which process
// held a message is not needed: the ready stream says whether it is still
// there, and the sentinels only say when to look.
//
// What it costs: nothing while no process dies (two stream infos a
// second while claims hold messages, one get per process holding some);
// after a death, one lookup per held claim of the last lapsedKeep of
// claims, and one per second for each that the dead process held, until
// its sentinel's walk acks them. A claim past heldFor is remembered
// lapsedKeep more (its process may have died and its sentinel not yet
// look stale).
//
// The numbers it gives: a claim of a process that died is held until its
// message is acked, at most a second late (and exact when a reader asks
// the keeper); one that lapsed before its process's sentinel looked stale
// is counted available for the difference, at most staleAfter + a second
// after the death (9 s at the default ClaimAckWait).
type heldCheck struct {
	s *Service
	// staleAfter: a sentinel not renewed for this long names a dead
	// process. ahead: how far ahead of heldFor a suspect check looks.
	staleAfter, ahead time.Duration
	// seen are the sentinels of the last reading, by subject: the
	// sequence of their last message, and when the keeper first saw it.
	seen map[string]seenSentinel
	// suspect is set while a sentinel is stale or fired.
	suspect atomic.Bool
}

type seenSentinel struct {
	seq   uint64
	first time.Time
}

func newHeldCheck(s *Service, every time.Duration) *heldCheck {
	return &heldCheck{
		s:          s,
		staleAfter: s.holder.refresh + 2*s.holder.tick + time.Second,
		ahead:      2 * every,
	}
}

// lapsedKeep is how long the tally remembers a claim past heldFor: until
// the sentinel of a process that died holding it would look stale, and
// the keeper has read it.
func (c *heldCheck) lapsedKeep(every time.Duration) time.Duration { return c.staleAfter + 2*every }

// watch reads the sentinels (when tl knows of held claims) and checks the
// claims to check; run once a second by the keeper.
func (c *heldCheck) watch(ctx context.Context, tl *tally) error {
	if tl.heldCount() == 0 {
		c.suspect.Store(false)
		c.seen = nil
		return nil
	}
	suspect, err := c.sentinels(ctx)
	if err != nil {
		return err // the last reading stands
	}
	c.suspect.Store(suspect)
	return c.check(ctx, tl)
}

// holderSchedules matches the holder sentinels' schedule subjects.
var holderSchedules = fmt.Sprintf(topology.TimerSchedulePattern, topology.TimerHolder, "*")

// sentinels reports whether a holder sentinel is stale or fired and not
// yet handled.
func (c *heldCheck) sentinels(ctx context.Context) (bool, error) {
	timers := c.s.assets.Timers
	fired := topology.TimerFired(topology.TimerHolder)
	fi, err := timers.Info(ctx, jetstream.WithSubjectFilter(fired))
	if err != nil {
		return false, jobstore.Unavailable(err)
	}
	suspect := fi.State.Subjects[fired] > 0
	si, err := timers.Info(ctx, jetstream.WithSubjectFilter(holderSchedules))
	if err != nil {
		return false, jobstore.Unavailable(err)
	}
	now := time.Now()
	seen := make(map[string]seenSentinel, len(si.State.Subjects))
	for subj := range si.State.Subjects {
		m, err := timers.GetLastMsgForSubject(ctx, subj)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			continue // cancelled or fired since
		case err != nil:
			return false, jobstore.Unavailable(err)
		}
		sn := seenSentinel{seq: m.Sequence, first: now}
		if old, ok := c.seen[subj]; ok && old.seq == m.Sequence {
			sn.first = old.first
		}
		seen[subj] = sn
		// Stale by the server's clock, or by the keeper's own: a
		// renewal the keeper has not seen for that long.
		if now.Sub(m.Time) > c.staleAfter || now.Sub(sn.first) > c.staleAfter {
			suspect = true
		}
	}
	c.seen = seen
	return suspect, nil
}

// check looks for the ready messages of the claims to check (heldToCheck)
// and notes what it found in tl. Safe to call at once from several
// goroutines (the keeper's tick, answers to questions).
func (c *heldCheck) check(ctx context.Context, tl *tally) error {
	asked := tl.heldToCheck(c.s.now(), c.suspect.Load(), c.ahead)
	if len(asked) == 0 {
		return nil
	}
	subjects := make([]string, 0, len(asked))
	ids := make(map[string]string, len(asked))
	for id, h := range asked {
		subj := fmt.Sprintf(topology.ReadySubjectPattern, h.queue, topology.PriorityDigits, h.prio, topology.Token(id))
		subjects = append(subjects, subj)
		ids[subj] = id
	}
	found, err := c.s.store.ReadyPresent(ctx, subjects)
	if err != nil {
		return err
	}
	present := make(map[string]bool, len(found))
	for subj := range found {
		present[ids[subj]] = true
	}
	tl.heldChecked(asked, present)
	return nil
}
