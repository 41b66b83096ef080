package workflow

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/jetgate/jetgate/admission/ojs"
)

// record is a workflow's stored state (one KV entry, key = workflow id).
type record struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Type  string `json:"type"`
	State string `json:"state"`
	// Steps are the chain's steps or the group's / batch's jobs; Callbacks
	// the batch's callbacks in ojs.CallbackKinds order.
	Steps     []*step `json:"steps"`
	Callbacks []*step `json:"callbacks,omitempty"`
	// RootPriority is the first step's priority, inherited by successors
	// that do not set their own (ojs-priority.md 9.2).
	RootPriority int        `json:"root_priority"`
	CreatedAt    time.Time  `json:"created_at"`
	DeadlineAt   *time.Time `json:"deadline_at,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	// FailedStep names the step that failed the workflow; Error says why.
	FailedStep string        `json:"failed_step,omitempty"`
	Error      *ojs.JobError `json:"error,omitempty"`
	// Cancel counts, set by DELETE.
	StepsCancelled        int `json:"steps_cancelled,omitempty"`
	StepsAlreadyCompleted int `json:"steps_already_completed,omitempty"`
}

// step is one step or callback. Its job id is fixed when the workflow is
// created (stepJobID), so enqueueing it is idempotent.
type step struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"` // callback trigger, "" for a step
	JobID string `json:"job_id"`
	// Job is the job to enqueue, as validated at create (no id).
	Job         json.RawMessage `json:"job"`
	PrioritySet bool            `json:"priority_set,omitempty"`
	// Enqueued is set by the compare-and-swap that decides to enqueue
	// the step; only the writer of that revision enqueues it (and the
	// backstop, idempotently, when its job does not exist).
	Enqueued bool `json:"enqueued,omitempty"`
	// State is the job's terminal state once the workflow has seen it
	// ("" before).
	State  ojs.State       `json:"state,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// ResultInJob is set when the result was too large for the record
	// (maxStepResult, maxResults): it is read from the job when needed.
	ResultInJob bool          `json:"result_in_job,omitempty"`
	Error       *ojs.JobError `json:"error,omitempty"`
	StartedAt   *ojs.Time     `json:"started_at,omitempty"`
	CompletedAt *ojs.Time     `json:"completed_at,omitempty"`
}

// Bounds of the results a record holds, so that it stays below the
// server's message size (1 MiB by default) with the definition
// (MaxDefinitionBytes).
const (
	maxStepResult = 64 << 10
	maxResults    = 512 << 10
)

// keepResult moves s's result out of the record when it is too large for
// it, alone or with the others.
func (r *record) keepResult(s *step) {
	total := 0
	for _, o := range r.all() {
		total += len(o.Result)
	}
	if len(s.Result) > maxStepResult || total > maxResults {
		s.Result, s.ResultInJob = nil, true
	}
}

func (s *step) terminal() bool { return s.State != "" }

// stepJobID derives the job id of step i (callbacks follow the steps) of
// workflow wf: a UUIDv7 keeping the workflow id's timestamp, the rest a
// hash of (workflow id, i). Every process derives the same id, so an
// enqueue repeated after a crash meets the first one's record.
func stepJobID(wf string, i int) string {
	u, err := uuid.Parse(wf)
	if err != nil {
		u = uuid.UUID{}
	}
	h := sha256.Sum256([]byte(wf + "/" + strconv.Itoa(i)))
	copy(u[6:], h[:10])
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u.String()
}

// all returns the steps then the callbacks.
func (r *record) all() []*step {
	out := make([]*step, 0, len(r.Steps)+len(r.Callbacks))
	out = append(out, r.Steps...)
	return append(out, r.Callbacks...)
}

// byJob returns the step or callback whose job is id.
func (r *record) byJob(id string) *step {
	for _, s := range r.all() {
		if s.JobID == id {
			return s
		}
	}
	return nil
}

// failedState reports whether a terminal job state fails its workflow
// (L3-CHAIN-003, ojs-timeouts.md 9.2: discarded, which a timed-out step
// ends as; cancelled too).
func failedState(s ojs.State) bool { return s == ojs.StateDiscarded || s == ojs.StateCancelled }

// observe records that st's job ended in j's state. It reports whether the
// record changed.
func (s *step) observe(j *ojs.Job) bool {
	if s.terminal() || !j.State.Terminal() {
		return false
	}
	s.State = j.State
	s.StartedAt = j.StartedAt
	s.Enqueued = true
	switch j.State {
	case ojs.StateCompleted:
		s.Result = j.Result
		s.CompletedAt = j.CompletedAt
	case ojs.StateDiscarded:
		s.Error = j.Error
		s.CompletedAt = j.DiscardedAt
	case ojs.StateCancelled:
		s.CompletedAt = j.CancelledAt
	}
	return true
}

// decide moves a running workflow on after a step ended: it marks the
// successors to enqueue (returned) and ends the workflow when its shape
// says so. It is a pure function of the record, so every process deciding
// on one revision decides the same.
func (r *record) decide(now time.Time) (enqueue []*step) {
	if r.State != ojs.WorkflowRunning {
		return nil
	}
	switch r.Type {
	case ojs.WorkflowChain:
		for _, s := range r.Steps {
			switch {
			case s.State == ojs.StateCompleted:
				continue
			case s.terminal():
				r.fail(now, s.Name, s.Error, "step "+s.Name+" ended "+string(s.State))
				return nil
			case !s.Enqueued:
				s.Enqueued = true
				return []*step{s}
			}
			return nil // running
		}
		r.end(now, ojs.WorkflowCompleted)
		return nil
	default:
		failed := ""
		for _, s := range r.Steps {
			if !s.terminal() {
				return nil
			}
			if failed == "" && failedState(s.State) {
				failed = s.Name
			}
		}
		if failed == "" {
			r.end(now, ojs.WorkflowCompleted)
		} else {
			var e *ojs.JobError
			for _, s := range r.Steps {
				if s.Name == failed {
					e = s.Error
				}
			}
			r.fail(now, failed, e, "job "+failed+" did not complete")
		}
		for _, c := range r.Callbacks {
			fire := c.Kind == ojs.CallbackOnComplete ||
				(c.Kind == ojs.CallbackOnSuccess && failed == "") ||
				(c.Kind == ojs.CallbackOnFailure && failed != "")
			if fire && !c.Enqueued {
				c.Enqueued = true
				enqueue = append(enqueue, c)
			}
		}
		return enqueue
	}
}

func (r *record) end(now time.Time, state string) {
	r.State = state
	t := now.UTC()
	r.EndedAt = &t
}

func (r *record) fail(now time.Time, stepName string, e *ojs.JobError, msg string) {
	r.end(now, ojs.WorkflowFailed)
	r.FailedStep = stepName
	if e == nil {
		e = &ojs.JobError{Type: "workflow_step_failed", Message: msg}
	}
	r.Error = e
}

// view is the record as the API shows it; live holds the current job of
// every enqueued step that has not ended (by job id).
func (r *record) view(live map[string]*ojs.Job) *ojs.Workflow {
	w := &ojs.Workflow{
		ID: r.ID, Name: r.Name, Type: r.Type, State: r.State,
		StepsTotal: len(r.Steps), FailedStep: r.FailedStep, Error: r.Error,
		CreatedAt: ojs.NewTime(r.CreatedAt),
	}
	if r.DeadlineAt != nil {
		w.DeadlineAt = ojs.NewTime(*r.DeadlineAt)
	}
	if r.EndedAt != nil {
		t := ojs.NewTime(*r.EndedAt)
		switch r.State {
		case ojs.WorkflowCompleted:
			w.CompletedAt = t
		case ojs.WorkflowFailed:
			w.FailedAt = t
		case ojs.WorkflowCancelled:
			w.CancelledAt = t
		}
	}
	prev := ""
	for _, s := range r.Steps {
		v := s.view(live)
		v.DependsOn = []string{}
		if r.Type == ojs.WorkflowChain && prev != "" {
			v.DependsOn = []string{prev}
		}
		prev = s.Name
		if v.State == string(ojs.StateCompleted) {
			w.StepsCompleted++
		}
		w.Steps = append(w.Steps, v)
	}
	if r.Type != ojs.WorkflowChain {
		total, done := w.StepsTotal, w.StepsCompleted
		w.JobsTotal, w.JobsCompleted = &total, &done
	}
	for _, c := range r.Callbacks {
		if w.Callbacks == nil {
			w.Callbacks = map[string]*ojs.WorkflowStep{}
		}
		v := c.view(live)
		v.DependsOn = make([]string, 0, len(r.Steps))
		for _, s := range r.Steps {
			v.DependsOn = append(v.DependsOn, s.Name)
		}
		w.Callbacks[c.Kind] = &v
	}
	return w
}

func (s *step) view(live map[string]*ojs.Job) ojs.WorkflowStep {
	var typ string
	var j struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(s.Job, &j) == nil {
		typ = j.Type
	}
	v := ojs.WorkflowStep{ID: s.Name, Name: s.Name, Type: typ, State: "pending",
		StartedAt: s.StartedAt, CompletedAt: s.CompletedAt, Result: s.Result, Error: s.Error}
	if !s.Enqueued {
		return v
	}
	id := s.JobID
	v.JobID = &id
	if s.terminal() {
		v.State = string(s.State)
		return v
	}
	if lj := live[s.JobID]; lj != nil {
		v.State = string(lj.State)
		v.StartedAt = lj.StartedAt
		if lj.State.Terminal() {
			v.Result, v.Error = lj.Result, lj.Error
		}
	} else {
		v.State = "enqueuing"
	}
	return v
}
