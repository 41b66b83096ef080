package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// CreateWorkflow stores a new workflow and enqueues its first steps (the
// chain's first, every job of a group or batch). Order: the check timer,
// then the record (one KV create), then the steps; a crash after the
// record leaves the steps to the check timer. A first step that cannot
// be enqueued (a full queue) cancels the workflow and answers the error.
func (e *Engine) CreateWorkflow(ctx context.Context, spec *ojs.WorkflowSpec) (*ojs.Workflow, error) {
	now := e.cfg.Now()
	r := &record{
		ID: ojs.NewID(), Name: spec.Name, Type: spec.Type, State: ojs.WorkflowRunning,
		RootPriority: spec.Steps[0].Job.Priority, CreatedAt: now.UTC(),
	}
	if spec.Timeout > 0 {
		t := now.Add(spec.Timeout).UTC()
		r.DeadlineAt = &t
	}
	add := func(st *ojs.WorkflowStepSpec, kind string) error {
		b, err := json.Marshal(st.Job)
		if err != nil {
			return err
		}
		s := &step{Name: st.Name, Kind: kind, JobID: stepJobID(r.ID, len(r.Steps)+len(r.Callbacks)),
			Job: b, PrioritySet: st.PrioritySet}
		if kind == "" {
			r.Steps = append(r.Steps, s)
		} else {
			r.Callbacks = append(r.Callbacks, s)
		}
		return nil
	}
	for i := range spec.Steps {
		if err := add(&spec.Steps[i], ""); err != nil {
			return nil, err
		}
	}
	for _, kind := range ojs.CallbackKinds {
		if cb := spec.Callbacks[kind]; cb != nil {
			if err := add(cb, kind); err != nil {
				return nil, err
			}
		}
	}
	first := r.Steps
	if r.Type == ojs.WorkflowChain {
		first = r.Steps[:1]
	}
	for _, s := range first {
		s.Enqueued = true
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxDefinitionBytes {
		// Results are added as steps end; the record must stay well
		// below the server's message size. A size limit is a 413 like
		// every other (issue 31).
		return nil, &ojs.TooLargeError{Field: "steps", What: "workflow definition as stored", Limit: MaxDefinitionBytes,
			Size: int64(len(b)), Hint: fmt.Sprintf("Send a workflow of at most %d bytes of steps: pass large data to its jobs by reference.", MaxDefinitionBytes)}
	}
	if err := e.arm(ctx, r); err != nil {
		return nil, err
	}
	if _, err := e.cfg.KV.Create(ctx, r.ID, b); err != nil {
		return nil, unavailable(err)
	}
	e.event(EventStarted, r, map[string]any{"total_steps": len(r.Steps), "type": r.Type})
	live := map[string]*ojs.Job{}
	for _, s := range first {
		j, err := e.enqueueStep(ctx, r, s)
		if err != nil {
			if _, cerr := e.CancelWorkflow(context.WithoutCancel(ctx), r.ID); cerr != nil {
				e.cfg.Logger.Warn("workflow whose first steps failed to enqueue not cancelled; its check timer enqueues them",
					"workflow", r.ID, "error", cerr)
			}
			return nil, err
		}
		live[j.ID] = j
	}
	return r.view(live), nil
}

// MaxDefinitionBytes bounds a workflow's stored definition (its steps'
// jobs), leaving room in the record for the steps' results under the
// server's default 1 MiB message size.
const MaxDefinitionBytes = 256 << 10

// Workflow returns the state and progress of a workflow. It reconciles
// first: steps whose jobs ended without the workflow seeing it (a missed
// JobChanged) are recorded and the workflow moved on.
func (e *Engine) Workflow(ctx context.Context, id string) (*ojs.Workflow, error) {
	r, live, err := e.reconcile(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.view(live), nil
}

// CancelWorkflow cancels a workflow and then its steps' jobs that have not
// ended (ojs-http-binding.md 14.3); steps not enqueued yet never will be.
// A finished workflow is a conflict.
func (e *Engine) CancelWorkflow(ctx context.Context, id string) (*ojs.Workflow, error) {
	var state string
	r, wrote, err := e.update(ctx, id, func(r *record) bool {
		state = r.State
		if r.State != ojs.WorkflowRunning {
			return false
		}
		r.end(e.cfg.Now(), ojs.WorkflowCancelled)
		r.StepsCancelled, r.StepsAlreadyCompleted = 0, 0
		for _, s := range r.Steps {
			switch {
			case s.State == ojs.StateCompleted:
				r.StepsAlreadyCompleted++
			case !s.terminal():
				r.StepsCancelled++
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !wrote {
		return nil, fmt.Errorf("%w: workflow %s is already %s", ojs.ErrConflict, id, state)
	}
	e.ended(r, ojs.WorkflowRunning)
	live := e.cleanup(ctx, r)
	w := r.view(live)
	c, d := r.StepsCancelled, r.StepsAlreadyCompleted
	w.StepsCancelled, w.StepsAlreadyCompleted = &c, &d
	return w, nil
}

// cleanup cancels the jobs of a failed or cancelled workflow that have not
// ended: every step's and, for a cancelled one, the callbacks' (a failed
// batch's on_failure callback runs). It returns the jobs it read.
func (e *Engine) cleanup(ctx context.Context, r *record) map[string]*ojs.Job {
	live := map[string]*ojs.Job{}
	if r.State != ojs.WorkflowFailed && r.State != ojs.WorkflowCancelled {
		return live
	}
	for _, s := range r.all() {
		if !s.Enqueued || s.terminal() || (s.Kind != "" && r.State != ojs.WorkflowCancelled) {
			continue
		}
		j, _, err := e.j().Cancel(ctx, s.JobID)
		switch {
		case err == nil:
			live[s.JobID] = j
		case errors.Is(err, ojs.ErrInvalidState):
			if cur, gerr := e.j().Get(ctx, s.JobID); gerr == nil {
				live[s.JobID] = cur
			}
		case errors.Is(err, ojs.ErrNotFound):
			// Never enqueued (the writer of its mark died first) or gone.
		default:
			e.cfg.Logger.Warn("workflow step not cancelled; the check timer tries again", "workflow", r.ID, "job", s.JobID, "error", err)
		}
	}
	return live
}

// maxRounds bounds the advances of one reconcile (each may enqueue steps
// that have already ended by the next read only in a test's fast worker).
const maxRounds = 4

// reconcile reads the jobs of a workflow's enqueued steps that the record
// does not show ended: ended ones advance the workflow, missing ones (the
// writer that marked them died before enqueueing) are enqueued again,
// idempotently. A failed or cancelled workflow's remaining jobs are
// cancelled. It returns the record and the jobs it read.
func (e *Engine) reconcile(ctx context.Context, id string) (*record, map[string]*ojs.Job, error) {
	for round := 0; ; round++ {
		r, _, err := e.get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if r.State != ojs.WorkflowRunning {
			live := e.cleanup(ctx, r)
			for _, s := range r.all() {
				if s.Enqueued && !s.terminal() && live[s.JobID] == nil {
					if j, err := e.j().Get(ctx, s.JobID); err == nil {
						live[s.JobID] = j
					}
				}
			}
			return r, live, nil
		}
		live := map[string]*ojs.Job{}
		var ended []*ojs.Job
		for _, s := range r.all() {
			if !s.Enqueued || s.terminal() {
				continue
			}
			j, err := e.j().Get(ctx, s.JobID)
			if errors.Is(err, ojs.ErrNotFound) {
				if j, err = e.enqueueStep(ctx, r, s); err != nil {
					e.cfg.Logger.Warn("workflow step not enqueued; the check timer tries again", "workflow", id, "step", s.Name, "error", err)
					continue
				}
			} else if err != nil {
				return nil, nil, err
			}
			live[s.JobID] = j
			if j.State.Terminal() {
				ended = append(ended, j)
			}
		}
		if len(ended) == 0 || round == maxRounds {
			return r, live, nil
		}
		if err := e.advance(ctx, id, ended); err != nil {
			return nil, nil, err
		}
	}
}

// timeout fails a running workflow whose workflow_timeout passed
// (ojs-timeouts.md 9.2) and cancels its steps' jobs that have not ended.
func (e *Engine) timeout(ctx context.Context, id string) error {
	now := e.cfg.Now()
	r, wrote, err := e.update(ctx, id, func(r *record) bool {
		if r.State != ojs.WorkflowRunning || r.DeadlineAt == nil || now.Before(*r.DeadlineAt) {
			return false
		}
		limit := r.DeadlineAt.Sub(r.CreatedAt)
		r.fail(now, "", &ojs.JobError{Type: "timeout", Code: "workflow_timeout",
			Message:      fmt.Sprintf("workflow_timeout of %s passed", limit),
			TimeoutKind:  "workflow",
			LimitMs:      limit.Milliseconds(),
			ElapsedMs:    now.Sub(r.CreatedAt).Milliseconds(),
			LimitSeconds: int64(limit / time.Second), ElapsedSeconds: int64(now.Sub(r.CreatedAt) / time.Second)}, "")
		return true
	})
	if err != nil || !wrote {
		return err
	}
	e.ended(r, ojs.WorkflowRunning)
	e.cleanup(ctx, r)
	return nil
}

// HeaderWorkflowID names the workflow of a timer.
const HeaderWorkflowID = "Ojs-Workflow-Id"

// arm schedules r's check timer: after Config.Check, or at the deadline
// if that comes first. A later arm replaces it.
func (e *Engine) arm(ctx context.Context, r *record) error {
	at := e.cfg.Now().Add(e.cfg.Check)
	if r.DeadlineAt != nil && r.DeadlineAt.Before(at) {
		at = *r.DeadlineAt
	}
	m := nats.NewMsg(topology.WorkflowTimer(r.ID))
	m.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(jetstream.ScheduleTargetHeader, topology.WorkflowFiredSubject)
	m.Header.Set(HeaderWorkflowID, r.ID)
	if _, err := e.cfg.JS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("arm workflow %s check: %w", r.ID, unavailable(err))
	}
	return nil
}

// onTimer handles a fired check: reconcile, fail on a passed deadline,
// and arm the next check while the workflow is running. The message is
// acked only after the next check is armed, so a process dying on the way
// leaves it to be redelivered.
func (e *Engine) onTimer(msg jetstream.Msg) {
	id := msg.Headers().Get(HeaderWorkflowID)
	if id == "" || e.j() == nil {
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := e.check(ctx, id)
	if errors.Is(err, ojs.ErrNotFound) {
		_ = msg.Ack()
		return
	}
	if err != nil {
		e.cfg.Logger.Warn("workflow check failed, will retry", "workflow", id, "error", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	_ = msg.Ack()
}

func (e *Engine) check(ctx context.Context, id string) error {
	r, _, err := e.reconcile(ctx, id)
	if err != nil {
		return err
	}
	if r.State == ojs.WorkflowRunning && r.DeadlineAt != nil && !e.cfg.Now().Before(*r.DeadlineAt) {
		if err := e.timeout(ctx, id); err != nil {
			return err
		}
		if r, _, err = e.get(ctx, id); err != nil {
			return err
		}
	}
	if r.State != ojs.WorkflowRunning {
		return nil
	}
	return e.arm(ctx, r)
}
