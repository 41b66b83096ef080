package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The count keeper: one process at a time (the lease CountsRole in
// OJS_LEASES, rolelease.go) follows every write of the job records and
// keeps, in OJS_COUNTS, the numbers of jobs that only the records know
// (stats.go tells the whole design):
//
//   - per queue, the jobs active, scheduled, retryable and pending
//     (ojs.count.<queue>.<state>);
//   - per queue and priority, the active jobs whose claim still holds its
//     ready message (held_pNNN: in the ready stream, yet not available;
//     past the lease deferral, only those of a process that died holding
//     them, which the keeper looks for in the ready stream: heldcheck.go)
//     and the available jobs parked on a rate limit (parked_pNNN: no
//     longer in the ready stream, yet available), and the ready messages
//     whose job record never came (orphan_pNNN: in the ready stream, yet
//     not a job: orphans.go).
//
// It reads the bucket's stream with an ordered consumer that delivers
// headers only: each record write carries its summary (jobstore
// HeaderStat), and the keeper remembers, per job in one of those states
// or available with a record, its queue, priority and state. A write then
// moves the job from what the keeper remembers to what the header says,
// so a write the consumer never saw (replaced before it was read: the
// bucket keeps one revision) costs nothing: the next one settles the job.
// Parked jobs are read from OJS_WAIT (parkedReader): a waiter counts
// while the keeper knows its job available with the waiter's token.
//
// Once its first reading has caught up with the stream, the keeper
// answers questions on topology.CountsAskSubject (keptNumbers; its own
// process asks its tally directly): it reads the jobs stream's last
// sequence and waits (at most askWait) until it has read that far, so a
// reader finds every change made before it asked. It also writes every
// second the numbers that changed into OJS_COUNTS, as counter increments
// from the value the stream holds to the value it computed (ADR-49),
// which readers take when no keeper answers and operators see with the
// nats CLI. It is the only writer of those subjects: another process's
// write (a jetgate of an earlier version during an upgrade, or a keeper
// whose lease lapsed a moment ago) is undone at the next second, since
// each increment's acknowledgement carries the total it made.
//
// A keeper that loses its lease, or whose reading fails, stops; the next
// holder (any process, within topology.LeaseTTL) reads every record again
// from the first one. Until then readers take the numbers last written.
type countKeeper struct {
	s     *Service
	lease roleLease
	// every is how often the keeper renews its lease and writes; a
	// process that holds no lease tries to take it as often.
	every time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	// tried is closed after the keeper's first try (Start).
	tried chan struct{}
	try   sync.Once

	// keeping is set while this process keeps the counts and its first
	// reading has caught up (for tests and the log).
	keeping atomic.Bool
	// current is the tally of that reading, which this process's own
	// questions are answered from (answer).
	current atomic.Pointer[tally]
	// check watches the held ready messages of dead processes for the
	// tally in current (heldcheck.go).
	check atomic.Pointer[heldCheck]
	// orphans watches the ready messages whose record never came, for
	// the tally in current (orphans.go).
	orphans atomic.Pointer[orphanCheck]
	// abandoned makes a stopping keeper leave its lease to lapse, as a
	// process killed would (tests).
	abandoned atomic.Bool
}

func newCountKeeper(s *Service, holder string) *countKeeper {
	return &countKeeper{
		s:     s,
		lease: roleLease{kv: s.assets.Leases, role: topology.CountsRole, holder: holder},
		every: time.Second,
	}
}

// Start runs the keeper until Stop: the lease is taken in the background,
// by whichever process asks first. Start waits (at most startWait) for
// the first try: until another process is found holding the lease, or
// this one has read the records and answers questions, so that the first
// reads after a start are exact.
func (k *countKeeper) Start(ctx context.Context) error {
	k.mu.Lock()
	if k.cancel != nil {
		k.mu.Unlock()
		return errors.New("count keeper: Start called twice")
	}
	rctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done, k.tried = cancel, make(chan struct{}), make(chan struct{})
	k.mu.Unlock()
	go k.run(rctx)
	wait := time.NewTimer(startWait)
	defer wait.Stop()
	select {
	case <-k.tried:
	case <-wait.C:
	case <-ctx.Done():
	}
	return nil
}

// startWait bounds how long Start waits for the keeper's first try.
const startWait = 2 * time.Second

// triedOnce ends Start's wait.
func (k *countKeeper) triedOnce() { k.try.Do(func() { close(k.tried) }) }

// Stop ends the keeper and gives its lease up (so that another process
// takes over at once). Safe to call twice.
func (k *countKeeper) Stop() {
	k.mu.Lock()
	cancel, done := k.cancel, k.done
	k.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (k *countKeeper) run(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		ok, err := k.lease.acquire(ctx, k.s.now())
		if err != nil && ctx.Err() == nil {
			k.s.log.Debug("count keeper: lease not taken", "error", err)
		}
		if ok {
			k.keep(ctx)
		}
		k.triedOnce()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// keep plays the role while this process holds the lease.
func (k *countKeeper) keep(parent context.Context) {
	since := k.s.now()
	ctx, cancel := context.WithCancel(parent)
	defer func() {
		k.keeping.Store(false)
		k.current.Store(nil)
		k.check.Store(nil)
		k.orphans.Store(nil)
		cancel()
		if !k.abandoned.Load() {
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			k.lease.release(rctx)
			rcancel()
		}
	}()
	k.s.log.Info("count keeper: this process keeps the queue counts", "holder", k.lease.holder)
	tl := newTally(k.s.heldFor())
	hc := newHeldCheck(k.s, k.every)
	oc := newOrphanCheck(k.s)
	tl.lapsedKeep = hc.lapsedKeep(k.every)
	rd, err := k.follow(ctx, tl)
	if err != nil {
		if ctx.Err() == nil {
			k.s.log.Warn("count keeper: reading the job records failed", "error", err)
		}
		return
	}
	defer rd.stop()
	g := &gauges{s: k.s, published: map[gaugeKey]int64{}}
	if err := g.load(ctx); err != nil {
		if ctx.Err() == nil {
			k.s.log.Warn("count keeper: reading the counters failed", "error", err)
		}
		return
	}
	var pr parkedReader
	caughtUp := tl.caughtUpC()
	renewed := time.Now()
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-rd.failed:
			k.s.log.Warn("count keeper: reading the job records stopped", "error", err)
			return
		case <-caughtUp:
			// Questions are answered from now on; the counters are written
			// at once.
			caughtUp = nil
			sub, err := k.s.nc.Subscribe(topology.CountsAskSubject, func(m *nats.Msg) { k.serve(ctx, tl, m) })
			if err != nil {
				k.s.log.Warn("count keeper: questions not taken", "error", err)
				return
			}
			defer func() { _ = sub.Unsubscribe() }()
			k.check.Store(hc)
			k.orphans.Store(oc)
			k.current.Store(tl)
			k.keeping.Store(true)
			k.triedOnce()
		case <-t.C:
			if err := k.lease.renew(ctx, since); err != nil {
				// NATS not answering for a moment (a cluster electing a
				// leader) is not a reason to read every record again, as
				// long as the lease cannot have lapsed: no other process
				// can take it before.
				if errors.Is(err, ojs.ErrUnavailable) && time.Since(renewed) < topology.LeaseTTL-2*k.every && ctx.Err() == nil {
					k.s.log.Debug("count keeper: lease not renewed, trying again", "error", err)
					continue
				}
				if ctx.Err() == nil {
					k.s.log.Warn("count keeper: lease lost", "error", err)
				}
				return
			}
			renewed = time.Now()
			if caughtUp != nil {
				continue
			}
		}
		if err := pr.count(ctx, k.s, tl); err != nil && ctx.Err() == nil {
			k.s.log.Debug("count keeper: parked jobs not read", "error", err)
		}
		if err := hc.watch(ctx, tl); err != nil && ctx.Err() == nil {
			k.s.log.Debug("count keeper: held ready messages not checked", "error", err)
		}
		if err := oc.watch(ctx, tl, hc.suspect.Load()); err != nil && ctx.Err() == nil {
			k.s.log.Debug("count keeper: orphan ready messages not checked", "error", err)
		}
		g.write(ctx, tl.gauges(k.s.now()))
	}
}

// heldFor is how long a claim holds its ready message at most while its
// process lives: the lease deferral (lease.go) of an attempt whose
// message is held at all (its visibility timeout is at least the
// consumers' AckWait).
func (s *Service) heldFor() time.Duration { return s.leaseDeferral(s.cfg.ClaimAckWait) }

// recordReader is the keeper's reading of the jobs bucket.
type recordReader struct {
	it     jetstream.MessagesContext
	failed chan error
	wg     sync.WaitGroup
}

func (r *recordReader) stop() {
	r.it.Stop()
	r.wg.Wait()
}

// follow reads every record of the jobs bucket into tl, from the first,
// then every write as it comes.
func (k *countKeeper) follow(ctx context.Context, tl *tally) (*recordReader, error) {
	stream := topology.KVStream(topology.JobsBucket)
	info, err := k.s.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", stream, jobstore.Unavailable(err))
	}
	if info.CachedInfo().State.Msgs == 0 {
		tl.markCaughtUp()
	}
	cons, err := k.s.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", stream, jobstore.Unavailable(err))
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", stream, jobstore.Unavailable(err))
	}
	r := &recordReader{it: it, failed: make(chan error, 1)}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					r.failed <- err
				}
				return
			}
			k.read(ctx, tl, m)
		}
	}()
	return r, nil
}

// read applies one record message to tl.
func (k *countKeeper) read(ctx context.Context, tl *tally, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	defer tl.advance(md.Sequence.Stream, md.NumPending == 0)
	id, ok := jobstore.RecordID(m.Subject())
	if !ok {
		return
	}
	h := m.Headers()
	if jobstore.RecordGone(h) {
		tl.apply(id, nil)
		return
	}
	st, ok := jobstore.ParseStat(h.Get(jobstore.HeaderStat))
	if !ok {
		// Written by a jetgate that did not summarize its records.
		st, ok, err = k.s.store.StatAt(ctx, id, md.Sequence.Stream)
		if err != nil || !ok {
			return // replaced since (its successor settles the job), or unreadable
		}
	}
	tl.apply(id, &st)
}

// askWait bounds how long the keeper waits, for one question, to have read
// the records written before it; the reader waits twice as long for the
// answer before it reads the counters instead.
const askWait = 500 * time.Millisecond

// countsAsk is a question to the keeper: the queues whose numbers are
// wanted.
type countsAsk struct {
	Queues []string `json:"queues"`
}

// countsAnswer is the keeper's answer: per queue (as named in the
// question), its numbers by counter name (active, scheduled, retryable,
// pending, held_pNNN, parked_pNNN, orphan_pNNN; 0 left out).
type countsAnswer struct {
	Counts map[string]map[string]int64 `json:"counts"`
	Error  string                      `json:"error,omitempty"`
}

// serve answers one question (CountsAskSubject).
func (k *countKeeper) serve(ctx context.Context, tl *tally, m *nats.Msg) {
	var q countsAsk
	var a countsAnswer
	if err := json.Unmarshal(m.Data, &q); err != nil {
		a.Error = "bad question: " + err.Error()
	} else if a.Counts, err = k.answer(ctx, tl, q.Queues); err != nil {
		a.Error = err.Error()
	}
	b, _ := json.Marshal(a)
	_ = m.Respond(b)
}

// answer returns the numbers tl makes of queues once it has read every
// record written before the question (or after askWait): a reader that
// wrote a record a moment ago finds its change counted.
func (k *countKeeper) answer(ctx context.Context, tl *tally, queues []string) (map[string]map[string]int64, error) {
	wctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	st, err := k.s.js.Stream(wctx, topology.KVStream(topology.JobsBucket))
	if err != nil {
		return nil, jobstore.Unavailable(err)
	}
	_ = tl.waitApplied(wctx, st.CachedInfo().State.LastSeq)
	// The ready messages a dead process held are looked for now, so that
	// one acked a moment ago no longer counts held.
	if hc := k.check.Load(); hc != nil {
		if err := hc.check(wctx, tl); err != nil && wctx.Err() == nil {
			k.s.log.Debug("count keeper: held ready messages not checked", "error", err)
		}
	}
	// And the orphans known, so that one dropped a moment ago no longer
	// counts.
	if oc := k.orphans.Load(); oc != nil {
		if err := oc.present(wctx, tl); err != nil && wctx.Err() == nil {
			k.s.log.Debug("count keeper: orphan ready messages not checked", "error", err)
		}
	}
	tokens := make([]string, len(queues))
	for i, q := range queues {
		tokens[i] = topology.Token(q)
	}
	byToken := tl.numbers(k.s.now(), tokens)
	out := make(map[string]map[string]int64, len(queues))
	for i, q := range queues {
		out[q] = byToken[tokens[i]]
	}
	return out, nil
}

// keptNumbers asks the count keeper for the numbers it keeps of queues
// (answer): from this process's own tally when it is the keeper, else with
// one request. It returns nil when no keeper answers in time (none has
// caught up yet, or it is being replaced): the reader then takes the
// counters the last keeper wrote.
func (s *Service) keptNumbers(ctx context.Context, queues []string) map[string]map[string]int64 {
	if tl := s.keeper.current.Load(); tl != nil {
		out, err := s.keeper.answer(ctx, tl, queues)
		if err == nil {
			return out
		}
	}
	b, err := json.Marshal(countsAsk{Queues: queues})
	if err != nil {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, 2*askWait)
	defer cancel()
	m, err := s.nc.RequestWithContext(actx, topology.CountsAskSubject, b)
	if err != nil {
		return nil
	}
	var a countsAnswer
	if json.Unmarshal(m.Data, &a) != nil || a.Error != "" || a.Counts == nil {
		return nil
	}
	return a.Counts
}
