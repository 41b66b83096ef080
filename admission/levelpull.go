package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Pulling a queue's levels in waves.
//
// With jobs spread over many levels, most levels a pull walks hold one or
// two ready jobs, or only messages already handed out (jobs being claimed
// or active with their ready message held, lease.go). Asked one after the
// other, every level costs a round trip, and a pull for 30 jobs over 256
// levels cost 30 or more of them in a row (bench PriorityLevels).
//
// So a pull asks the levels in waves: the levels of a wave are asked at
// once, each for as many messages as it is expected to hold ready, and
// their answers are taken in level order. A level is expected to hold its
// stream count (from the level lookup) less the messages this process was
// handed from it and has not settled yet (heldReady); a level expected to
// hold none is still asked, for one message, since only its answer can
// tell. A wave takes levels until the expected messages cover what the
// pull wants.
//
// Order stays exact. A pull moves on past a level only after that level's
// own answer said it had no more: it gave fewer messages than asked (a
// pull that delivers reads the stream and stops at its end), or none and
// no publish of this process there is still uncounted (levels.go,
// afterLevelPull). A level that gave
// all it was asked for may hold more: it is asked again before any
// message of a later level is taken, and the messages of later levels
// that are then not needed are put back (Nak; each consumer redelivers
// them first, in order). The expectation only decides how many requests
// run at once and how big they are, never which job this pull hands out.
//
// Put-back messages are, for the few round trips until the Nak, handed
// out to this process like messages being claimed: a fetch of another
// process meanwhile passes over them, as it passes over a message whose
// claim fails and is put back. It takes a few percent of the messages
// only when a level holds more than expected (bench PriorityLevels, 256
// levels: 0.1 per job, none with one level).

// maxWave bounds the levels asked at once.
const maxWave = 32

// levelAsk is one level of a wave: how many messages it is asked for, and
// what it answered.
type levelAsk struct {
	prio int
	exp  int // messages expected
	ask  int
	msgs []jetstream.Msg
	err  error
}

// pullLevels takes up to want ready messages from levels, in that order.
func (s *Service) pullLevels(ctx context.Context, queue string, levels []int, counts map[int]uint64, want int) ([]jetstream.Msg, error) {
	var out []jetstream.Msg
	for len(levels) > 0 && len(out) < want {
		need := want - len(out)
		var wave []*levelAsk
		expected := 0
		for ; len(levels) > 0 && expected < need && len(wave) < maxWave; levels = levels[1:] {
			p := levels[0]
			name := topology.ReadyConsumer(queue, p)
			held := s.held.count(name, s.cfg.ClaimAckWait)
			exp := int(min(max(int64(counts[p])-int64(held), 0), int64(want)))
			if exp == 0 && s.held.hot(name) {
				// Its last answer gave what was not expected: jobs
				// arrive there faster than the count shows.
				exp = 1
			}
			// One more than expected: a level that gives fewer than it
			// was asked for needs no second request.
			wave = append(wave, &levelAsk{prio: p, exp: exp, ask: min(exp+1, need-expected)})
			expected += exp
		}
		// The last level of the wave may give all the pull still needs
		// if the others give what they are expected to.
		last := wave[len(wave)-1]
		last.ask = need - (expected - last.exp)
		s.askWave(ctx, queue, wave)
		for i, a := range wave {
			if a.err != nil && len(a.msgs) == 0 {
				putBack(wave[i+1:])
				return out, a.err
			}
			out = s.takeLevel(ctx, queue, a, out, want)
			if a.err != nil {
				putBack(wave[i+1:])
				return out, a.err
			}
		}
	}
	return out, nil
}

// askWave asks every level of wave at once.
func (s *Service) askWave(ctx context.Context, queue string, wave []*levelAsk) {
	if len(wave) == 1 {
		wave[0].msgs, wave[0].err = s.fetchLevel(ctx, queue, wave[0].prio, wave[0].ask)
		return
	}
	var wg sync.WaitGroup
	for _, a := range wave {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.msgs, a.err = s.fetchLevel(ctx, queue, a.prio, a.ask)
		}()
	}
	wg.Wait()
}

// takeLevel appends a's messages to out, up to want, asking the level for
// more while it gave all it was asked for; messages past want go back.
func (s *Service) takeLevel(ctx context.Context, queue string, a *levelAsk, out []jetstream.Msg, want int) []jetstream.Msg {
	msgs, ask := a.msgs, a.ask
	if len(msgs) > a.exp {
		s.held.surprise(topology.ReadyConsumer(queue, a.prio))
	}
	for {
		n := min(len(msgs), want-len(out))
		out = append(out, msgs[:n]...)
		nak(msgs[n:])
		if len(out) == want || a.err != nil || len(msgs) == 0 || (len(msgs) < ask && !rechecked(msgs)) {
			return out
		}
		ask = want - len(out)
		msgs, a.err = s.fetchLevel(ctx, queue, a.prio, ask)
	}
}

// rechecked reports whether msgs came from the recheck of a level whose
// no-wait pull was empty (levels.go): one message, the level may hold more.
func rechecked(msgs []jetstream.Msg) bool {
	t, ok := msgs[len(msgs)-1].(*trackedMsg)
	return ok && t.rechecked
}

// putBack returns the messages of levels not taken.
func putBack(wave []*levelAsk) {
	for _, a := range wave {
		nak(a.msgs)
	}
}

func nak(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// heldReady tracks the ready messages this process was handed and has not
// settled yet, per level consumer, by stream sequence. It is only an
// estimate for sizing pulls: a held message acknowledged by another
// process (its job acked there) stays in it until it is older than the
// consumers' AckWait, when the server would redeliver it anyway. A
// message settled here still counts for settleLag: the server removes it
// from the stream a little after the ack is sent.
type heldReady struct {
	mu     sync.Mutex
	levels map[string]map[uint64]heldMsg // consumer -> stream seq
	// surprised holds when a level last gave more than it was expected
	// to hold; such a level expected to hold none counts as holding one
	// for hotFor.
	surprised map[string]time.Time
}

// hotFor is how long a level that surprised a pull counts as holding one.
const hotFor = 100 * time.Millisecond

// hot reports whether consumer's level surprised a pull lately.
func (h *heldReady) hot(consumer string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.surprised[consumer]
	if ok && time.Since(at) > hotFor {
		delete(h.surprised, consumer)
		ok = false
	}
	return ok
}

// surprise notes that consumer's level gave more than it was expected
// to hold.
func (h *heldReady) surprise(consumer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.surprised == nil {
		h.surprised = map[string]time.Time{}
	}
	h.surprised[consumer] = time.Now()
}

type heldMsg struct {
	handed, settled time.Time
}

// settleLag is how long a settled message still counts as held.
const settleLag = 5 * time.Millisecond

// track records msgs, handed by consumer, and wraps them so that settling
// one (ack, nak, term) forgets it. recheck marks messages pulled by a
// level's recheck.
func (s *Service) track(consumer string, msgs []jetstream.Msg, recheck bool) {
	if len(msgs) == 0 {
		return
	}
	now := time.Now()
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.levels == nil {
		s.held.levels = map[string]map[uint64]heldMsg{}
	}
	lv := s.held.levels[consumer]
	if lv == nil {
		lv = map[uint64]heldMsg{}
		s.held.levels[consumer] = lv
	}
	for i, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		lv[md.Sequence.Stream] = heldMsg{handed: now}
		msgs[i] = &trackedMsg{Msg: m, h: &s.held, consumer: consumer, seq: md.Sequence.Stream, rechecked: recheck}
	}
}

// count returns how many messages of consumer this process holds, and
// forgets those settled more than settleLag ago or handed more than
// maxAge ago.
func (h *heldReady) count(consumer string, maxAge time.Duration) int {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	lv := h.levels[consumer]
	for seq, m := range lv {
		if (!m.settled.IsZero() && now.Sub(m.settled) > settleLag) || now.Sub(m.handed) > maxAge {
			delete(lv, seq)
		}
	}
	if lv != nil && len(lv) == 0 {
		delete(h.levels, consumer)
	}
	return len(lv)
}

func (h *heldReady) settle(consumer string, seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m, ok := h.levels[consumer][seq]; ok && m.settled.IsZero() {
		m.settled = time.Now()
		h.levels[consumer][seq] = m
	}
}

// settleReply forgets the held message whose ack subject is reply.
func (h *heldReady) settleReply(reply string) {
	if reply == "" {
		return
	}
	if md, err := jobstore.ParseAckReply(reply); err == nil {
		h.settle(md.Consumer, md.Sequence.Stream)
	}
}

// ackHeld acknowledges a held ready message (lease.go) and forgets it.
func (s *Service) ackHeld(reply string) {
	s.store.AckHeld(reply)
	s.held.settleReply(reply)
}

// trackedMsg is a ready message that forgets itself in heldReady when
// settled.
type trackedMsg struct {
	jetstream.Msg
	h         *heldReady
	consumer  string
	seq       uint64
	rechecked bool
}

func (m *trackedMsg) Ack() error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.Ack()
}

func (m *trackedMsg) DoubleAck(ctx context.Context) error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.DoubleAck(ctx)
}

func (m *trackedMsg) Nak() error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.Nak()
}

func (m *trackedMsg) NakWithDelay(d time.Duration) error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.NakWithDelay(d)
}

func (m *trackedMsg) Term() error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.Term()
}

func (m *trackedMsg) TermWithReason(reason string) error {
	m.h.settle(m.consumer, m.seq)
	return m.Msg.TermWithReason(reason)
}

// The level counts of a queue with many levels.
//
// Asking every registered level's consumer for its count costs a consumer
// info per level: with hundreds of levels that is the heaviest part of a
// fetch. So for a queue with more than maxInfoLevels registered levels
// the counts of a lookup are kept (levelSnap) and reused by the next
// pulls, for snapUses pulls or snapAge, whichever ends first; a queue
// with aging orders its levels by their heads' age and always looks up.
// A reused snapshot lists the levels it counted messages in, less what
// this process took since, plus every level registered since the
// snapshot and every level this process published to since it was last
// handed one of that level's messages (ownPending, levels.go): so a job
// enqueued through this process is seen by its next fetch, whatever the
// snapshot says. A listed level that emptied meanwhile just answers
// empty. What the snapshot does not see is a job enqueued through another
// process at a level the snapshot counted empty: for snapAge at most, a
// fetch here may hand out a job of a lower level before it.

// maxInfoLevels is the number of registered levels up to which a queue's
// level counts are looked up for every pull.
const maxInfoLevels = 16

// levelSnap is a queue's level counts as of a lookup: counts holds every
// level registered then, empty ones with 0, except those whose consumer
// was missing (their count is unknown: they are always pulled).
type levelSnap struct {
	counts map[int]uint64
	at     time.Time
	uses   *atomic.Int32

	// taken counts the messages this process took from each level since
	// the snapshot: they are not there for the next pull to expect.
	mu    sync.Mutex
	taken map[int]uint64
}

// expected returns the counts to size a pull's waves by: the snapshot's,
// less what this process took since. pullLevels takes off what this
// process holds of a level; the messages it holds that it took since the
// snapshot are already off, so they are added back here (held counts
// messages taken before the snapshot too, which the counts include).
func (s *Service) expected(queue string, l *levelSnap) map[int]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.taken) == 0 {
		return l.counts
	}
	out := make(map[int]uint64, len(l.counts))
	for p, n := range l.counts {
		t := l.taken[p]
		if t == 0 {
			out[p] = n
			continue
		}
		held := uint64(s.held.count(topology.ReadyConsumer(queue, p), s.cfg.ClaimAckWait))
		out[p] = n - min(n, t) + min(held, t)
	}
	return out
}

// took notes the messages of msgs as taken.
func (l *levelSnap) took(msgs []jetstream.Msg) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken == nil {
		l.taken = map[int]uint64{}
	}
	for _, m := range msgs {
		if _, p, ok := topology.ReadyLevelOf(m.Subject()); ok {
			l.taken[p]++
		}
	}
}

const (
	snapUses = 16
	snapAge  = 5 * time.Millisecond
)

// noteSnap keeps the counts of a lookup of a queue with many registered
// levels (reg). The messages the pull that made the lookup takes are
// noted on it (took).
func (s *Service) noteSnap(queue string, reg []int, counts map[int]uint64) *levelSnap {
	if _, aging := s.agingOf(queue); aging || len(reg) <= maxInfoLevels {
		s.levelSnaps.Delete(queue)
		return nil
	}
	snap := &levelSnap{counts: counts, at: time.Now(), uses: new(atomic.Int32)}
	s.levelSnaps.Store(queue, snap)
	return snap
}

// pullSnap pulls a queue with many levels by the counts of a recent
// lookup (done: the pull is answered); reg are the queue's registered
// levels. A queue without a fresh snapshot is left to the lookup.
func (s *Service) pullSnap(ctx context.Context, queue string, reg []int, want int) ([]jetstream.Msg, bool, error) {
	if len(reg) <= maxInfoLevels {
		return nil, false, nil
	}
	v, ok := s.levelSnaps.Load(queue)
	if !ok {
		return nil, false, nil
	}
	snap := v.(*levelSnap)
	if snap.uses.Add(1) > snapUses || time.Since(snap.at) > s.snapAge {
		s.levelSnaps.CompareAndDelete(queue, v)
		return nil, false, nil
	}
	counts := s.expected(queue, snap)
	var levels []int
	for _, p := range reg {
		n, counted := counts[p]
		if n > 0 || !counted || s.ownPending(queue, p) {
			levels = append(levels, p)
		}
	}
	if len(levels) == 0 {
		return nil, true, nil
	}
	out, err := s.pullLevels(ctx, queue, levels, counts, want)
	snap.took(out)
	return out, true, err
}
