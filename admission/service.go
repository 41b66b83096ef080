package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/kvlimits"
)

// Clock tells the time. Tests may inject one; deadlines that JetStream
// enforces (timers) still run on the server's clock.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config configures a Service.
type Config struct {
	// DefaultTimeout is the execution timeout of jobs that set none
	// (default 30 min, ojs-timeouts.md 5.1); DefaultGracePeriod their
	// grace period (default 30 s; negative: none, 5.4);
	// DefaultHeartbeatTimeout how long their worker may stay silent when
	// neither the fetch nor the job says (default 60 s, 5.5).
	DefaultTimeout          time.Duration
	DefaultGracePeriod      time.Duration
	DefaultHeartbeatTimeout time.Duration
	// ClaimAckWait is the ready consumers' AckWait: how long a claimed
	// ready message may stay unacknowledged before JetStream hands it out
	// again (default 30 s). A claim defers writing its lease timer by a
	// third of it, and a lease whose process died is enforced at most
	// this long after its deadline (see lease.go). Every process on one
	// NATS must use the same value.
	ClaimAckWait time.Duration
	// ConsumerIdle removes a priority level's consumer after this long
	// without fetches.
	ConsumerIdle time.Duration
	// MaxFetch caps the jobs returned by one fetch (default 1000).
	MaxFetch int
	// FetchWait is how long a fetch that finds nothing waits for a job
	// this process makes ready (default DefaultFetchWait; negative: none).
	FetchWait time.Duration
	// RecordCache bounds the records remembered for skipping reads.
	RecordCache int
	// aheadFor is how long a message pulled ahead waits for a fetch
	// (prefetch.go; default defaultAheadFor). Internal tests set it, so
	// that what they check of the messages held does not race the sweep
	// on a slow machine.
	aheadFor time.Duration
	// Retention keeps completed and cancelled job records this long after
	// they finish (default 24 h); DeadRetention keeps discarded ones, the
	// dead letter queue (default 7 days). JetStream removes them then.
	Retention     time.Duration
	DeadRetention time.Duration
	Clock         Clock
	Logger        *slog.Logger
	Events        EventSink
	Metrics       Recorder
	Version       string

	// DefaultBackpressure bounds every queue without its own bound (zero:
	// unbounded). DefaultBlockTimeout is how long a producer waits on a
	// full queue with the block strategy when it sends no OJS-Block-Timeout
	// (default 0: reject at once, ojs-backpressure.md 5.2); MaxBlockTimeout
	// caps any wait (default 30 s). BackpressureRetryAfter is the
	// Retry-After of a refused enqueue (default 1 s).
	DefaultBackpressure    ojs.Backpressure
	DefaultBlockTimeout    time.Duration
	MaxBlockTimeout        time.Duration
	BackpressureRetryAfter time.Duration

	// Workers, when set, is told of every fetch and heartbeat (see
	// WorkerHook).
	Workers WorkerHook

	// Hooks meet the job life cycle: enqueue and state changes (see
	// Lifecycle; admission/unique is one).
	Hooks []Lifecycle

	// MaxPayload is the largest message the NATS server takes (default:
	// the connection's max_payload, read at New). Job records are kept
	// within it by the record budget of ojs.PayloadLimits: a job, an ack's
	// result, a nack's error or a progress update over its part is a 413
	// before anything is written (issue 31).
	MaxPayload int64
}

func (c Config) withDefaults() Config {
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, 30*time.Minute)
	c.DefaultGracePeriod = cmp.Or(c.DefaultGracePeriod, 30*time.Second)
	c.DefaultHeartbeatTimeout = cmp.Or(c.DefaultHeartbeatTimeout, time.Minute)
	c.ClaimAckWait = cmp.Or(c.ClaimAckWait, 30*time.Second)
	c.ConsumerIdle = cmp.Or(c.ConsumerIdle, time.Hour)
	c.MaxFetch = cmp.Or(c.MaxFetch, 1000)
	c.FetchWait = cmp.Or(c.FetchWait, DefaultFetchWait)
	c.RecordCache = cmp.Or(c.RecordCache, 100_000)
	c.aheadFor = cmp.Or(c.aheadFor, defaultAheadFor)
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	c.DeadRetention = cmp.Or(c.DeadRetention, 7*24*time.Hour)
	c.MaxBlockTimeout = cmp.Or(c.MaxBlockTimeout, 30*time.Second)
	c.BackpressureRetryAfter = cmp.Or(c.BackpressureRetryAfter, time.Second)
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Events == nil {
		c.Events = noEvents{}
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	return c
}

func (c Config) validate() error {
	if c.DefaultHeartbeatTimeout < time.Second {
		return fmt.Errorf("admission: DefaultHeartbeatTimeout %s is under 1s", c.DefaultHeartbeatTimeout)
	}
	if c.DefaultTimeout < time.Second {
		return fmt.Errorf("admission: DefaultTimeout %s is under 1s", c.DefaultTimeout)
	}
	if c.ClaimAckWait < time.Second {
		return fmt.Errorf("admission: ClaimAckWait %s is under 1s", c.ClaimAckWait)
	}
	if c.MaxFetch < 1 {
		return fmt.Errorf("admission: MaxFetch must be >= 1")
	}
	if err := c.DefaultBackpressure.Validate("DefaultBackpressure."); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	return nil
}

// Service is the admission service: the one path through which jobs are
// enqueued, handed to workers and moved through their lifecycle.
type Service struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	assets *topology.Assets
	store  *jobstore.Store
	log    *slog.Logger
	clock  Clock
	events EventSink
	met    Recorder
	// sizes is the record budget (ojs.PayloadLimits) of Config.MaxPayload.
	sizes ojs.PayloadLimits

	started  time.Time
	queues   *queueCache
	groups   *groupCache
	stats    *statsAgg
	keeper   *countKeeper
	records  *recordCache
	leases   deferredLeases
	beats    beatBook
	limits   *kvlimits.Store
	promoter *promoter
	// claimers runs the claims of fetches (gopool.go).
	claimers *goPool
	notify   *readyNotify
	// releases counts rate limit releases being written (releaseLimits);
	// Stop waits for them.
	releases   sync.WaitGroup
	bp         *backpressure
	readyCache readiness // the cached answer of Ready (health.go)

	consumers  sync.Map // consumer name -> jetstream.Consumer
	seen       sync.Map // consumer name -> levelSeen (levels.go)
	stored     sync.Map // consumer name -> uint64, the last stored sequence a look at the stream found (visible.go)
	looks      emptyLooks
	held       heldReady
	levelSnaps sync.Map // queue name -> *levelSnap (levelpull.go)
	snapAge    time.Duration
	pullers    sync.Map // queue name -> *puller
	// noPullAhead is set once the service stops (prefetch.go).
	noPullAhead atomic.Bool
	creating    sync.Map // job id -> chan struct{}, closed when its create is done

	// limitKeys are the rate limit keys known to have an entry (limitkeys.go).
	limitKeys knownKeys

	// holder is the sentinel of the ready messages this process holds
	// (holder.go); stopping is set when Stop or Kill begins: claims defer
	// no lease from then on.
	holder   *holder
	stopping atomic.Bool

	mu       sync.Mutex
	running  bool
	stopped  bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	timerCtx jetstream.ConsumeContext
}

// New builds a Service over assets created by topology.Ensure.
func New(nc *nats.Conn, js jetstream.JetStream, assets *topology.Assets, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	sizes, err := ojs.NewPayloadLimits(cmp.Or(cfg.MaxPayload, nc.MaxPayload()))
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	s := &Service{
		sizes:    sizes,
		claimers: newGoPool(claimerIdle),
		cfg:      cfg,
		snapAge:  snapAge,
		nc:       nc,
		js:       js,
		assets:   assets,
		store:    jobstore.New(nc, js, assets),
		log:      cfg.Logger,
		clock:    cfg.Clock,
		events:   cfg.Events,
		met:      cfg.Metrics,
	}
	s.queues = newQueueCache(s.store, s.log, s.now)
	s.groups = newGroupCache(s.store, s.log)
	s.stats = newStatsAgg()
	s.keeper = newCountKeeper(s, processName())
	s.records = newRecordCache(cfg.RecordCache)
	s.notify = newReadyNotify()
	s.limits = kvlimits.New(assets.Limits)
	s.promoter = newPromoter(s)
	s.bp = newBackpressure()
	s.holder = newHolder(s)
	s.leases.release = s.holder.release
	return s, nil
}

// PayloadLimits is the record budget jobs are kept within (issue 31).
func (s *Service) PayloadLimits() ojs.PayloadLimits { return s.sizes }

// Start begins watching queue config and handling fired timers. It returns
// once the queue cache holds every existing queue.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.stopped {
		return errors.New("admission: Start called twice")
	}
	runCtx, cancel := context.WithCancel(context.Background())
	if err := s.queues.start(ctx, runCtx, &s.wg); err != nil {
		cancel()
		return err
	}
	err := s.groups.start(runCtx, &s.wg)
	var cc jetstream.ConsumeContext
	if err == nil {
		cc, err = s.startTimers(ctx)
	}
	if err == nil {
		if err = s.holder.start(); err != nil {
			cc.Stop()
		}
	}
	if err == nil {
		if err = s.startBackpressure(runCtx); err != nil {
			cc.Stop()
			s.holder.close(false)
		}
	}
	if err != nil {
		cancel()
		s.wg.Wait()
		return err
	}
	s.timerCtx = cc
	s.cancel = cancel
	s.promoter.start(runCtx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runStats(runCtx)
	}()
	_ = s.keeper.Start(ctx)
	s.running = true
	s.started = s.clock.Now()
	return nil
}

// Stop stops the timer consumer and the queue watcher and waits for them.
// Every lease a claim deferred is written first (lease.go): the process
// leaves no job that only its sentinel would free. In-flight calls finish
// on their own contexts, except that producers blocked on a full queue
// stop waiting (EndBlocking). Safe to call twice.
func (s *Service) Stop() { s.stop(true) }

// Kill stops as a crash would, for tests and for a server's Kill: the
// deferred leases are not written and the holder sentinel is left to
// fire, so another process (or the next start) writes them.
func (s *Service) Kill() { s.stop(false) }

// leaseFlushFor bounds how long Stop spends writing deferred leases.
const leaseFlushFor = 20 * time.Second

func (s *Service) stop(clean bool) {
	s.stopping.Store(true)
	s.EndBlocking()
	s.mu.Lock()
	if !s.running {
		s.stopped = true
		s.mu.Unlock()
		s.claimers.close()
		return
	}
	s.running = false
	s.stopped = true
	cc, cancel := s.timerCtx, s.cancel
	s.mu.Unlock()
	s.stopPullingAhead()
	cc.Drain()
	<-cc.Closed()
	s.holder.stopWalks()
	if clean {
		ctx, done := context.WithTimeout(context.Background(), leaseFlushFor)
		written := s.leases.flush(ctx)
		done()
		if !written {
			s.log.Warn("some deferred leases could not be written; the holder sentinel will have them written", "process", s.holder.id)
		}
		s.holder.close(written)
	} else {
		s.leases.abandon()
		s.holder.close(false)
	}
	s.releases.Wait()
	s.stopBackpressure()
	cancel()
	s.keeper.Stop()
	s.promoter.stop()
	s.wg.Wait()
	s.claimers.close()
}

// Store exposes the job store, for tools and tests that inspect records.
func (s *Service) Store() *jobstore.Store { return s.store }

const maxCASRetries = 16

// transition reads job id, lets apply compute the next record and the
// messages it relies on, publishes those, and compare-and-swaps the record.
// A lost race re-reads and applies again.
func (s *Service) transition(ctx context.Context, id string, apply applyFunc) (nj, old *ojs.Job, err error) {
	return s.transitionFrom(ctx, id, nil, apply)
}

// transitionFrom is transition for a caller that holds the job's seed (a
// ready message carrying the job, jobstore/seed.go; seed reads it, nil
// when the message carries none): the first round applies to it, unless
// the cache knows the job, without reading; the write then creates the
// record, and a record written meanwhile makes it a lost race like any
// other. The seed is decoded only when the cache does not know the job.
func (s *Service) transitionFrom(ctx context.Context, id string, seed func() *ojs.Job, apply applyFunc) (nj, old *ojs.Job, err error) {
	fresh := false
	for range maxCASRetries {
		var useSeed func() *ojs.Job
		if !fresh {
			useSeed = seed
		}
		old, rev, cached, err := s.read(ctx, id, !fresh, useSeed)
		if err != nil {
			return nil, nil, err
		}
		nj, pre, err := apply(old)
		if err != nil {
			if cached {
				// Refuse only on what the record says, never on the cache.
				fresh = true
				continue
			}
			return nil, old, err
		}
		terminalAt(nj)
		if pre != nil {
			if err := pre(ctx, nj); err != nil {
				return nil, old, err
			}
		}
		nj.Seed = false
		nrev, err := s.write(ctx, nj, rev)
		if err != nil {
			if errors.Is(err, jobstore.ErrConflict) {
				s.records.drop(id)
				fresh = true
				continue
			}
			s.records.drop(id)
			if errors.Is(err, ojs.ErrUnavailable) {
				s.unanswered(old, nj)
			}
			return nil, old, err
		}
		s.records.put(nj, nrev)
		if s.debugging() {
			s.log.Debug("record written", "job", id, "state", nj.State, "attempt", nj.Attempt, "token", nj.Internal.Token,
				"held", nj.Internal.HeldToken != "", "rev", nrev, "from_rev", rev, "from_state", old.State)
		}
		s.changed(ctx, nj, old.State)
		s.dropStaleReady(ctx, old, nj)
		return nj, old, nil
	}
	return nil, nil, fmt.Errorf("%w: job %s kept changing under %d attempts", ojs.ErrConflict, id, maxCASRetries)
}

// terminalAt gives a job that reaches discarded its completed_at, the
// time of its terminal state, as a completed job has (issue 32): clients
// read completed_at as "finished at" whatever the outcome. Every path to
// discarded (a nack, a timeout, an expiry, a limit or backpressure drop)
// writes through transition, so it is set here once.
func terminalAt(nj *ojs.Job) {
	if nj.State == ojs.StateDiscarded && nj.CompletedAt == nil {
		nj.CompletedAt = nj.DiscardedAt
	}
}

// unanswered handles a write of nj over old that got no answer: it may
// have landed. If it took the job out of active, the slots the attempt
// held are reclaimed once the job reads as left (reclaimLeaving): the
// caller returns an error and does not release them, and a retry of the
// operation finds the job moved on (the cluster property run once ended
// with such a slot held).
func (s *Service) unanswered(old, nj *ojs.Job) {
	if old.State != ojs.StateActive || nj.State == ojs.StateActive {
		return
	}
	for _, name := range old.Internal.Limits {
		if e, ok := kvlimits.ParseEntry(name); ok {
			s.promoter.reclaimLater(e, old.ID, old.Internal.Token, reclaimLeaving)
		}
	}
}

// write compare-and-swaps a record; finished jobs get their retention TTL.
func (s *Service) write(ctx context.Context, nj *ojs.Job, rev uint64) (uint64, error) {
	switch nj.State {
	case ojs.StateCompleted, ojs.StateCancelled:
		return s.store.UpdateTTL(ctx, nj, rev, s.cfg.Retention)
	case ojs.StateDiscarded:
		return s.store.UpdateTTL(ctx, nj, rev, s.cfg.DeadRetention)
	}
	return s.store.Update(ctx, nj, rev)
}

// read returns the job's record, from the cache when allowed and present,
// else from seed when given, else from the store.
func (s *Service) read(ctx context.Context, id string, useCache bool, seed func() *ojs.Job) (j *ojs.Job, rev uint64, cached bool, err error) {
	if useCache {
		if j, rev, ok := s.records.get(id); ok {
			c := *j
			c.Rev = rev
			return &c, rev, true, nil
		}
	}
	if seed != nil {
		if sj := seed(); sj != nil {
			// Not "cached": a refusal on a seed is final, as on a record
			// read (a later record makes the write lose its race instead).
			return sj, sj.Rev, false, nil
		}
	}
	j, rev, err = s.store.Get(ctx, id)
	if err == nil {
		j.Rev = rev
	}
	return j, rev, false, err
}

// applyFunc computes the next record from the current one. pre publishes
// what the next record relies on; it runs before the compare-and-swap.
type applyFunc func(old *ojs.Job) (nj *ojs.Job, pre func(context.Context, *ojs.Job) error, err error)

func (s *Service) now() time.Time { return s.clock.Now().UTC() }

// debugging reports whether debug records are logged. The hot paths ask
// before building a record's attributes: boxing them allocates even when
// the handler drops the record (issue 17, CPU per job).
func (s *Service) debugging() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }
