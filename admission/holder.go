package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The holder sentinel: the schedule that brings back the held ready
// messages of a process that died (why, and the arithmetic: lease.go).
//
// While this process holds ready messages as the backstop of leases not
// written yet, it keeps one message schedule of its own in OJS_TIMERS, on
// ojs.timer.holder.<process id>, due ClaimAckWait + a refresh period + a
// margin after it was sent, and sends it again (replacing it) every
// refresh period. It fires only if the process stopped renewing it. Its
// body lists the ready consumers the process holds messages on, each
// with the consumer's creation time as the process knew it and a bound:
// the process holds no message of that consumer with a stream sequence
// above it. Bounds run ahead of the claims (lookahead), so a claim seldom
// finds its consumer missing or its message past the bound.
//
// A claim that does (cover) sends a new sentinel before its record is
// written, without waiting for JetStream's answer: the sentinel goes out
// on the connection the record write then goes out on, so a record the
// server took in comes after the sentinel that covers it, and the claim
// waits for no extra round trip. A sentinel JetStream refused (its answer
// comes to acks) makes every level count as unlisted until one is
// stored, and the renewer sends one at its next tick.
//
// Writes: one sentinel per refresh period per process while it holds
// messages (5 s by default), one more now and then when a claim goes past
// a bound or holds on a new consumer, one cancel when the process held
// nothing for a refresh period; none per job.
//
// The count keeper reads the sentinels too: one not renewed for a while,
// or fired, tells it that a process died holding ready messages, which
// it then counts held until they are acked (heldcheck.go).

const (
	// minLookahead is the least a bound runs ahead of the highest
	// sequence covered.
	minLookahead = 256
	// lookaheadSpan is how long a level's claims, at the pace of the
	// last seconds, take to reach its bound; the renewer raises the
	// bound when they are halfway.
	lookaheadSpan = 4 * time.Second
)

// errHolderClosed refuses a cover once the process stops: the claim
// writes its lease timer at once instead.
var errHolderClosed = errors.New("holder sentinel stopped")

// holder keeps this process's sentinel.
type holder struct {
	s *Service
	// id names this process's sentinel; a new one at every Start, so a
	// process started again never replaces the sentinel of its previous
	// run, which lists what that run held.
	id string
	// ackWait, refresh and margin: the sentinel is due ackWait + refresh
	// + margin after it was sent, and sent every refresh; the renewer
	// looks every tick.
	ackWait, refresh, margin, tick time.Duration
	host                           string
	acks                           *nats.Subscription // JetStream's answers to the sentinels sent

	mu     sync.Mutex
	levels map[string]*holdLevel // by ready consumer name
	sentAt time.Time             // when the sentinel in JetStream was sent; zero: none
	closed bool
	// failing is set when JetStream refused a sentinel, until one is
	// stored (logged once).
	failing bool

	stop chan struct{}
	wg   sync.WaitGroup

	// Fired sentinels being handled (holderwalk.go).
	walkCtx    context.Context
	walkCancel context.CancelFunc
	walks      sync.WaitGroup
	walksOver  bool
}

// holdLevel is one ready consumer this process holds messages on.
type holdLevel struct {
	queue string
	prio  int
	// holds counts the deferred leases held on it and the claims that
	// will be (covered, their record not written yet); a level is
	// dropped from the sentinel only when it has none.
	holds int
	used  time.Time // last cover or release
	// maxSeq is the highest stream sequence covered; bound the one the
	// last sentinel sent covers up to (0: not in it).
	maxSeq, bound uint64
	// The pace of the claims: maxSeq at rateAt.
	rateSeq uint64
	rateAt  time.Time
}

// holderBody is the sentinel's body (readable with nats stream view
// OJS_TIMERS).
type holderBody struct {
	Process   string        `json:"process"`
	Host      string        `json:"host,omitempty"`
	PID       int           `json:"pid"`
	At        time.Time     `json:"at"`
	AckWaitMs int64         `json:"ack_wait_ms"`
	RefreshMs int64         `json:"refresh_ms"`
	Levels    []holderLevel `json:"levels"`
}

type holderLevel struct {
	Queue    string    `json:"queue"`
	Priority int       `json:"priority"`
	Created  time.Time `json:"created,omitzero"`
	Bound    uint64    `json:"bound"`
}

func newHolder(s *Service) *holder {
	a := s.cfg.ClaimAckWait
	refresh := max(a/6, 100*time.Millisecond)
	h := &holder{
		s:       s,
		ackWait: a,
		refresh: refresh,
		margin:  max(time.Second, a/10),
		tick:    min(time.Second, refresh/2),
		levels:  map[string]*holdLevel{},
	}
	h.host, _ = os.Hostname()
	h.walkCtx, h.walkCancel = context.WithCancel(context.Background())
	return h
}

// start begins renewing the sentinel under a new process id; claims are
// covered from then on.
func (h *holder) start() error {
	acks, err := h.s.nc.Subscribe(h.s.nc.NewInbox(), h.answered)
	if err != nil {
		return fmt.Errorf("holder sentinel answers: %w", err)
	}
	h.stop = make(chan struct{})
	h.mu.Lock()
	h.id = jobstore.NewToken()
	h.acks = acks
	h.mu.Unlock()
	h.wg.Add(1)
	go h.run()
	return nil
}

func (h *holder) run() {
	defer h.wg.Done()
	t := time.NewTicker(h.tick)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.renew()
		}
	}
}

// renew sends the sentinel again when it is due: a refresh period after
// the last one, a level's claims halfway from their bound to the next,
// or the last one refused; or cancels it when nothing is held any more.
func (h *holder) renew() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.dueLocked(time.Now()) {
		return
	}
	if err := h.sendLocked(); err != nil {
		h.failedLocked(err)
	}
}

func (h *holder) dueLocked(now time.Time) bool {
	if len(h.levels) == 0 {
		return !h.sentAt.IsZero() // to cancel
	}
	if h.failing || h.sentAt.IsZero() || now.Sub(h.sentAt) >= h.refresh-h.tick {
		return true
	}
	for _, lv := range h.levels {
		if lv.holds > 0 && lv.maxSeq+lv.ahead(now)/2 > lv.bound {
			return true
		}
	}
	return false
}

// ahead is how far past maxSeq the level's next bound goes.
func (lv *holdLevel) ahead(now time.Time) uint64 {
	if lv.rateAt.IsZero() {
		return minLookahead
	}
	el := max(now.Sub(lv.rateAt), time.Second)
	pace := float64(lv.maxSeq-lv.rateSeq) / el.Seconds()
	return max(minLookahead, uint64(pace*lookaheadSpan.Seconds()))
}

// cover makes sure a sentinel covering msg, a ready message a claim is
// about to hold as the backstop of its lease, goes out before the claim's
// record is written; it returns the level to release (release) once the
// claim ends without holding it, or once its deferred lease is written.
func (h *holder) cover(msg jetstream.Msg) (string, error) {
	md, err := msg.Metadata()
	if err != nil {
		return "", err
	}
	name, seq := md.Consumer, md.Sequence.Stream
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.id == "" {
		return "", errHolderClosed
	}
	lv := h.levels[name]
	if lv == nil {
		qt, prio, ok := topology.ReadyLevelOf(msg.Subject())
		queue, err := topology.Untoken(qt)
		if !ok || err != nil {
			return "", fmt.Errorf("ready subject %q names no level", msg.Subject())
		}
		lv = &holdLevel{queue: queue, prio: prio}
		h.levels[name] = lv
	}
	lv.holds++
	lv.used = time.Now()
	lv.maxSeq = max(lv.maxSeq, seq)
	if lv.bound < seq {
		if err := h.sendLocked(); err != nil {
			lv.holds--
			h.failedLocked(err)
			return "", err
		}
	}
	return name, nil
}

// release ends one hold on a level (cover).
func (h *holder) release(name string) {
	if name == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lv := h.levels[name]; lv != nil && lv.holds > 0 {
		lv.holds--
		lv.used = time.Now()
	}
}

// sendLocked sends the sentinel with the levels held now and new bounds,
// or cancels it when none is held. h.mu is held: sentinels go out in the
// order their contents were decided, and before the record writes of the
// claims they cover.
func (h *holder) sendLocked() error {
	now := time.Now()
	body := holderBody{
		Process: h.id, Host: h.host, PID: os.Getpid(), At: now,
		AckWaitMs: h.ackWait.Milliseconds(), RefreshMs: h.refresh.Milliseconds(),
	}
	type listed struct {
		lv    *holdLevel
		bound uint64
	}
	var list []listed
	for name, lv := range h.levels {
		if lv.holds == 0 && now.Sub(lv.used) >= h.refresh {
			delete(h.levels, name) // a later claim lists it again
			continue
		}
		b := max(lv.bound, lv.maxSeq+lv.ahead(now))
		if now.Sub(lv.rateAt) >= time.Second {
			lv.rateAt, lv.rateSeq = now, lv.maxSeq
		}
		list = append(list, listed{lv, b})
		body.Levels = append(body.Levels, holderLevel{
			Queue: lv.queue, Priority: lv.prio, Created: h.created(name), Bound: b,
		})
	}
	if len(list) == 0 {
		if !h.sentAt.IsZero() {
			h.s.store.CancelTimer(topology.TimerHolder, h.id)
			h.sentAt = time.Time{}
		}
		return nil
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	at := now.Add(h.ackWait + h.refresh + h.margin)
	if err := h.s.store.SendTimerData(topology.TimerHolder, h.id, h.id, at, data, h.acks.Subject); err != nil {
		return err
	}
	h.sentAt = now
	for _, l := range list {
		l.lv.bound = l.bound
	}
	return nil
}

// answered reads JetStream's answer to a sentinel sent.
func (h *holder) answered(m *nats.Msg) {
	err := jobstore.PubAckError(m)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.failedLocked(err)
		return
	}
	h.failing = false
}

// failedLocked notes a sentinel not stored: no level counts as listed,
// so the next claim on each sends one, and the renewer tries again at
// its next tick. h.mu is held.
func (h *holder) failedLocked(err error) {
	if !h.failing {
		h.s.log.Warn("holder sentinel not stored; sent again shortly", "process", h.id, "error", err)
	}
	h.failing = true
	for _, lv := range h.levels {
		lv.bound = 0
	}
}

// created is the creation time of a ready consumer as this process knows
// it (zero if it does not): a consumer created after it lost its record
// of what it delivered (holderwalk.go).
func (h *holder) created(name string) time.Time {
	if c, ok := h.s.consumers.Load(name); ok {
		if info := c.(jetstream.Consumer).CachedInfo(); info != nil {
			return info.Created
		}
	}
	return time.Time{}
}

// close stops renewing the sentinel. With cancel (every deferred lease
// was written: the process holds nothing) it is cancelled too; otherwise
// it is left to fire, as after a crash.
func (h *holder) close(cancel bool) {
	if h.stop == nil {
		return // never started
	}
	close(h.stop)
	h.wg.Wait()
	h.mu.Lock()
	h.closed = true
	if cancel && !h.sentAt.IsZero() {
		h.s.store.CancelTimer(topology.TimerHolder, h.id)
	}
	h.mu.Unlock()
	_ = h.s.nc.FlushTimeout(5 * time.Second)
	_ = h.acks.Unsubscribe()
}
