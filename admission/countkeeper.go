package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
//     ready message (held_pNNN: in the ready stream, yet not available)
//     and the available jobs parked on a rate limit (parked_pNNN: no
//     longer in the ready stream, yet available).
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
// Once its first reading has caught up with the stream, the keeper writes
// every second the numbers that changed, as counter increments from the
// value the stream holds to the value it computed (ADR-49). It is the
// only writer of those subjects: another process's write (a jetgate of an
// earlier version during an upgrade, or a keeper whose lease lapsed a
// moment ago) is undone at the next second, since each increment's
// acknowledgement carries the total it made.
//
// A keeper that loses its lease, or whose reading fails, stops; the next
// holder (any process, within topology.LeaseTTL) reads every record again
// from the first one. Until then the numbers stay as last written.
type countKeeper struct {
	s     *Service
	lease roleLease
	// every is how often the keeper renews its lease and writes; a
	// process that holds no lease tries to take it as often.
	every time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	// keeping is set while this process keeps the counts and its first
	// reading has caught up (for tests and the log).
	keeping atomic.Bool
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

// Start runs the keeper until Stop. It returns at once: the lease is
// taken in the background, by whichever process asks first.
func (k *countKeeper) Start(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		return errors.New("count keeper: Start called twice")
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	go k.run(ctx)
	return nil
}

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
		cancel()
		if !k.abandoned.Load() {
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			k.lease.release(rctx)
			rcancel()
		}
	}()
	k.s.log.Info("count keeper: this process keeps the queue counts", "holder", k.lease.holder)
	tl := newTally(k.s.heldFor())
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
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-rd.failed:
			k.s.log.Warn("count keeper: reading the job records stopped", "error", err)
			return
		case <-t.C:
		}
		if err := k.lease.renew(ctx, since); err != nil {
			if ctx.Err() == nil {
				k.s.log.Warn("count keeper: lease lost", "error", err)
			}
			return
		}
		if !tl.caughtUp() {
			continue
		}
		parked, err := pr.count(ctx, k.s, tl)
		if err != nil && ctx.Err() == nil {
			k.s.log.Debug("count keeper: parked jobs not read", "error", err)
		}
		g.write(ctx, tl.gauges(k.s.now(), parked))
		k.keeping.Store(true)
	}
}

// parkedEvery is how often the keeper reads the parked jobs at most.
const parkedEvery = 2 * time.Second

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
	defer func() {
		if md.NumPending == 0 {
			tl.markCaughtUp()
		}
	}()
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

// parkedReader counts the parked jobs per queue and priority: the
// waiters in OJS_WAIT whose job the keeper knows available with the
// waiter's token. It reads the waiters again only when the wait stream
// changed (its message count or sequences, one stream info per second),
// and then at most every parkedEvery, or twenty times as long as the last
// reading took; between readings it checks the waiters it read against
// the records it follows, so a parked job cancelled stops counting at
// once.
type parkedReader struct {
	state   [3]uint64 // messages, first and last sequence at the last reading
	waiters []parkedWaiter
	next    time.Time
}

type parkedWaiter struct {
	id, token, queue string
	prio             int
}

// count returns the parked jobs as of now; an error leaves the last
// reading in use.
func (pr *parkedReader) count(ctx context.Context, s *Service, tl *tally) (map[gaugeKey]int64, error) {
	var err error
	if now := time.Now(); !now.Before(pr.next) {
		err = pr.read(ctx, s)
		pr.next = now.Add(max(parkedEvery, 20*time.Since(now)))
	}
	if len(pr.waiters) == 0 {
		return nil, err
	}
	out := map[gaugeKey]int64{}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, w := range pr.waiters {
		if j, ok := tl.jobs[w.id]; ok && j.state == ojs.StateAvailable && j.queue == w.queue && j.token == w.token {
			out[gaugeKey{w.queue, parkedAt(w.prio)}]++
		}
	}
	return out, err
}

// read reads every waiter of OJS_WAIT, if the stream changed since the
// last reading.
func (pr *parkedReader) read(ctx context.Context, s *Service) error {
	info, err := s.assets.Wait.Info(ctx)
	if err != nil {
		return jobstore.Unavailable(err)
	}
	st := [3]uint64{info.State.Msgs, info.State.FirstSeq, info.State.LastSeq}
	if st == pr.state {
		return nil
	}
	var ws []parkedWaiter
	if st[0] > 0 {
		from := uint64(1)
		for {
			pos, err := s.store.ScanWaiters(ctx, from, math.MaxInt, func(w jobstore.Waiter) bool {
				ws = append(ws, parkedWaiter{id: w.JobID, token: w.Token, queue: topology.Token(w.Queue), prio: w.Priority})
				return true
			})
			if err != nil {
				return err
			}
			if pos.Done {
				break
			}
			from = pos.Next
		}
	}
	pr.state, pr.waiters = st, ws
	return nil
}

// tally is what the keeper knows of the records.
type tally struct {
	mu      sync.Mutex
	heldFor time.Duration
	// jobs are the jobs available with a record, active, scheduled,
	// retryable or pending, by id.
	jobs map[string]tallyJob
	// held are the active jobs whose claim holds its ready message, by id.
	held map[string]heldJob
	// counts are the jobs per queue and state (active, scheduled,
	// retryable, pending).
	counts map[gaugeKey]int64
	// queues interns queue tokens (one string per queue, not per job).
	queues map[string]string
	ready  bool
}

type tallyJob struct {
	queue string
	prio  int32
	state ojs.State
	// token is the job's token while it is available (a parked job's
	// waiter carries it).
	token string
}

type heldJob struct {
	queue string
	prio  int32
	until int64 // Unix ms
}

// gaugeKey names one number the keeper writes: a queue token and a
// counter name (ojs.count.<queue>.<name>).
type gaugeKey struct{ queue, name string }

func (g gaugeKey) subject() string { return "ojs.count." + g.queue + "." + g.name }

func newTally(heldFor time.Duration) *tally {
	return &tally{heldFor: heldFor, jobs: map[string]tallyJob{}, held: map[string]heldJob{},
		counts: map[gaugeKey]int64{}, queues: map[string]string{}}
}

func (t *tally) markCaughtUp() {
	t.mu.Lock()
	t.ready = true
	t.mu.Unlock()
}

func (t *tally) caughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// kept reports whether the keeper remembers jobs in state st.
func kept(st ojs.State) bool {
	switch st {
	case ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending:
		return true
	}
	return false
}

// apply moves job id to what st says (nil: the record is gone).
func (t *tally) apply(id string, st *jobstore.RecordStat) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.jobs[id]; ok {
		if old.state != ojs.StateAvailable {
			k := gaugeKey{old.queue, string(old.state)}
			if t.counts[k]--; t.counts[k] == 0 {
				delete(t.counts, k)
			}
		}
		delete(t.jobs, id)
		delete(t.held, id)
	}
	if st == nil || !kept(st.State) {
		return
	}
	q, ok := t.queues[st.Queue]
	if !ok {
		q = strings.Clone(st.Queue)
		t.queues[q] = q
	}
	id = strings.Clone(id) // not the message's subject, which it would keep
	j := tallyJob{queue: q, prio: int32(st.Priority), state: st.State}
	if st.State == ojs.StateAvailable {
		j.token = strings.Clone(st.Token)
	}
	t.jobs[id] = j
	if st.State != ojs.StateAvailable {
		t.counts[gaugeKey{q, string(st.State)}]++
	}
	if st.State == ojs.StateActive && st.HeldSince > 0 && t.heldFor > 0 {
		t.held[id] = heldJob{queue: q, prio: int32(st.Priority), until: st.HeldSince + t.heldFor.Milliseconds()}
	}
}

// gauges returns every number to write as of now: the state counts, the
// held messages (forgetting claims older than heldFor) and parked.
func (t *tally) gauges(now time.Time, parked map[gaugeKey]int64) map[gaugeKey]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[gaugeKey]int64, len(t.counts)+len(parked)+8)
	for k, n := range t.counts {
		out[k] = n
	}
	ms := now.UnixMilli()
	for id, h := range t.held {
		if h.until <= ms {
			delete(t.held, id)
			continue
		}
		out[gaugeKey{h.queue, heldAt(int(h.prio))}]++
	}
	for k, n := range parked {
		out[k] += n
	}
	return out
}

// Counter names of the numbers the keeper writes per priority level.
const (
	heldPrefix   = "held_p"
	parkedPrefix = "parked_p"
)

func heldAt(prio int) string {
	return fmt.Sprintf("%s%0*d", heldPrefix, topology.PriorityDigits, prio)
}

func parkedAt(prio int) string {
	return fmt.Sprintf("%s%0*d", parkedPrefix, topology.PriorityDigits, prio)
}

// keptName reports whether counter name is one the keeper writes.
func keptName(name string) bool {
	switch ojs.State(name) {
	case ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending:
		return true
	}
	return strings.HasPrefix(name, heldPrefix) || strings.HasPrefix(name, parkedPrefix)
}

// gauges writes the keeper's numbers into OJS_COUNTS.
type gauges struct {
	s *Service
	// published is what each of the keeper's counters holds, as far as
	// the keeper knows (the totals its increments' acknowledgements
	// carried).
	published map[gaugeKey]int64
}

// load reads the keeper's counters as they stand.
func (g *gauges) load(ctx context.Context) error {
	info, err := g.s.assets.Counts.Info(ctx, jetstream.WithSubjectFilter(topology.CountSubjects))
	if err != nil {
		return jobstore.Unavailable(err)
	}
	for subj := range info.State.Subjects {
		rest, ok := strings.CutPrefix(subj, "ojs.count.")
		i := strings.LastIndexByte(rest, '.')
		if !ok || i < 0 || !keptName(rest[i+1:]) {
			continue
		}
		k := gaugeKey{rest[:i], rest[i+1:]}
		n, err := readCounter(ctx, g.s.assets.Counts, subj)
		if err != nil {
			return err
		}
		g.published[k] = n
	}
	return nil
}

// write moves every counter that differs from want to it.
func (g *gauges) write(ctx context.Context, want map[gaugeKey]int64) {
	type pending struct {
		k   gaugeKey
		fut jetstream.PubAckFuture
	}
	var ps []pending
	incr := func(k gaugeKey, by int64) {
		m := nats.NewMsg(k.subject())
		m.Header.Set("Nats-Incr", strconv.FormatInt(by, 10))
		f, err := g.s.js.PublishMsgAsync(m)
		if err != nil {
			g.s.log.Debug("count keeper: write failed", "subject", k.subject(), "error", err)
			return
		}
		ps = append(ps, pending{k, f})
	}
	for k, n := range want {
		if have := g.published[k]; have != n {
			incr(k, n-have)
		}
	}
	for k, have := range g.published {
		if _, ok := want[k]; !ok && have != 0 {
			incr(k, -have)
		}
	}
	timeout := time.NewTimer(flushWait)
	defer timeout.Stop()
	for _, p := range ps {
		select {
		case ack := <-p.fut.Ok():
			if n, err := strconv.ParseInt(ack.Value, 10, 64); err == nil {
				g.published[p.k] = n
			}
		case err := <-p.fut.Err():
			g.s.log.Debug("count keeper: write failed", "subject", p.k.subject(), "error", err)
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
