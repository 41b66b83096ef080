package cron

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Jobs is all the cron scheduler asks of the job life cycle: enqueue the
// job of a tick, read the job of an earlier tick (to skip overlaps and to
// recognise a tick it already enqueued), and cancel one a tick replaces. *admission.Service meets it.
type Jobs interface {
	Enqueue(ctx context.Context, job *ojs.Job) (*ojs.Job, error)
	Get(ctx context.Context, id string) (*ojs.Job, error)
	// Cancel cancels the unfinished job of an earlier tick that a tick
	// replaces (overlap policy cancel).
	Cancel(ctx context.Context, id string) (*ojs.Job, ojs.State, error)
}

// Clock tells the scheduler the time. Tests use a fast clock to see many
// ticks in a few seconds.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// At is the real time at which Now will read t: when the message
	// schedule of a tick at t must fire.
	At(t time.Time) time.Time
}

type realClock struct{}

func (realClock) Now() time.Time           { return time.Now() }
func (realClock) At(t time.Time) time.Time { return t }

// Config shapes a Scheduler.
type Config struct {
	Logger *slog.Logger
	// Clock defaults to the real clock.
	Clock Clock
	// AckWait is how long a fired tick held by a process that stopped
	// answering waits before another process handles it (default 30 s).
	AckWait time.Duration
	// Events receives cron.triggered and cron.skipped (ojs-events.md
	// 4.5, MUST at level 2); nil publishes none.
	Events Events
}

// Events receives the cron events; jetstream/events.Publisher meets it.
type Events interface {
	Publish(eventType, subject string, data any)
}

// Cron event types (ojs-events.md 3.6).
const (
	EventTriggered = "cron.triggered"
	EventSkipped   = "cron.skipped"
)

// Headers of a tick's schedule, copied by JetStream onto the fired message.
const (
	hdrName = "Ojs-Cron-Name"
	hdrGen  = "Ojs-Cron-Gen"
	hdrTick = "Ojs-Cron-Tick"
)

// Status of a definition (13.1 shows "active"); a disabled one's ticks
// are not scheduled.
const (
	statusActive   = "active"
	statusDisabled = "disabled"
)

// record is a definition as stored in the cron bucket.
type record struct {
	ojs.CronJob
	// Gen identifies one registration of the name: its schedule subject
	// and its tick job ids derive from it, so a tick of a deleted
	// registration never runs for a new one of the same name.
	Gen string `json:"gen"`
}

// Scheduler registers cron jobs and runs their ticks. Any number of
// processes run one each on the same JetStream; see the package doc for
// why each tick runs exactly once.
type Scheduler struct {
	jobs  Jobs
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	ticks jetstream.Stream
	cfg   Config
	log   *slog.Logger
	clock Clock

	mu      sync.Mutex
	cc      jetstream.ConsumeContext
	stopped bool
	cancel  context.CancelFunc
	base    context.Context
	wg      sync.WaitGroup

	// afterAdvance, set by tests only, runs between the definition's
	// compare-and-swap and the next tick's schedule; an error ends the
	// handling there, as a process stopping at that point would.
	afterAdvance func() error
}

// New returns a Scheduler over the cron bucket and stream of assets.
func New(jobs Jobs, js jetstream.JetStream, assets *topology.Assets, cfg Config) (*Scheduler, error) {
	if jobs == nil || js == nil || assets == nil || assets.Cron == nil || assets.CronTicks == nil {
		return nil, errors.New("cron: jobs, JetStream and the cron assets are required")
	}
	cfg.AckWait = cmp.Or(cfg.AckWait, 30*time.Second)
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancel(context.Background())
	return &Scheduler{jobs: jobs, js: js, kv: assets.Cron, ticks: assets.CronTicks, cfg: cfg, log: log,
		clock: cfg.Clock, base: base, cancel: cancel}, nil
}

// Start consumes fired ticks. The consumer is durable and shared by every
// process, so each fired tick is handed to one process at a time, and a
// tick that fired while no process ran is handled at the next start.
func (s *Scheduler) Start(ctx context.Context) error {
	cons, err := s.ticks.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       topology.CronConsumer,
		Description:   "jetgate fired cron ticks, shared by every jetgate process",
		FilterSubject: topology.CronFiredSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
	})
	if err != nil {
		return fmt.Errorf("cron consumer: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cc != nil {
		return errors.New("cron: scheduler already started or stopped")
	}
	cc, err := cons.Consume(s.onFire, jetstream.PullMaxMessages(16))
	if err != nil {
		return fmt.Errorf("consume cron ticks: %w", err)
	}
	s.cc = cc
	return nil
}

// Stop stops consuming and waits for the ticks being handled. Safe to
// call twice.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	cc := s.cc
	s.mu.Unlock()
	s.cancel()
	if cc != nil {
		cc.Stop()
		<-cc.Closed()
	}
	s.wg.Wait()
}

// onFire handles one fired tick: it is acked once the tick's job is
// enqueued (or skipped) and the definition advanced, and redelivered
// otherwise.
func (s *Scheduler) onFire(msg jetstream.Msg) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = msg.Nak() // another process takes it now
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	h := msg.Headers()
	name, gen := h.Get(hdrName), h.Get(hdrGen)
	tick, err := time.Parse(time.RFC3339Nano, h.Get(hdrTick))
	if name == "" || gen == "" || err != nil {
		_ = msg.TermWithReason("not a cron tick")
		return
	}
	ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
	defer cancel()
	if err := s.fire(ctx, name, gen, tick); err != nil {
		s.log.Warn("cron tick failed, will retry", "cron", name, "tick", tick, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
}

// load reads a definition and its revision.
func (s *Scheduler) load(ctx context.Context, name string) (*record, uint64, error) {
	e, err := s.kv.Get(ctx, topology.Token(name))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, 0, fmt.Errorf("cron job '%s': %w", name, ojs.ErrNotFound)
		}
		return nil, 0, fmt.Errorf("read cron job %s: %w", name, jobstore.Unavailable(err))
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("decode cron job %s: %w", name, err)
	}
	return &r, e.Revision(), nil
}
