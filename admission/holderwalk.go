package admission

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// A fired holder sentinel (holder.go): the process that held ready
// messages stopped renewing it, so it died, or stopped without writing
// its leases. The process that handles the fired timer pulls the
// messages that process held from the ready consumers the sentinel lists
// and treats each as a fetch treats a held message that came back: the
// job still active from the claim that held it gets its lease timer, with
// its original deadline, and the message is acked. Every other message
// pulled is given back (Nak), in the order it came, once the walk of its
// level is over, so no message is met twice by one walk.
//
// Which messages a walk pulls, per level:
//   - The consumer still knows what it delivered (it is the one the
//     process pulled from: same creation time): the held messages came
//     back to its redelivery queue after their AckWait, and JetStream
//     hands out redeliveries before any new message. The walk takes
//     redelivered messages (delivered more than once) and stops at the
//     first message delivered for the first time: nothing held is left
//     behind it.
//   - The consumer is gone or was created again (ready consumers keep
//     their state in memory, fetch.go: a NATS server restart loses it,
//     and the embedded server dies with its jetgate process): every
//     message not acked comes again, for the first time, in stream order.
//     The walk takes them up to the level's bound: the dead process held
//     none above it.
// Either way a walk judges only what it must, with one read of the
// records per pull (GetMany), and nothing scans jobs.

// fired handles a fired sentinel on a goroutine of its own (a walk
// may take seconds, and timers are handled one at a time), which Stop
// waits for.
func (h *holder) fired(msg jetstream.Msg) {
	h.mu.Lock()
	if h.walksOver {
		h.mu.Unlock()
		_ = msg.NakWithDelay(time.Second)
		return
	}
	h.walks.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.walks.Done()
		h.handle(msg)
	}()
}

// stopWalks stops the walks under way: what they pulled is given back
// and their sentinels are handled again, by any process.
func (h *holder) stopWalks() {
	h.mu.Lock()
	h.walksOver = true
	h.mu.Unlock()
	h.walkCancel()
	h.walks.Wait()
}

func (h *holder) handle(msg jetstream.Msg) {
	s := h.s
	var body holderBody
	if err := json.Unmarshal(msg.Data(), &body); err != nil {
		_ = msg.TermWithReason("holder sentinel: " + err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(h.walkCtx, 30*time.Second)
	defer cancel()
	infos := make([]*jetstream.ConsumerInfo, len(body.Levels))
	readyAt := time.Time{}
	for i, lv := range body.Levels {
		info, err := s.assets.Ready.Consumer(ctx, topology.ReadyConsumer(lv.Queue, lv.Priority))
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
		case err != nil:
			s.log.Warn("holder sentinel: consumer unreadable, will retry", "process", body.Process, "queue", lv.Queue, "error", err)
			_ = msg.NakWithDelay(time.Second)
			return
		default:
			infos[i] = info.CachedInfo()
			// Every message the process held is back after the AckWait:
			// it held none after its last renewal plus a refresh period.
			at := body.At.Add(time.Duration(body.RefreshMs)*time.Millisecond + infos[i].Config.AckWait)
			if at.After(readyAt) {
				readyAt = at
			}
		}
	}
	if wait := time.Until(readyAt); wait > 0 {
		_ = msg.NakWithDelay(wait + 100*time.Millisecond)
		return
	}
	written := 0
	for i, lv := range body.Levels {
		_ = msg.InProgress()
		n, err := s.walkLevel(ctx, lv, infos[i])
		written += n
		if err != nil {
			s.log.Warn("holder sentinel: level not walked, will retry", "process", body.Process, "queue", lv.Queue,
				"priority", lv.Priority, "error", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
	}
	s.log.Info("leases of a stopped process secured", "process", body.Process, "host", body.Host, "pid", body.PID,
		"levels", len(body.Levels), "leases", written)
	_ = msg.Ack()
}

// errWalkLong ends a walk that ran out of time; the sentinel comes back.
var errWalkLong = errors.New("walk of a level ran out of time")

// walkLevel pulls what a dead process held on one level (info: its
// consumer now, nil if it is gone) and writes the leases; it returns how
// many it wrote.
func (s *Service) walkLevel(ctx context.Context, lv holderLevel, info *jetstream.ConsumerInfo) (int, error) {
	// What the walk pulled goes back before the AckWait of the first
	// message it pulled ends.
	ackWait := s.cfg.ClaimAckWait
	if info != nil {
		ackWait = min(ackWait, info.Config.AckWait)
	}
	ctx, cancel := context.WithTimeout(ctx, ackWait/2)
	defer cancel()
	name := topology.ReadyConsumer(lv.Queue, lv.Priority)
	lost := info == nil || lv.Created.IsZero() || !info.Created.Equal(lv.Created)
	if info == nil {
		s.consumers.Delete(name)
		if _, err := s.consumer(ctx, lv.Queue, lv.Priority); err != nil {
			return 0, err
		}
	}
	var kept []jetstream.Msg
	defer func() { nakAll(kept) }()
	written := 0
	for batch := 16; ; batch = min(2*batch, maxPull) {
		if ctx.Err() != nil {
			return written, errWalkLong
		}
		msgs, err := s.store.PullNoWait(ctx, name, batch)
		s.track(name, msgs, false)
		if err != nil {
			kept = append(kept, msgs...)
			return written, err
		}
		last := len(msgs) < batch
		var judge []jetstream.Msg
		for i, m := range msgs {
			md, err := m.Metadata()
			if err == nil && (md.NumDelivered > 1 || lost && md.Sequence.Stream <= lv.Bound) {
				judge = append(judge, m)
				continue
			}
			// Past what the process held.
			kept = append(kept, msgs[i:]...)
			last = true
			break
		}
		n, back, err := s.judgeHeld(ctx, judge)
		written += n
		kept = append(kept, back...)
		if err != nil || last {
			return written, err
		}
	}
}

// judgeHeld writes the lease of every message of msgs that is the held
// message of an active job's claim, and acks it; a message whose job
// moved on is acked too (stale), as a fetch would. It returns how many
// leases it wrote, and the messages to give back: those of available
// jobs, early ones, and those it could not settle.
func (s *Service) judgeHeld(ctx context.Context, msgs []jetstream.Msg) (int, []jetstream.Msg, error) {
	if len(msgs) == 0 {
		return 0, nil, nil
	}
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if ref, ok := jobstore.Ref(m.Headers()); ok {
			ids = append(ids, ref.JobID)
		}
	}
	recs, err := s.store.GetMany(ctx, ids)
	if err != nil {
		return 0, msgs, err
	}
	// give[i]: msgs[i] is given back; kept in the order of msgs.
	give := make([]bool, len(msgs))
	var (
		mu      sync.Mutex
		written int
		first   error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, 8)
	)
	for i, m := range msgs {
		ref, ok := jobstore.Ref(m.Headers())
		j := recs[ref.JobID]
		switch {
		case !ok || j == nil:
			// An available job stored as its ready message, or one a
			// fetch judges better (a bad message, an orphan).
			give[i] = true
		case j.State == ojs.StateActive && j.Internal.HeldToken == ref.Token:
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := s.redelivered(ctx, j, m)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					give[i] = true
					first = cmp.Or(first, fmt.Errorf("lease of job %s: %w", j.ID, err))
					return
				}
				written++
			}()
		case j.State == ojs.StateAvailable && j.Internal.Token == ref.Token:
			give[i] = true
		case errors.Is(staleOrEarly(j, ref), errStale):
			_ = m.Ack()
		default:
			give[i] = true
		}
	}
	wg.Wait()
	var back []jetstream.Msg
	for i, m := range msgs {
		if give[i] {
			back = append(back, m)
		}
	}
	return written, back, first
}
