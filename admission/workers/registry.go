package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Config configures a Registry.
type Config struct {
	// Refresh is the longest a worker seen by this process's fetches goes
	// without this process rewriting its entry (default 5 s). It must be
	// at most half the bucket's TTL (topology.WorkersTTL).
	Refresh time.Duration
	// StaleAfter marks a worker stale when it was not seen for this long
	// (default 30 s, ojs-worker-protocol.md 10.1).
	StaleAfter time.Duration
	Logger     *slog.Logger
	// Events receives the worker events of ojs-events.md 4.3 (default:
	// none); jetstream/events.Publisher is the production sink.
	Events EventSink
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.Refresh = cmp.Or(c.Refresh, 5*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Events == nil {
		c.Events = noEvents{}
	}
	return c
}

// EventSink publishes an event about subject (here a worker id).
type EventSink interface {
	Publish(eventType, subject string, data any)
}

type noEvents struct{}

func (noEvents) Publish(string, string, any) {}

// Worker event types (ojs-events.md 4.3).
const (
	EventWorkerStarted   = "worker.started"
	EventWorkerQuiet     = "worker.quiet"
	EventWorkerHeartbeat = "worker.heartbeat"
)

// announce publishes what a change of a worker's entry means: a worker
// first seen (started), one that became quiet. Only the process whose
// compare-and-swap won publishes, so each is published once.
func (r *Registry) announce(prev, w *ojs.Worker) {
	if prev == nil {
		r.cfg.Events.Publish(EventWorkerStarted, w.ID, map[string]any{
			"worker_id": w.ID, "queues": w.Queues, "concurrency": w.Concurrency})
	}
	if w.State == ojs.WorkerQuiet && (prev == nil || prev.State != ojs.WorkerQuiet) {
		r.cfg.Events.Publish(EventWorkerQuiet, w.ID, map[string]any{"worker_id": w.ID, "active_jobs": w.ActiveJobs})
	}
}

// entry is a worker in the view, with the KV revision it was read at.
type entry struct {
	w   *ojs.Worker
	rev uint64
}

// Registry is the worker registry: bucket OJS_WORKERS, mirrored into an
// in-memory view by a KV watch. It implements admission.WorkerHook.
type Registry struct {
	kv  jetstream.KeyValue
	cfg Config
	log *slog.Logger
	ttl time.Duration // the bucket's: how long an entry outlives its last write

	mu      sync.RWMutex
	view    map[string]entry
	written map[string]time.Time // when this process last wrote (or queued) a worker
	pending map[string][]string  // workers to touch: id -> queues of its fetch
	wake    chan struct{}

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	wg                  sync.WaitGroup
}

// New returns a registry over kv (topology.Assets.Workers).
func New(kv jetstream.KeyValue, cfg Config) (*Registry, error) {
	if kv == nil {
		return nil, errors.New("workers: no registry bucket")
	}
	cfg = cfg.withDefaults()
	return &Registry{kv: kv, cfg: cfg, log: cfg.Logger, ttl: topology.WorkersTTL, view: map[string]entry{},
		written: map[string]time.Time{}, pending: map[string][]string{}, wake: make(chan struct{}, 1)}, nil
}

// Start follows the bucket and starts the writer of fetch sightings. It
// returns once the view holds every existing worker.
func (r *Registry) Start(ctx context.Context) error {
	var err error
	r.startOnce.Do(func() {
		if err = r.readTTL(ctx); err != nil {
			return
		}
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.cancel = cancel
		var w jetstream.KeyWatcher
		w, err = r.kv.WatchAll(runCtx)
		if err != nil {
			cancel()
			err = fmt.Errorf("watch %s: %w", topology.WorkersBucket, err)
			return
		}
		r.wg.Add(1)
		go r.writer(runCtx)
		err = jobstore.FollowKV(ctx, runCtx, &r.wg, w, r.apply)
	})
	return err
}

// readTTL takes the bucket's TTL, which Refresh must stay well under.
func (r *Registry) readTTL(ctx context.Context) error {
	st, err := r.kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("status of %s: %w", topology.WorkersBucket, err)
	}
	if st.TTL() > 0 {
		r.ttl = st.TTL()
	}
	if r.cfg.Refresh > r.ttl/2 {
		return fmt.Errorf("workers: Refresh %s must be at most half of the registry TTL %s", r.cfg.Refresh, r.ttl)
	}
	return nil
}

// Stop ends the watch and the writer and waits for them. Safe to call
// twice, and without Start.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		r.wg.Wait()
	})
}

func (r *Registry) apply(e jetstream.KeyValueEntry) {
	id, err := topology.Untoken(e.Key())
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(r.view, id) // deleted, or expired (the TTL's marker)
		delete(r.written, id)
		return
	}
	var w ojs.Worker
	if err := json.Unmarshal(e.Value(), &w); err != nil {
		r.log.Warn("bad worker record", "worker_id", id, "error", err)
		return
	}
	if cur, ok := r.view[id]; ok && cur.rev >= e.Revision() {
		return
	}
	r.view[id] = entry{w: &w, rev: e.Revision()}
}

// Admit is admission.WorkerHook.Admit: a map lookup, and at most every
// Refresh per worker a sighting queued for the writer.
func (r *Registry) Admit(req ojs.FetchRequest) (ojs.FetchRequest, bool) {
	if req.WorkerID == "" {
		return req, true
	}
	now := r.cfg.Now()
	r.mu.RLock()
	e, known := r.view[req.WorkerID]
	last, wrote := r.written[req.WorkerID]
	r.mu.RUnlock()
	if !known || !wrote || now.Sub(last) >= r.cfg.Refresh {
		r.queueTouch(req.WorkerID, req.Queues, now)
	}
	if !known {
		return req, true
	}
	req.Pool = e.w.Pool
	return req, e.w.State == ojs.WorkerRunning
}

func (r *Registry) queueTouch(id string, queues []string, now time.Time) {
	r.mu.Lock()
	if last, ok := r.written[id]; ok && now.Sub(last) < r.cfg.Refresh {
		r.mu.Unlock()
		return
	}
	r.written[id] = now
	r.pending[id] = queues
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// writer writes the sightings queued by Admit, off the fetch's path.
func (r *Registry) writer(ctx context.Context) {
	defer r.wg.Done()
	prune := time.NewTicker(r.ttl / 2)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			r.prune()
			continue
		case <-r.wake:
		}
		r.mu.Lock()
		batch := r.pending
		r.pending = map[string][]string{}
		r.mu.Unlock()
		for id, queues := range batch {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.mutate(wctx, id, true, func(w *ojs.Worker, now time.Time) {
				w.LastSeenAt = ojs.NewTime(now)
				if len(w.Queues) == 0 && len(queues) > 0 {
					w.Queues = slices.Clone(queues)
				}
			})
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.Warn("record worker sighting", "worker_id", id, "error", err)
				r.forget(id)
			}
		}
	}
}

// prune drops from memory the workers whose entries expired, in case
// their expiry marker was missed.
func (r *Registry) prune() {
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.view {
		if !r.alive(e.w) {
			delete(r.view, id)
		}
	}
	for id, at := range r.written {
		if now.Sub(at) > r.ttl {
			delete(r.written, id)
		}
	}
}

// forget drops this process's note of having written id, so the next
// sighting is written again.
func (r *Registry) forget(id string) {
	r.mu.Lock()
	delete(r.written, id)
	r.mu.Unlock()
}

// mutate applies f to worker id's entry as one compare-and-swap, retried
// on conflict; it starts from the view's revision (no read) and reads the
// entry only after a conflict. Without an entry it creates one when
// create is set, else it fails with not found.
func (r *Registry) mutate(ctx context.Context, id string, create bool, f func(w *ojs.Worker, now time.Time)) (*ojs.Worker, error) {
	key := topology.Token(id)
	r.mu.RLock()
	cur, ok := r.view[id]
	r.mu.RUnlock()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt >= 2 {
			// Contended: let the other writers through before rereading.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("write worker %s: %w", id, unavailable(ctx.Err()))
			case <-time.After(time.Duration(rand.IntN(attempt*1000)) * time.Microsecond):
			}
		}
		now := r.cfg.Now()
		var w *ojs.Worker
		if ok {
			w = cur.w.Clone()
		} else {
			if !create {
				return nil, &ojs.NotFoundError{Resource: "worker", ID: id}
			}
			w = &ojs.Worker{ID: id, ReportedState: ojs.WorkerRunning, FirstSeenAt: ojs.NewTime(now), Queues: []string{}}
		}
		f(w, now)
		w.State = ojs.FurthestWorkerState(w.ReportedState, w.Directive)
		w.Stale = false
		b, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		var rev uint64
		if ok {
			rev, err = r.kv.Update(ctx, key, b, cur.rev)
		} else {
			rev, err = r.kv.Create(ctx, key, b)
		}
		if err == nil {
			r.store(id, w, rev)
			var prev *ojs.Worker
			if ok {
				prev = cur.w
			}
			r.announce(prev, w)
			return w, nil
		}
		if !conflict(err) {
			return nil, fmt.Errorf("write worker %s: %w", id, unavailable(err))
		}
		if cur, ok, err = r.read(ctx, id); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("write worker %s: %w: too many concurrent changes", id, ojs.ErrConflict)
}

// maxAttempts bounds the compare-and-swap attempts of one change.
const maxAttempts = 32

// read reads worker id's entry from the bucket, and puts it in the view.
func (r *Registry) read(ctx context.Context, id string) (entry, bool, error) {
	e, err := r.kv.Get(ctx, topology.Token(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return entry{}, false, nil
	}
	if err != nil {
		return entry{}, false, fmt.Errorf("read worker %s: %w", id, unavailable(err))
	}
	var w ojs.Worker
	if err := json.Unmarshal(e.Value(), &w); err != nil {
		return entry{}, false, fmt.Errorf("decode worker %s: %w", id, err)
	}
	r.store(id, &w, e.Revision())
	return entry{w: &w, rev: e.Revision()}, true, nil
}

func (r *Registry) store(id string, w *ojs.Worker, rev uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.view[id]; ok && cur.rev >= rev {
		return
	}
	r.view[id] = entry{w: w, rev: rev}
}

// conflict tells whether err is a lost compare-and-swap: the entry changed
// (or was created, or vanished) since it was read.
func conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", ojs.ErrUnavailable, err) }

// Beat is admission.WorkerHook.Beat: one compare-and-swap recording what
// the worker said, answered with the state that counts. When the bucket
// cannot be written the answer comes from the view.
func (r *Registry) Beat(ctx context.Context, req ojs.HeartbeatRequest) string {
	info := req.Worker
	w, err := r.mutate(ctx, req.WorkerID, true, func(w *ojs.Worker, now time.Time) {
		applyInfo(w, info, req.JobIDs)
		w.LastSeenAt, w.LastHeartbeatAt = ojs.NewTime(now), ojs.NewTime(now)
	})
	if err != nil {
		r.log.Warn("record heartbeat", "worker_id", req.WorkerID, "error", err)
		r.mu.RLock()
		defer r.mu.RUnlock()
		if e, ok := r.view[req.WorkerID]; ok {
			return ojs.FurthestWorkerState(e.w.State, info.State)
		}
		return cmp.Or(info.State, ojs.WorkerRunning)
	}
	r.mu.Lock()
	r.written[req.WorkerID] = r.cfg.Now()
	r.mu.Unlock()
	r.cfg.Events.Publish(EventWorkerHeartbeat, w.ID, map[string]any{
		"worker_id": w.ID, "active_jobs": w.ActiveJobs, "queues": w.Queues, "state": w.State})
	return w.State
}

// applyInfo copies what a heartbeat said into w; unsaid fields keep
// their value.
func applyInfo(w *ojs.Worker, in ojs.WorkerInfo, ids []string) {
	if in.State != "" {
		w.ReportedState = in.State
	}
	switch {
	case in.ActiveJobs >= 0:
		w.ActiveJobs = in.ActiveJobs
	default:
		w.ActiveJobs = len(ids)
	}
	w.ActiveJobIDs = slices.Clone(ids[:min(len(ids), maxStoredJobIDs)])
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&w.Hostname, in.Hostname)
	set(&w.Version, in.Version)
	set(&w.Pool, in.Pool)
	if in.PID > 0 {
		w.PID = in.PID
	}
	if in.Concurrency > 0 {
		w.Concurrency = in.Concurrency
	}
	if len(in.Queues) > 0 {
		w.Queues = slices.Clone(in.Queues)
	}
	if len(in.Labels) > 0 {
		w.Labels = slices.Clone(in.Labels)
	}
	if in.StartedAt != nil {
		w.StartedAt = in.StartedAt
	}
	if len(in.Metadata) > 0 {
		w.Metadata = in.Metadata
	}
}

// maxStoredJobIDs bounds the active job ids kept in a worker's entry.
const maxStoredJobIDs = 1000

// Directive sets an operator's directive (quiet or terminate) for worker
// id, answered to its next heartbeat on any process (ojs-admin-api.md
// 9.3). A directive only moves forward: quiet after terminate changes
// nothing.
func (r *Registry) Directive(ctx context.Context, id, directive string) (*ojs.Worker, error) {
	if directive != ojs.WorkerQuiet && directive != ojs.WorkerTerminate {
		return nil, &ojs.ValidationError{Field: "directive", Rule: `"quiet" or "terminate"`, Received: directive}
	}
	if _, err := r.existing(ctx, id); err != nil {
		return nil, err
	}
	w, err := r.mutate(ctx, id, false, func(w *ojs.Worker, _ time.Time) {
		w.Directive = ojs.FurthestWorkerState(w.Directive, directive)
	})
	if err != nil {
		return nil, err
	}
	r.log.Info("worker directed", "worker_id", id, "directive", w.Directive)
	return r.withStale(w), nil
}

// existing finds worker id in the view, else in the bucket.
func (r *Registry) existing(ctx context.Context, id string) (*ojs.Worker, error) {
	r.mu.RLock()
	e, ok := r.view[id]
	r.mu.RUnlock()
	if ok && r.alive(e.w) {
		return e.w, nil
	}
	e, ok, err := r.read(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok || !r.alive(e.w) {
		return nil, &ojs.NotFoundError{Resource: "worker", ID: id}
	}
	return e.w, nil
}

// alive tells whether w's entry is younger than the bucket's TTL (the
// view may hold one whose expiry marker it has not seen yet).
func (r *Registry) alive(w *ojs.Worker) bool {
	return w.LastSeenAt == nil || r.cfg.Now().Sub(w.LastSeenAt.Time) < r.ttl
}

func (r *Registry) withStale(w *ojs.Worker) *ojs.Worker {
	c := w.Clone()
	c.Stale = w.LastSeenAt != nil && r.cfg.Now().Sub(w.LastSeenAt.Time) > r.cfg.StaleAfter
	return c
}

// Worker returns worker id (ojs-admin-api.md 9.2).
func (r *Registry) Worker(ctx context.Context, id string) (*ojs.Worker, error) {
	w, err := r.existing(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.withStale(w), nil
}

// WorkerHealth is worker id's health (GET /ojs/v1/workers/{id}/health).
func (r *Registry) WorkerHealth(ctx context.Context, id string) (*ojs.WorkerHealth, error) {
	w, err := r.Worker(ctx, id)
	if err != nil {
		return nil, err
	}
	h := w.HealthOf(r.cfg.Now())
	return &h, nil
}

// AllWorkers lists every known worker by id, from the view.
func (r *Registry) AllWorkers() []ojs.Worker {
	r.mu.RLock()
	out := make([]ojs.Worker, 0, len(r.view))
	for _, e := range r.view {
		if r.alive(e.w) {
			out = append(out, *r.withStale(e.w))
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b ojs.Worker) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ListWorkers is one page (1-based) of the workers, with counts by state
// over all of them (ojs-admin-api.md 9.1); a stale worker counts as
// stale, not by its state.
func (r *Registry) ListWorkers(ctx context.Context, page, perPage int) (*ojs.WorkerPage, error) {
	all := r.AllWorkers()
	sum := map[string]int{"total": len(all), ojs.WorkerRunning: 0, ojs.WorkerQuiet: 0, ojs.WorkerDrain: 0, ojs.WorkerTerminate: 0, "stale": 0}
	for _, w := range all {
		if w.Stale {
			sum["stale"]++
		} else {
			sum[w.State]++
		}
	}
	lo := min(max(page-1, 0)*perPage, len(all))
	hi := min(lo+perPage, len(all))
	return &ojs.WorkerPage{Items: all[lo:hi], Summary: sum, Total: len(all)}, nil
}

// Deregister removes a stale worker's entry (ojs-admin-api.md 9.4). A
// worker that is not stale is a conflict: it would only come back.
func (r *Registry) Deregister(ctx context.Context, id string) (*ojs.Worker, error) {
	w, err := r.Worker(ctx, id)
	if err != nil {
		return nil, err
	}
	if !w.Stale {
		return nil, fmt.Errorf("%w: worker '%s' was seen %s ago, within the heartbeat timeout of %s; only a stale worker can be deregistered",
			ojs.ErrInvalidState, id, r.cfg.Now().Sub(w.LastSeenAt.Time).Round(time.Millisecond), r.cfg.StaleAfter)
	}
	r.mu.RLock()
	rev := r.view[id].rev
	r.mu.RUnlock()
	if err := r.kv.Purge(ctx, topology.Token(id), jetstream.LastRevision(rev)); err != nil {
		if conflict(err) {
			return nil, fmt.Errorf("%w: worker '%s' changed meanwhile", ojs.ErrConflict, id)
		}
		return nil, fmt.Errorf("remove worker %s: %w", id, unavailable(err))
	}
	r.mu.Lock()
	delete(r.view, id)
	delete(r.written, id)
	r.mu.Unlock()
	return w, nil
}
