package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Backpressure (ojs-backpressure.md, ojs-backpressure.txt).
//
// A bounded queue has a depth stream, OJS_DEPTH_<queue>, holding one
// message (a unit) per job counted against the bound, on subject
// ojs.depth.<queue>.<tenant>. The bound is the stream's own limits with
// discard-new: MaxMsgs = max_depth, MaxBytes = max_size_bytes,
// MaxMsgsPerSubject = tenant_max_depth. A unit is published before the job
// is stored and JetStream refuses it atomically when the queue is full, so
// the bound holds across any number of processes and producers with no
// check-then-act. For the byte bound each unit is padded so that JetStream
// accounts exactly the size of the job's encoded envelope (a job smaller
// than the unit's own overhead counts as that overhead, ~100 bytes).
//
// A job holds its unit while it waits: from acceptance until a worker
// claims it, and again from a failed attempt (retryable) until the next
// claim; depth is available + scheduled + retryable + pending, the spec's
// count. A queue with count_active keeps the unit through active until the
// job finishes. Retries that find the queue full overdraw it instead of
// being refused: backpressure_overdraft.go.
//
// Units never leak: the record keeps the unit's sequence (depth_seq), a
// release deletes exactly that message and is idempotent, and when a
// queue is found full a reconciler walks its units (bounded by max_depth)
// and deletes those older than a minute whose job does not exist, is
// finished, or points at another unit: the crash between unit and record,
// and between a job's last transition and its release.
//
// Why stream limits and not a KV compare-and-swap reservation: a counter
// in one KV entry is a hot key (DESIGN "Hot keys": 1.6k acquire/release
// pairs/s from many goroutines, 36.8k/s only with an owner goroutine per
// key) and, being a bare number, cannot be checked job by job, so a crash
// between the reservation and the record leaks capacity for good; a lease
// set by job id in one entry grows to max_depth ids (megabytes rewritten
// per CAS at 50 000). One unit message per job gets JetStream's own atomic
// limit check, per-job verification and per-tenant bounds
// (MaxMsgsPerSubject) in a single publish, with no hot key. Measured on the
// shared 2-core machine (bench/backpressure_test.go): bounded enqueue ran
// at 0.72-0.97 of unbounded per run (0.84 over three), a refusal took
// ~0.17 ms median through the Go API, ~0.5 ms over HTTP.
//
// Under overload a refusal costs no round trip while the process is
// certain the queue is still full (backpressure_certain.go); admissions
// always take a unit from JetStream.
//
// A bound set through SetQueueBackpressure holds in the calling process
// when the call returns, and in every other process once its queue-config
// watch delivers the change (as pause does). Jobs accepted before that
// hold no unit and are not counted (ojs-queue-config.md 4.4: a new config
// does not touch jobs already in the queue).

// Pressure event types: the backpressure extension's names
// (ojs-backpressure.txt) and the core spec's (ojs-backpressure.md 10.1),
// both emitted.
const (
	EventQueuePressureWarning  = "queue.pressure_warning"
	EventQueuePressureCritical = "queue.pressure_critical"
	EventQueueOverflow         = "queue.overflow"
	EventBackpressureWarning   = "backpressure.warning"
	EventBackpressureRejected  = "backpressure.rejected"
	EventBackpressureDropped   = "backpressure.dropped"
	EventBackpressureCleared   = "backpressure.cleared"
)

// Tuning of the backpressure machinery.
const (
	// pressureFresh is how long a queue's observed depth is reused for
	// the X-OJS-Queue-Pressure header before it is read again.
	pressureFresh = 100 * time.Millisecond
	// reconcileEvery spaces the leak checks of one queue in one process.
	reconcileEvery = time.Minute
	// reconcileGrace is how old a unit must be before its job is checked:
	// older than any enqueue still writing its record.
	reconcileGrace = time.Minute
)

// PressureRecorder receives the backpressure metrics; admission/metrics
// implements it. A Recorder that does not is simply not told.
type PressureRecorder interface {
	QueuePressure(ctx context.Context, queue string, ratio float64)
	QueueRejected(ctx context.Context, queue, strategy string)
	QueueDropped(ctx context.Context, queue string)
}

// backpressure is this process's view of the bounded queues.
type backpressure struct {
	mu     sync.Mutex
	queues map[string]*bpQueue

	runCtx  context.Context
	release chan depthUnit
	sub     *nats.Subscription
	// ticketSub sees every ticket taken, in any process (lineClear).
	ticketSub *nats.Subscription
	// self marks this process's freed notices, so that it does not count
	// its own releases twice (backpressure_certain.go).
	self string
	// trust is how long a remembered refusal holds (certainFor; tests
	// lengthen it).
	trust   time.Duration
	over    overdraft
	tickets tickets
	// ending is closed by EndBlocking: producers blocked on a full queue
	// (the block strategy) stop waiting, and none starts to.
	ending    chan struct{}
	endingOne sync.Once
}

// depthUnit names one unit: a queue's depth stream (or, when over, the
// overdraft stream) and a sequence.
type depthUnit struct {
	queue string
	seq   uint64
	over  bool
}

// bpQueue is one queue's local state: its stream handle, the config last
// applied to it, the waiting producers and the last observed depth.
type bpQueue struct {
	name string

	ensureMu sync.Mutex // serialises ensureDepth's stream requests
	mu       sync.Mutex
	stream   jetstream.Stream
	applied  ojs.Backpressure
	ensured  bool
	waiters  []*waiter
	depth    int64 // units in the depth stream
	over     int64 // overdraft units
	bytes    int64
	seenAt   time.Time
	// readMu serialises the fresh readings of a refusal (observe);
	// freshAt is when the last one started: a refusal that came before
	// it uses its result instead of reading again.
	readMu    sync.Mutex
	freshAt   time.Time
	level     int
	reconcile time.Time
	// full, relStarted and relDone: backpressure_certain.go.
	full       fullMemo
	relStarted uint64
	relDone    uint64
	// ticketsSeen counts the tickets taken for the queue in any process
	// (the ticket subscription); lineClear is whether this process read
	// the line empty with no ticket seen since. calm lets a block queue's
	// enqueue skip the line only then: a producer waiting in another
	// process, or a dead one's ticket, keeps its place (BP-R002).
	ticketsSeen uint64
	lineClear   bool
}

// ticketTaken notes a ticket taken for q by any process.
func (q *bpQueue) ticketTaken() {
	q.mu.Lock()
	q.ticketsSeen++
	q.lineClear = false
	q.mu.Unlock()
}

func newBackpressure() *backpressure {
	return &backpressure{queues: map[string]*bpQueue{}, release: make(chan depthUnit, 4096), self: nuid.Next(), trust: certainFor,
		ending: make(chan struct{})}
}

func (b *backpressure) queue(name string) *bpQueue {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.queues[name]
	if !ok {
		q = &bpQueue{name: name}
		b.queues[name] = q
	}
	return q
}

func (b *backpressure) lookup(name string) (*bpQueue, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.queues[name]
	return q, ok
}

// startBackpressure starts the release workers and the freed-notice
// subscription; both end with runCtx.
func (s *Service) startBackpressure(runCtx context.Context) error {
	s.bp.runCtx = runCtx
	if !s.cfg.DefaultBackpressure.Bounded() {
		// ojs-backpressure.md 6.3: unbounded queues are an operational risk.
		s.log.Warn("no default queue bound: queues without a bound of their own are unbounded")
	}
	sub, err := s.nc.Subscribe(topology.FreedSubjects, func(m *nats.Msg) {
		name, err := topology.Untoken(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		if err != nil {
			return
		}
		if q, ok := s.bp.lookup(name); ok {
			if len(m.Data) > 0 && string(m.Data) != s.bp.self {
				q.freedElsewhere() // a release; an empty notice is a ticket left
			}
			q.wakeHead()
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe freed notices: %w", err)
	}
	s.bp.sub = sub
	// Tickets are JetStream messages on ojs.blocked.<queue>; a core
	// subscription sees each as it is taken.
	tsub, err := s.nc.Subscribe(topology.BlockedSubjects, func(m *nats.Msg) {
		name, err := topology.Untoken(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		if err != nil {
			return
		}
		if q, ok := s.bp.lookup(name); ok {
			q.ticketTaken()
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe blocked producers' tickets: %w", err)
	}
	s.bp.ticketSub = tsub
	for range releaseWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.releaseLoop(runCtx)
		}()
	}
	return nil
}

func (s *Service) stopBackpressure() {
	if s.bp.sub != nil {
		_ = s.bp.sub.Unsubscribe()
	}
	if s.bp.ticketSub != nil {
		_ = s.bp.ticketSub.Unsubscribe()
	}
}

// releaseLoop deletes released units until runCtx ends, then the ones
// still queued, for at most releaseDrain: a unit left behind is found by
// the reconciler.
func (s *Service) releaseLoop(runCtx context.Context) {
	for {
		select {
		case u := <-s.bp.release:
			s.releaseUnit(context.Background(), u)
		case <-runCtx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), releaseDrain)
			defer cancel()
			for ctx.Err() == nil {
				select {
				case u := <-s.bp.release:
					s.releaseUnit(ctx, u)
				default:
					return
				}
			}
			return
		}
	}
}

// releaseWorkers is how many unit deletes are in flight at once. Each is
// a JetStream API round trip; with 4 in flight, releases of a queue
// drained at ~3k jobs/s fell seconds behind (jetgate load), and a queue
// whose waiting jobs were a fraction of its bound refused enqueues as
// full. Deletes of different units are independent.
const releaseWorkers = 32

// releaseDrain bounds how long Stop spends on queued releases.
const releaseDrain = 2 * time.Second

// backpressureOf returns a queue's effective bound and where it comes from.
func (s *Service) backpressureOf(queue string) (ojs.Backpressure, string) {
	if q, ok := s.queues.get(queue); ok && q.Backpressure != nil {
		return q.Backpressure.WithDefaults(), "queue"
	}
	if s.cfg.DefaultBackpressure.Bounded() {
		return s.cfg.DefaultBackpressure.WithDefaults(), "default"
	}
	return ojs.Backpressure{}, "none"
}

// reserveDepth takes a unit for every job of a bounded queue before the
// jobs are stored, following each queue's strategy, and runs publish (the
// messages the jobs' first states rely on). All or none: on error no unit
// is held. undo gives the units back when the jobs turn out not to be
// stored.
//
// While every queue involved is below fastPressure, the units and publish
// go out together, saving a round trip. If a unit is refused then,
// publish's messages are left behind with a token no record will carry
// (dropped as stale or as orphans), and the jobs take new tokens and go
// through their queue's strategy like any other.
func (s *Service) reserveDepth(ctx context.Context, jobs []*ojs.Job, publish func() error) (undo func(), err error) {
	var names []string
	byQueue := map[string][]*ojs.Job{}
	cfgs := map[string]ojs.Backpressure{}
	for _, j := range jobs {
		if _, ok := byQueue[j.Queue]; !ok {
			if cfg, _ := s.backpressureOf(j.Queue); cfg.Bounded() {
				names = append(names, j.Queue)
				cfgs[j.Queue] = cfg
			}
		}
		byQueue[j.Queue] = append(byQueue[j.Queue], j)
	}
	var held []*ojs.Job
	undo = func() {
		for _, j := range held {
			s.releaseAsync(j.Queue, j.Internal.DepthSeq)
			j.Internal.DepthSeq = 0
		}
		held = nil
	}
	if len(names) > 0 && publish != nil && s.calm(names, cfgs) {
		ok, err := s.reserveWithPublish(ctx, names, cfgs, byQueue, publish, &held)
		if err != nil || ok {
			undoDepth(undo, err)
			return undo, err
		}
		undo()
		for _, j := range jobs {
			j.Internal.Token = jobstore.NewToken()
		}
	}
	for _, name := range names {
		if err := s.acquire(ctx, s.bp.queue(name), cfgs[name], byQueue[name]); err != nil {
			undo()
			return nil, err
		}
		held = append(held, byQueue[name]...)
	}
	if publish != nil {
		if err := publish(); err != nil {
			undoDepth(undo, err)
			return nil, err
		}
	}
	return undo, nil
}

// fastPressure is the pressure under which units are published together
// with the jobs' messages.
const fastPressure = 0.9

// calm reports whether every queue was last seen below fastPressure, with
// its stream at hand, no producer waiting (here, or for a block queue in
// any process: lineClear) and no refusal remembered.
func (s *Service) calm(names []string, cfgs map[string]ojs.Backpressure) bool {
	for _, name := range names {
		q := s.bp.queue(name)
		q.mu.Lock()
		p := pressureRatio(ojs.Pressure{Depth: q.depth + q.over, MaxDepth: cfgs[name].MaxDepth,
			SizeBytes: q.bytes, MaxSizeBytes: cfgs[name].MaxSizeBytes})
		// A remembered refusal (backpressure_certain.go) counts the units
		// let through, which only acquire does.
		// A block queue's line must be known empty: the fast path does
		// not look at it (acquireBlocking does, through nobodyWaiting).
		line := cfgs[name].Strategy != ojs.StrategyBlock || q.lineClear
		ok := q.ensured && q.applied == cfgs[name] && len(q.waiters) == 0 && line && !q.seenAt.IsZero() && p < fastPressure && !q.full.known
		q.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// reserveWithPublish publishes the units and runs publish at the same
// time. ok is false when a unit was refused (the caller falls back).
func (s *Service) reserveWithPublish(ctx context.Context, names []string, cfgs map[string]ojs.Backpressure,
	byQueue map[string][]*ojs.Job, publish func() error, held *[]*ojs.Job) (ok bool, err error) {
	waits := make([]func() error, 0, len(names))
	for _, name := range names {
		wait, err := s.startUnits(ctx, s.bp.queue(name), cfgs[name], byQueue[name])
		if err != nil {
			for _, w := range waits {
				_ = w()
			}
			return false, err
		}
		waits = append(waits, wait)
	}
	perr := publish()
	refused := false
	for i, w := range waits {
		err := w()
		switch _, full := errors.AsType[*fullError](err); {
		case err == nil:
			*held = append(*held, byQueue[names[i]]...)
		case full:
			refused = true
		case perr == nil:
			perr = err
		}
	}
	if perr != nil {
		return false, perr
	}
	if refused {
		return false, nil
	}
	for _, name := range names {
		s.acquired(ctx, s.bp.queue(name), cfgs[name], len(byQueue[name]))
	}
	return true, nil
}

// releaseDepth gives back the unit of a job that just finished. Call it
// after the job's transition to a finished state succeeded.
func (s *Service) releaseDepth(j *ojs.Job) {
	if j == nil || !finished(j.State) {
		return
	}
	s.releaseAsync(j.Queue, j.Internal.DepthSeq)
	s.releaseOverAsync(j.Queue, j.Internal.OverSeq)
}

// isNoMessage reports a delete of a message that is already gone, as the
// server words it when nats.go does not map it to ErrMsgNotFound.
func isNoMessage(err error) bool {
	return strings.Contains(err.Error(), "no message found")
}

func finished(st ojs.State) bool {
	switch st {
	case ojs.StateCompleted, ojs.StateCancelled, ojs.StateDiscarded:
		return true
	}
	return false
}

// releaseAsync hands a unit to the release workers; with none running (or
// a full hand-off queue) it is released on the caller's goroutine.
func (s *Service) releaseAsync(queue string, seq uint64) {
	if seq != 0 {
		s.handOff(depthUnit{queue: queue, seq: seq})
	}
}

// handOff is releaseAsync of any unit.
func (s *Service) handOff(u depthUnit) {
	if s.bp.runCtx != nil && s.bp.runCtx.Err() == nil {
		select {
		case s.bp.release <- u:
			return
		default:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.releaseUnit(ctx, u)
}

// releaseUnit deletes a unit (idempotent: a unit already gone is fine)
// and wakes the producers waiting for room, here and in other processes.
func (s *Service) releaseUnit(ctx context.Context, u depthUnit) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if u.over {
		s.releaseOver(ctx, u)
		return
	}
	q := s.bp.queue(u.queue)
	st, err := s.depthStream(ctx, q)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			s.log.Warn("release depth unit", "queue", u.queue, "seq", u.seq, "error", err)
		}
		return
	}
	q.releasing()
	err = st.DeleteMsg(ctx, u.seq)
	q.released()
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNoMessage(err) {
		s.log.Warn("release depth unit", "queue", u.queue, "seq", u.seq, "error", err)
		return
	}
	q.mu.Lock()
	q.depth = max(0, q.depth-1)
	q.mu.Unlock()
	q.wakeHead()
	// Every process hears of the room: blocked producers wait for it, and
	// a remembered refusal ends with it (backpressure_certain.go).
	_ = s.nc.Publish(topology.FreedSubject(u.queue), []byte(s.bp.self))
}

// depthStream returns the bound handle of a queue's depth stream.
func (s *Service) depthStream(ctx context.Context, q *bpQueue) (jetstream.Stream, error) {
	q.mu.Lock()
	st := q.stream
	q.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := s.js.Stream(ctx, topology.DepthStream(q.name))
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.stream = st
	q.mu.Unlock()
	return st, nil
}

// ensureDepth makes sure the queue's depth stream exists with cfg's
// limits. A queue's own config is applied by SetQueueBackpressure; here a
// missing stream is created, and the server-wide default is kept current.
func (s *Service) ensureDepth(ctx context.Context, q *bpQueue, cfg ojs.Backpressure, source string) error {
	q.mu.Lock()
	done := q.ensured && q.applied == cfg
	q.mu.Unlock()
	if done {
		return nil
	}
	// One stream request per queue at a time in this process.
	q.ensureMu.Lock()
	defer q.ensureMu.Unlock()
	q.mu.Lock()
	done = q.ensured && q.applied == cfg
	q.mu.Unlock()
	if done {
		return nil
	}
	sc := s.depthStreamConfig(q.name, cfg)
	var st jetstream.Stream
	var err error
	// Processes creating the same replicated stream at once can leave a
	// request unanswered; each attempt is short, and a later one finds
	// the stream the winner created.
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err = s.createOrBindDepth(actx, sc, source)
		cancel()
		if err == nil || errors.Is(err, ojs.ErrConflict) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("depth stream of %s: %w", q.name, jobstore.Unavailable(err))
	}
	q.mu.Lock()
	q.stream, q.applied, q.ensured = st, cfg, true
	q.mu.Unlock()
	return nil
}

// createOrBindDepth creates a depth stream, or binds the existing one. A
// queue's own config was applied by SetQueueBackpressure, so an existing
// stream is taken as it is; the server-wide default is brought up to date.
func (s *Service) createOrBindDepth(ctx context.Context, sc jetstream.StreamConfig, source string) (jetstream.Stream, error) {
	if source == "default" {
		return s.applyDepthConfig(ctx, sc)
	}
	st, err := s.js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return s.js.Stream(ctx, sc.Name)
	}
	return st, err
}

// depthStreamConfig is the depth stream of a queue bounded by cfg; an
// unbounded cfg keeps the stream without limits, so units held by jobs
// accepted under an earlier bound are still released by sequence.
func (s *Service) depthStreamConfig(queue string, cfg ojs.Backpressure) jetstream.StreamConfig {
	info := s.assets.Ready.CachedInfo()
	sc := jetstream.StreamConfig{
		Name:              topology.DepthStream(queue),
		Description:       fmt.Sprintf("jetgate depth units of queue %q: one message per job counted against its bound", queue),
		Subjects:          []string{topology.DepthSubjects(queue)},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardNew,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		Storage:           info.Config.Storage,
		Replicas:          info.Config.Replicas,
	}
	if cfg.MaxDepth > 0 {
		sc.MaxMsgs = cfg.MaxDepth
	}
	if cfg.MaxSizeBytes > 0 {
		sc.MaxBytes = cfg.MaxSizeBytes
	}
	if cfg.TenantMaxDepth > 0 {
		sc.MaxMsgsPerSubject = cfg.TenantMaxDepth
		sc.DiscardNewPerSubject = true
	}
	return sc
}

// applyDepthConfig creates or updates a depth stream. Lowering the
// per-tenant bound of a stream that holds units is refused: JetStream
// would delete the oldest units above it, and their jobs would no longer
// count.
func (s *Service) applyDepthConfig(ctx context.Context, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := s.js.Stream(ctx, sc.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return s.js.CreateStream(ctx, sc)
	case err != nil:
		return nil, err
	}
	old := st.CachedInfo()
	if sameLimits(old.Config, sc) {
		return st, nil
	}
	lowered := sc.MaxMsgsPerSubject > 0 && (old.Config.MaxMsgsPerSubject <= 0 || sc.MaxMsgsPerSubject < old.Config.MaxMsgsPerSubject)
	if lowered && old.State.Msgs > 0 {
		return nil, fmt.Errorf("%w: tenant_max_depth of queue %s can only be lowered or introduced while it holds no jobs (it holds %d)",
			ojs.ErrConflict, strings.TrimPrefix(sc.Name, "OJS_DEPTH_"), old.State.Msgs)
	}
	return s.js.UpdateStream(ctx, sc)
}

// sameLimits reports whether a depth stream already has sc's limits.
func sameLimits(old, sc jetstream.StreamConfig) bool {
	return old.MaxMsgs == sc.MaxMsgs && old.MaxBytes == sc.MaxBytes && old.MaxMsgsPerSubject == sc.MaxMsgsPerSubject &&
		old.DiscardNewPerSubject == sc.DiscardNewPerSubject && old.Discard == sc.Discard
}

// unit builds the unit message of job j in a queue bounded by cfg.
func (s *Service) unit(queue string, cfg ojs.Backpressure, j *ojs.Job) (*nats.Msg, string, error) {
	tenant := ""
	if cfg.TenantKey != "" {
		tenant = metaString(j.Meta, cfg.TenantKey)
	}
	m := nats.NewMsg(topology.DepthSubject(queue, tenant))
	m.Header.Set(jobstore.HeaderJobID, j.ID)
	if cfg.MaxSizeBytes > 0 {
		b, err := json.Marshal(j.Public())
		if err != nil {
			return nil, "", fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		if pad := int64(len(b)) - s.unitOverhead(m); pad > 0 {
			m.Data = make([]byte, pad)
		}
	}
	return m, tenant, nil
}

// unitOverhead is what JetStream's store accounts for a message beyond its
// payload (server filestore.go fileStoreMsgSize, memstore.go
// memStoreMsgSize); TestBackpressureSizeIsExact pins it.
func (s *Service) unitOverhead(m *nats.Msg) int64 {
	hdr := int64(len("NATS/1.0\r\n") + 2)
	for k, vs := range m.Header {
		for _, v := range vs {
			hdr += int64(len(k) + 2 + len(v) + 2)
		}
	}
	if s.assets.Ready.CachedInfo().Config.Storage == jetstream.MemoryStorage {
		return int64(len(m.Subject)) + hdr + 16
	}
	return 22 + int64(len(m.Subject)) + 4 + hdr + 8
}

// metaString returns the string form of meta[key] ("" when absent).
func metaString(meta json.RawMessage, key string) string {
	if len(meta) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	raw, ok := m[key]
	if !ok {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	return string(raw)
}

// undoDepth gives back the units reserved for jobs whose enqueue failed
// before their records could exist. After a transport failure the record
// may have been written anyway, so the units stay; the reconciler releases
// them if the records turn out missing.
func undoDepth(undo func(), err error) {
	if err != nil && undo != nil && !errors.Is(err, ojs.ErrUnavailable) {
		undo()
	}
}
