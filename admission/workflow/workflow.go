package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Jobs is what the engine does to jobs: admission's operations, with their
// checks, events and counters (*admission.Service implements it).
type Jobs interface {
	admission.Jobs
	Enqueue(ctx context.Context, job *ojs.Job) (*ojs.Job, error)
}

// Events receives the workflow events (ojs-events.md: workflow.started,
// workflow.step_completed, workflow.completed, workflow.failed).
type Events interface {
	Publish(eventType, subject string, data any)
}

// Workflow event types (L3-WF-EVT-001).
const (
	EventStarted       = "workflow.started"
	EventStepCompleted = "workflow.step_completed"
	EventCompleted     = "workflow.completed"
	EventFailed        = "workflow.failed"
	EventCancelled     = "workflow.cancelled"
)

// Config configures an Engine.
type Config struct {
	// JS publishes the timers and the record writes that carry a TTL;
	// KV is the workflow bucket, Timers the workflow timer stream
	// (topology.Assets.Workflows, WorkflowTimers).
	JS     jetstream.JetStream
	KV     jetstream.KeyValue
	Timers jetstream.Stream
	// Check is how often a running workflow's timer re-reads its steps'
	// job records (the backstop for a missed JobChanged). Default 1 min.
	Check time.Duration
	// Retention is how long a finished workflow's record is kept
	// (default 7 days).
	Retention time.Duration
	Events    Events
	Logger    *slog.Logger
	// Now tells the time (default time.Now).
	Now func() time.Time
	// MaxScan is how many records one page of GET /ojs/v1/workflows
	// reads at most (default 10 000); MaxOffset how many matches a page
	// number may skip (default 10 000). See Workflows.
	MaxScan   int
	MaxOffset int
}

// Engine runs workflows; it is an admission.Lifecycle.
type Engine struct {
	cfg      Config
	mu       sync.Mutex
	jobs     Jobs
	cc       jetstream.ConsumeContext
	kvStream jetstream.Stream // the workflow bucket's stream (list.go)
}

var _ admission.Lifecycle = (*Engine)(nil)

// New returns a workflow engine. Bind gives it the jobs it works on, Start
// starts its timer consumer.
func New(cfg Config) *Engine {
	if cfg.Check <= 0 {
		cfg.Check = time.Minute
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MaxScan = cmp.Or(max(cfg.MaxScan, 0), 10_000)
	cfg.MaxOffset = cmp.Or(max(cfg.MaxOffset, 0), 10_000)
	return &Engine{cfg: cfg}
}

// Bind sets the jobs the engine enqueues, reads and cancels: the
// admission service this engine is a hook of (built after the hook).
func (e *Engine) Bind(jobs Jobs) {
	e.mu.Lock()
	e.jobs = jobs
	e.mu.Unlock()
}

func (e *Engine) j() Jobs {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jobs
}

// Start consumes fired workflow timers with the durable consumer shared by
// every jetgate process, so each fired timer is handled once. Stop ends it.
func (e *Engine) Start(ctx context.Context) error {
	cons, err := e.cfg.Timers.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       topology.WorkflowTimerConsumer,
		Description:   "jetgate fired workflow timers: workflow_timeout and the check of running workflows",
		FilterSubject: topology.WorkflowFiredSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 1000,
		MaxDeliver:    -1,
	})
	if err != nil {
		return fmt.Errorf("workflow timer consumer: %w", err)
	}
	cc, err := cons.Consume(e.onTimer, jetstream.PullMaxMessages(64))
	if err != nil {
		return fmt.Errorf("consume workflow timers: %w", err)
	}
	e.mu.Lock()
	e.cc = cc
	e.mu.Unlock()
	return nil
}

// Stop stops the timer consumer (a timer being handled is redelivered to
// another process if its ack does not go out).
func (e *Engine) Stop() {
	e.mu.Lock()
	cc := e.cc
	e.cc = nil
	e.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// Admit does nothing: workflow steps are enqueued by the engine itself.
func (e *Engine) Admit(context.Context, admission.Jobs, []*ojs.Job) (admission.Admission, error) {
	return admission.Admission{}, nil
}

// JobChanged advances a workflow when one of its steps ended. It returns
// at once for jobs that are not workflow steps (one map lookup).
func (e *Engine) JobChanged(ctx context.Context, j *ojs.Job, _ ojs.State) {
	raw, ok := j.Extra[FieldWorkflowID]
	if !ok || !j.State.Terminal() || e.j() == nil {
		// Not a step's end, or not bound yet (a timer of the service
		// firing before Bind): the workflow's check timer sees the end.
		return
	}
	var id string
	if json.Unmarshal(raw, &id) != nil || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.advance(ctx, id, []*ojs.Job{j}); err != nil && !errors.Is(err, ojs.ErrNotFound) {
		e.cfg.Logger.Warn("workflow not advanced; its check timer will", "workflow", id, "job", j.ID, "error", err)
	}
}

// Fields the engine adds to a step's job.
const (
	// FieldWorkflowID names the workflow a job is a step of.
	FieldWorkflowID = "workflow_id"
	// FieldWorkflowStep names the step.
	FieldWorkflowStep = "workflow_step"
	// FieldParentResults carries the results of the step's predecessors
	// (openapi.yaml Job.parent_results; L3-CHAIN-002, L3-DATA-001).
	FieldParentResults = "parent_results"
)

const maxCASAttempts = 32

// get reads a workflow record and its revision.
func (e *Engine) get(ctx context.Context, id string) (*record, uint64, error) {
	if ojs.ValidID(id) != nil {
		return nil, 0, &ojs.NotFoundError{Resource: "workflow", ID: id}
	}
	en, err := e.cfg.KV.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, &ojs.NotFoundError{Resource: "workflow", ID: id}
	}
	if err != nil {
		return nil, 0, unavailable(err)
	}
	r, err := decodeRecord(en.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("workflow %s: unreadable record: %w", id, err)
	}
	return r, en.Revision(), nil
}

// decodeRecord reads a stored record. A record stored before issue 32
// says "active" for a running workflow: it reads as running (and is
// written back so at its next change).
func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.State == ojs.WorkflowLegacyActive {
		r.State = ojs.WorkflowRunning
	}
	return &r, nil
}

var errLost = errors.New("workflow record changed")

// put writes r over revision rev (one compare-and-swap); a finished
// record carries the retention as its TTL. errLost: another writer won.
func (e *Engine) put(ctx context.Context, r *record, rev uint64) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	m := nats.NewMsg("$KV." + topology.WorkflowsBucket + "." + r.ID)
	m.Data = b
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if r.State != ojs.WorkflowRunning {
		m.Header.Set(jetstream.MsgTTLHeader, e.cfg.Retention.Round(time.Second).String())
	}
	if _, err := e.cfg.JS.PublishMsg(ctx, m); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return errLost
		}
		return unavailable(err)
	}
	return nil
}

// update applies change to the record of id with compare-and-swaps until
// one lands. change returns false when there is nothing to write. It
// returns the record written (or read, when nothing was written) and
// whether this call wrote it: only the writer acts on what it decided.
func (e *Engine) update(ctx context.Context, id string, change func(r *record) bool) (*record, bool, error) {
	for range maxCASAttempts {
		r, rev, err := e.get(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if !change(r) {
			return r, false, nil
		}
		err = e.put(ctx, r, rev)
		if errors.Is(err, errLost) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return r, true, nil
	}
	return nil, false, fmt.Errorf("%w: workflow %s kept changing under %d attempts", ojs.ErrConflict, id, maxCASAttempts)
}

// advance records the ended jobs of workflow id and moves it on. Of any
// number of processes advancing on one revision exactly one
// compare-and-swap lands; only its writer enqueues the successors it
// marked, and their enqueue is idempotent (deterministic job ids).
func (e *Engine) advance(ctx context.Context, id string, ended []*ojs.Job) error {
	var enqueue []*step
	var before string
	r, wrote, err := e.update(ctx, id, func(r *record) bool {
		before = r.State
		if r.State != ojs.WorkflowRunning {
			return false
		}
		changed := false
		for _, j := range ended {
			if s := r.byJob(j.ID); s != nil && s.observe(j) {
				r.keepResult(s)
				changed = true
			}
		}
		if !changed {
			return false
		}
		enqueue = r.decide(e.cfg.Now())
		return true
	})
	if err != nil || !wrote {
		return err
	}
	for _, j := range ended {
		if s := r.byJob(j.ID); s != nil && s.Kind == "" && j.State == ojs.StateCompleted {
			e.event(EventStepCompleted, r, map[string]any{"step_id": s.Name, "step_type": j.Type, "job_id": j.ID})
		}
	}
	e.ended(r, before)
	return e.enqueue(ctx, r, enqueue)
}

// ended publishes the event of a workflow that just finished.
func (e *Engine) ended(r *record, before string) {
	if before != ojs.WorkflowRunning || r.State == ojs.WorkflowRunning {
		return
	}
	data := map[string]any{"total_steps": len(r.Steps)}
	if r.EndedAt != nil {
		data["duration_ms"] = r.EndedAt.Sub(r.CreatedAt).Milliseconds()
	}
	switch r.State {
	case ojs.WorkflowCompleted:
		e.event(EventCompleted, r, data)
	case ojs.WorkflowFailed:
		data["failed_step_id"] = r.FailedStep
		data["error"] = r.Error
		e.event(EventFailed, r, data)
	case ojs.WorkflowCancelled:
		e.event(EventCancelled, r, data)
	}
}

func (e *Engine) event(typ string, r *record, data map[string]any) {
	if e.cfg.Events == nil {
		return
	}
	data["workflow_id"] = r.ID
	data["workflow_name"] = r.Name
	e.cfg.Events.Publish(typ, r.ID, data)
}

// enqueue enqueues steps of r (marked Enqueued by the caller's write).
func (e *Engine) enqueue(ctx context.Context, r *record, steps []*step) error {
	var first error
	for _, s := range steps {
		if _, err := e.enqueueStep(ctx, r, s); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// enqueueStep enqueues s's job under its derived id. A job already there
// (an earlier attempt, another process's backstop) is success.
func (e *Engine) enqueueStep(ctx context.Context, r *record, s *step) (*ojs.Job, error) {
	j, err := ojs.ParseTemplate(s.Job)
	if err != nil {
		return nil, fmt.Errorf("workflow %s step %s: stored job: %w", r.ID, s.Name, err)
	}
	j.ID = s.JobID
	if !s.PrioritySet {
		j.Priority = r.RootPriority
	}
	if j.Extra == nil {
		j.Extra = map[string]json.RawMessage{}
	}
	j.Extra[FieldWorkflowID], _ = json.Marshal(r.ID)
	j.Extra[FieldWorkflowStep], _ = json.Marshal(s.Name)
	if parents := e.parents(ctx, r, s); parents != nil {
		j.Extra[FieldParentResults], _ = json.Marshal(parents)
	}
	nj, err := e.j().Enqueue(ctx, j)
	var dup *ojs.DuplicateError
	if errors.As(err, &dup) && dup.ExistingID == j.ID {
		return e.j().Get(ctx, j.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %s: enqueue step %s: %w", r.ID, s.Name, err)
	}
	return nj, nil
}

// parents returns the results s receives: a chain step its predecessor's
// (L3-CHAIN-002), a callback every job's in order; nil for first steps
// and group or batch jobs. A result kept out of the record is read from
// its job.
func (e *Engine) parents(ctx context.Context, r *record, s *step) []json.RawMessage {
	result := func(p *step) json.RawMessage {
		if p.ResultInJob {
			if j, err := e.j().Get(ctx, p.JobID); err == nil {
				return orNull(j.Result)
			}
		}
		return orNull(p.Result)
	}
	if s.Kind != "" {
		out := make([]json.RawMessage, len(r.Steps))
		for i, p := range r.Steps {
			out[i] = result(p)
		}
		return out
	}
	if r.Type != ojs.WorkflowChain {
		return nil
	}
	for i, p := range r.Steps {
		if p == s && i > 0 {
			return []json.RawMessage{result(r.Steps[i-1])}
		}
	}
	return nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func unavailable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: workflow store: %v", ojs.ErrUnavailable, err)
}
