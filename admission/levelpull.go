package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
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
				s.putBackWave(wave[i+1:])
				return out, a.err
			}
			out = s.takeLevel(ctx, queue, a, out, want)
			if a.err != nil {
				s.putBackWave(wave[i+1:])
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
		s.putBack(msgs[n:])
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

// putBackWave returns the messages of levels not taken.
func (s *Service) putBackWave(wave []*levelAsk) {
	var msgs []jetstream.Msg
	for _, a := range wave {
		msgs = append(msgs, a.msgs...)
	}
	s.putBack(msgs)
}

// putBack returns messages not taken (Nak) and waits until the server
// has taken the Naks in: a pull that reached it first would be handed the
// level's later messages before these (FIFO within a level, PRI-003).
// The server answers an ack that asks for a reply once it processed it.
func (s *Service) putBack(msgs []jetstream.Msg) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		if t, ok := m.(*trackedMsg); ok {
			t.h.settle(t.consumer, t.seq)
		}
	}
	// In order on one connection: each consumer redelivers its put-back
	// messages in the order it took the Naks in.
	inbox := s.nc.NewInbox()
	replies := make(chan *nats.Msg, len(msgs))
	sub, err := s.nc.ChanSubscribe(inbox, replies)
	if err != nil {
		for _, m := range msgs {
			_ = m.Nak()
		}
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, m := range msgs {
		if err := s.nc.PublishRequest(m.Reply(), inbox, []byte("-NAK")); err != nil {
			return
		}
	}
	timeout := time.NewTimer(putBackWait)
	defer timeout.Stop()
	for range msgs {
		select {
		case <-replies:
		case <-timeout.C:
			return
		}
	}
}

// putBackWait bounds the wait for the server's answer to a Nak.
const putBackWait = 2 * time.Second

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
	// naked holds when a message of a level was last put back (Nak).
	naked map[string]time.Time
}

// putBackFor is how long after this process put a message of a level
// back (Nak) an empty pull on that level waits for it (levels.go): the
// server takes the Nak in asynchronously, and a pull that arrives first
// finds nothing to redeliver yet.
const putBackFor = 100 * time.Millisecond

// putBack notes that a message of consumer's level was put back.
func (h *heldReady) putBack(consumer string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.naked == nil {
		h.naked = map[string]time.Time{}
	}
	h.naked[consumer] = time.Now()
}

// takePutBack reports, once, whether a message of consumer's level was
// put back within putBackFor.
func (h *heldReady) takePutBack(consumer string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.naked[consumer]
	delete(h.naked, consumer)
	return ok && time.Since(at) <= putBackFor
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
	m.h.putBack(m.consumer)
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
// info per level: with hundreds of levels that would be the heaviest part
// of every fetch. So a queue with more than maxInfoLevels registered
// levels (and no aging, which orders levels by their heads' age and
// always looks them all up) takes the counts of all its levels from one
// page of the ready stream's consumer list (listLevels, levels.go), and
// keeps them for the next pulls (levelSnap): for snapUses pulls or
// snapAge, whichever ends first. A pull walks the registered levels in
// order and stops once the levels walked held, undelivered, what it wants
// (walkLevels). If the list fails, the levels are asked lazily: the walk
// asks the levels the snapshot has not counted yet, infoChunk at a time,
// as it reaches them. The counts are taken less what this process
// took since (expected), and a level is pulled if it is counted above
// zero, if its consumer is missing (levels.go), or if a message was
// stored there after the last one this process was handed from it, as
// far as this process knows (unseen: its own publishes, and what a fetch
// that found nothing read from the stream, visible.go): so a job
// enqueued through this process is seen by its next fetch, whatever the
// snapshot says. A listed level that emptied meanwhile just answers
// empty; a pull that gets nothing drops the snapshot and walks again with
// fresh counts (pullMany), and then asks the stream. What a snapshot does
// not see is a job enqueued through another process at a level it
// counted empty while a lower level holds jobs: for snapAge at most, a
// fetch here may hand out a job of a lower level before it.
//
// Measured with BenchmarkPriorityLevels (bench/, 5,000 jobs, three quiet
// runs), 256 levels, jobs/s: drain 4.8-5.1k and round trip 2.9-3.0k,
// against 4.3-4.7k and 3.1-3.2k for the stream lookups this replaces;
// asking 32 consumers at a time instead of the list, about half that
// (drain 1.0-2.0k, round trip 0.6-1.0k, noisier runs).

// maxInfoLevels is the number of registered levels up to which all of a
// queue's levels are looked up for every pull.
const maxInfoLevels = 16

// infoChunk is how many uncounted levels a pull of a queue with many
// levels asks at once.
const infoChunk = 32

// levelSnap is a queue's level counts, looked up lazily.
type levelSnap struct {
	at   time.Time
	uses *atomic.Int32

	// listFrom is where the queue's consumers start in the stream's
	// consumer list, as last found (listLevels).
	listFrom atomic.Int64

	mu sync.Mutex
	// infos holds the levels asked so far.
	infos map[int]levelInfo
	// taken counts the messages this process took from each level since
	// it was asked: they are not there for the next pull to expect.
	taken map[int]uint64
}

// expectedLocked returns the count of level p to size a pull's waves by:
// its consumer's, less what this process took since. pullLevels takes off
// what this process holds of a level; the messages it holds that it took
// since the lookup are already off, so they are added back here (held
// counts messages taken before the lookup too, which the count includes).
func (s *Service) expectedLocked(queue string, l *levelSnap, p int) uint64 {
	n := l.infos[p].count
	t := l.taken[p]
	if t == 0 {
		return n
	}
	held := uint64(s.held.count(topology.ReadyConsumer(queue, p), s.cfg.ClaimAckWait))
	return n - min(n, t) + min(held, t)
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
	snapAge  = 10 * time.Millisecond
)

// snapshot returns the queue's fresh level snapshot, or a new empty one.
func (s *Service) snapshot(queue string) *levelSnap {
	from := 0
	if v, ok := s.levelSnaps.Load(queue); ok {
		snap := v.(*levelSnap)
		if snap.uses.Add(1) <= snapUses && time.Since(snap.at) <= s.snapAge {
			return snap
		}
		from = int(snap.listFrom.Load())
		s.levelSnaps.CompareAndDelete(queue, v)
	}
	snap := &levelSnap{at: time.Now(), uses: new(atomic.Int32), infos: map[int]levelInfo{}}
	snap.listFrom.Store(int64(from))
	snap.uses.Add(1)
	s.levelSnaps.Store(queue, snap)
	return snap
}

// pullMany takes up to want ready messages of a queue with many
// registered levels (reg, ascending), by the counts of its snapshot. A
// pull that gets nothing walks again with fresh counts, twice at most,
// unless its counts were fresh and it walked every level.
func (s *Service) pullMany(ctx context.Context, queue string, reg []int, want int) ([]jetstream.Msg, error) {
	for try := 0; ; try++ {
		snap := s.snapshot(queue)
		fresh := snap.uses.Load() == 1
		if fresh {
			// All levels in one request; on failure they are asked
			// one by one as the walk reaches them.
			if infos, next, err := s.listLevels(ctx, queue, reg, int(snap.listFrom.Load())); err == nil {
				snap.mu.Lock()
				snap.infos = infos
				snap.mu.Unlock()
				snap.listFrom.Store(int64(next))
			}
		}
		levels, counts, cut, err := s.walkLevels(ctx, queue, snap, reg, want)
		if err != nil {
			s.levelSnaps.CompareAndDelete(queue, snap)
			return nil, err
		}
		out, err := s.pullLevels(ctx, queue, levels, counts, want)
		snap.took(out)
		if len(out) > 0 || err != nil || try == 2 || (fresh && !cut) {
			return out, err
		}
		// The levels walked are empty: others took their jobs, or the
		// counts were of messages handed out. Fresh counts, further on.
		s.levelSnaps.CompareAndDelete(queue, snap)
	}
}

// walkLevels lists the levels of reg a pull of want messages tries, in
// order, with their counts, asking the consumers of the levels snap has
// not counted yet as the walk reaches them. The walk stops (cut) once the
// levels walked held, undelivered, what the pull wants: messages handed
// out (ack-pending) make a level worth a pull, since some may have been
// put back, but are not expected, since most are held by their claims
// or are being acknowledged.
func (s *Service) walkLevels(ctx context.Context, queue string, snap *levelSnap, reg []int, want int) ([]int, map[int]uint64, bool, error) {
	var levels []int
	counts := map[int]uint64{}
	expected := 0
	for i := 0; i < len(reg); i++ {
		if expected >= want {
			return levels, counts, true, nil
		}
		p := reg[i]
		snap.mu.Lock()
		_, asked := snap.infos[p]
		snap.mu.Unlock()
		if !asked {
			var ask []int
			snap.mu.Lock()
			for _, q := range reg[i:] {
				if _, ok := snap.infos[q]; !ok {
					ask = append(ask, q)
					if len(ask) == infoChunk {
						break
					}
				}
			}
			snap.mu.Unlock()
			infos, err := s.levelInfos(ctx, queue, ask)
			if err != nil {
				return nil, nil, false, err
			}
			snap.mu.Lock()
			for q, in := range infos {
				snap.infos[q] = in
				delete(snap.taken, q)
			}
			snap.mu.Unlock()
		}
		snap.mu.Lock()
		in := snap.infos[p]
		n := s.expectedLocked(queue, snap, p)
		avail := in.pending - min(in.pending, snap.taken[p])
		snap.mu.Unlock()
		if n == 0 && !in.missing && !s.unseen(queue, p) {
			continue
		}
		levels = append(levels, p)
		if in.missing {
			// A guess to size the waves; the walk goes on, since only
			// the level's answer can tell.
			counts[p] = 1
			continue
		}
		counts[p] = n
		expected += int(avail)
	}
	return levels, counts, false, nil
}
