package ojs

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"
)

// Workflow types (ojs-http-binding.md 14, openapi.yaml WorkflowRequest,
// ojs-conformance.md L3-CHAIN, L3-GROUP, L3-BATCH).
const (
	WorkflowChain = "chain" // steps run one after another
	WorkflowGroup = "group" // jobs run in parallel, independently
	WorkflowBatch = "batch" // a group with callbacks
)

// Workflow states, as the official clients read them (pending, running,
// completed, failed, cancelled; spec/README.md decision 10: openapi.yaml's
// older "active" loses). jetgate enqueues a workflow's first steps as it
// creates it, so none of its workflows is ever pending.
const (
	WorkflowPending   = "pending"
	WorkflowRunning   = "running"
	WorkflowCompleted = "completed"
	WorkflowFailed    = "failed"
	WorkflowCancelled = "cancelled"
	// WorkflowLegacyActive is what jetgate stored and answered for a
	// running workflow before issue 32: a stored record that says it reads
	// as WorkflowRunning, and a listing's state filter accepts it.
	WorkflowLegacyActive = "active"
)

// Batch callback triggers (L3-BATCH-002), in the order they are listed.
const (
	CallbackOnSuccess  = "on_success"  // every job completed
	CallbackOnFailure  = "on_failure"  // at least one job discarded or cancelled
	CallbackOnComplete = "on_complete" // every job terminal, whatever the outcome
)

// CallbackKinds lists the batch callback triggers.
var CallbackKinds = []string{CallbackOnSuccess, CallbackOnFailure, CallbackOnComplete}

// WorkflowSpec is a validated POST /ojs/v1/workflows body.
type WorkflowSpec struct {
	Name string
	Type string
	// Steps are the chain's steps in order, or the group's / batch's jobs.
	Steps []WorkflowStepSpec
	// Callbacks of a batch, by trigger (CallbackKinds); nil for others.
	Callbacks map[string]*WorkflowStepSpec
	// Timeout is workflow_timeout (0: none; ojs-timeouts.md 9.2).
	Timeout time.Duration
}

// WorkflowStepSpec is one step (or callback) of a workflow: its name and
// the job it enqueues (validated like an enqueue; ID is left empty).
type WorkflowStepSpec struct {
	Name string
	Job  *Job
	// PrioritySet is true when the step (or the workflow's options) gave
	// a priority; otherwise a successor inherits the root's
	// (ojs-priority.md 9.2).
	PrioritySet bool
}

// Workflow is the view of a workflow the HTTP API answers with.
type Workflow struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Type  string `json:"type"`
	State string `json:"state"`
	// Progress: steps (chain) or jobs (group, batch) done of total;
	// callbacks are not counted.
	StepsTotal     int                      `json:"steps_total"`
	StepsCompleted int                      `json:"steps_completed"`
	JobsTotal      *int                     `json:"jobs_total,omitempty"`
	JobsCompleted  *int                     `json:"jobs_completed,omitempty"`
	Steps          []WorkflowStep           `json:"steps,omitempty"`
	Callbacks      map[string]*WorkflowStep `json:"callbacks,omitempty"`
	FailedStep     string                   `json:"failed_step,omitempty"`
	Error          *JobError                `json:"error,omitempty"`
	CreatedAt      *Time                    `json:"created_at,omitempty"`
	DeadlineAt     *Time                    `json:"deadline_at,omitempty"`
	CompletedAt    *Time                    `json:"completed_at,omitempty"`
	FailedAt       *Time                    `json:"failed_at,omitempty"`
	CancelledAt    *Time                    `json:"cancelled_at,omitempty"`
	// Set by DELETE only (ojs-http-binding.md 14.3).
	StepsCancelled        *int `json:"steps_cancelled,omitempty"`
	StepsAlreadyCompleted *int `json:"steps_already_completed,omitempty"`
}

// WorkflowListQuery selects a page of GET /ojs/v1/workflows: the workflows
// in one state ("" for every state), page (1-based) and per_page, or the
// cursor of a previous page.
type WorkflowListQuery struct {
	State   string
	Page    int
	PerPage int
	Cursor  string
}

// WorkflowList is one page of GET /ojs/v1/workflows: summaries (a Workflow
// without its steps; GET /ojs/v1/workflows/{id} has them).
type WorkflowList struct {
	Workflows  []*Workflow     `json:"workflows"`
	Pagination AdminPagination `json:"pagination"`
	// Scanned counts the records read to build the page.
	Scanned int `json:"-"`
}

// WorkflowStep is one step of a Workflow view. State is "pending" until
// its job is enqueued, then its job's state.
type WorkflowStep struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	State       string          `json:"state"`
	JobID       *string         `json:"job_id"`
	DependsOn   []string        `json:"depends_on"`
	StartedAt   *Time           `json:"started_at,omitempty"`
	CompletedAt *Time           `json:"completed_at,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       *JobError       `json:"error,omitempty"`
}

// workflowFields are the keys a workflow body may have.
var workflowFields = map[string]bool{
	"type": true, "name": true, "steps": true, "jobs": true, "callbacks": true, "options": true,
	"workflow_timeout": true, "on_success": true, "on_failure": true, "on_complete": true,
}

const workflowTypeRule = "one of chain, group, batch"

// ParseWorkflow validates a POST /ojs/v1/workflows body: {"type", "name"?,
// "steps" | "jobs", "callbacks"? {on_success, on_failure, on_complete},
// "options"?, "workflow_timeout"?}. Each step is a job envelope validated
// like an enqueue, with "name" (or "id") naming the step; the workflow's
// "options" are defaults for every step's options. Errors name the field
// ("steps[1].args", "callbacks.on_failure.type").
func ParseWorkflow(body []byte) (*WorkflowSpec, error) {
	top, err := decodeObject(body, "")
	if err != nil {
		return nil, err
	}
	for k := range top.m {
		if !workflowFields[k] {
			return nil, &ValidationError{Field: k, Rule: "a known workflow field",
				Message: fmt.Sprintf("field '%s' is not a workflow field (type, name, steps or jobs, callbacks, options, workflow_timeout)", k)}
		}
	}
	w := &WorkflowSpec{}
	tc := top.cand("type")
	if tc.raw == nil {
		return nil, required(tc)
	}
	if err := json.Unmarshal(tc.raw, &w.Type); err != nil {
		return nil, wrongKind(tc, workflowTypeRule)
	}
	if w.Type != WorkflowChain && w.Type != WorkflowGroup && w.Type != WorkflowBatch {
		return nil, invalid(tc, workflowTypeRule)
	}
	if nc := top.cand("name"); nc.raw != nil {
		if err := json.Unmarshal(nc.raw, &w.Name); err != nil {
			return nil, wrongKind(nc, "a string")
		}
	}
	if tc := top.cand("workflow_timeout"); tc.raw != nil {
		if w.Timeout, err = workflowTimeout(tc); err != nil {
			return nil, err
		}
	}
	var defaults map[string]json.RawMessage
	if oc := top.cand("options"); oc.raw != nil {
		if err := json.Unmarshal(oc.raw, &defaults); err != nil || defaults == nil {
			return nil, wrongKind(oc, "a JSON object of enqueue options")
		}
		// The defaults must be valid options on their own.
		probe, _ := json.Marshal(map[string]any{"type": "workflow.options", "args": []any{}, "options": oc.raw})
		if _, err := parseJobValue(probe, ""); err != nil {
			return nil, err
		}
	}
	key := "steps"
	sc, jc := top.cand("steps"), top.cand("jobs")
	switch {
	case sc.raw != nil && jc.raw != nil:
		return nil, &ValidationError{Field: "jobs", Rule: "absent when steps is given",
			Message: "fields 'steps' and 'jobs' both list the workflow's jobs; send one of them"}
	case jc.raw != nil:
		key, sc = "jobs", jc
	case sc.raw == nil:
		return nil, &ValidationError{Field: "steps", Rule: "required",
			Message: "field 'steps' (or 'jobs') is required: a non-empty array of jobs"}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(sc.raw, &items); err != nil || sc.raw[0] != '[' {
		return nil, wrongKind(sc, "a non-empty array of jobs")
	}
	switch {
	case len(items) == 0:
		return nil, &ValidationError{Field: key, Rule: "a non-empty array of jobs", Received: "[]"}
	case len(items) > MaxBatchSize:
		return nil, &ValidationError{Field: key, Rule: fmt.Sprintf("an array of at most %d jobs", MaxBatchSize),
			Received: fmt.Sprintf("%d jobs", len(items))}
	}
	names := make(map[string]int, len(items))
	for i, item := range items {
		prefix := key + "[" + strconv.Itoa(i) + "]."
		st, err := parseWorkflowStep(item, prefix, defaults, true)
		if err != nil {
			return nil, err
		}
		if st.Name == "" {
			st.Name = "step-" + strconv.Itoa(i+1)
		}
		if k, dup := names[st.Name]; dup {
			return nil, &ValidationError{Field: prefix + "name", Rule: "unique within the workflow",
				Message: fmt.Sprintf("field '%sname' repeats the name of %s[%d] (%q)", prefix, key, k, st.Name)}
		}
		names[st.Name] = i
		w.Steps = append(w.Steps, *st)
	}
	return w, parseCallbacks(w, top, defaults)
}

// parseCallbacks reads a batch's callbacks, under "callbacks" or at the
// top level.
func parseCallbacks(w *WorkflowSpec, top object, defaults map[string]json.RawMessage) error {
	cbs, err := top.child("callbacks")
	if err != nil {
		return err
	}
	for k := range cbs.m {
		if !isCallbackKind(k) {
			return &ValidationError{Field: "callbacks." + k, Rule: "one of on_success, on_failure, on_complete",
				Message: fmt.Sprintf("field 'callbacks.%s' is not a batch callback (on_success, on_failure, on_complete)", k)}
		}
	}
	for _, kind := range CallbackKinds {
		c := cbs.cand(kind)
		if tc := top.cand(kind); tc.raw != nil {
			if c.raw != nil {
				return &ValidationError{Field: kind, Rule: "absent when callbacks." + kind + " is given",
					Message: fmt.Sprintf("fields '%s' and 'callbacks.%s' both set the callback; send one of them", kind, kind)}
			}
			c = tc
		}
		if c.raw == nil {
			continue
		}
		if w.Type != WorkflowBatch {
			return &ValidationError{Field: c.path(), Rule: "absent: only a batch has callbacks",
				Message: fmt.Sprintf("field '%s' is a batch callback; a %s workflow has none", c.path(), w.Type)}
		}
		st, err := parseWorkflowStep(c.raw, c.path()+".", defaults, false)
		if err != nil {
			return err
		}
		st.Name = kind
		if w.Callbacks == nil {
			w.Callbacks = map[string]*WorkflowStepSpec{}
		}
		w.Callbacks[kind] = st
	}
	return nil
}

func isCallbackKind(k string) bool {
	return k == CallbackOnSuccess || k == CallbackOnFailure || k == CallbackOnComplete
}

// parseWorkflowStep validates one step (or callback): a job envelope plus
// "name" or "id" (the step's name) and "depends_on", which may only
// restate the shape (empty). The workflow's option defaults fill what the
// step's options leave out.
func parseWorkflowStep(raw json.RawMessage, prefix string, defaults map[string]json.RawMessage, named bool) (*WorkflowStepSpec, error) {
	o, err := decodeObject(raw, prefix)
	if err != nil {
		return nil, err
	}
	st := &WorkflowStepSpec{}
	m := maps.Clone(o.m)
	for _, k := range []string{"name", "id"} {
		c := o.cand(k)
		if c.raw == nil {
			continue
		}
		if !named {
			return nil, &ValidationError{Field: c.path(), Rule: "absent: a callback is named by its trigger",
				Message: fmt.Sprintf("field '%s' is not allowed: a callback's job id is derived from the workflow", c.path())}
		}
		var s string
		if err := json.Unmarshal(c.raw, &s); err != nil || s == "" || len(s) > 255 {
			return nil, wrongKind(c, "a non-empty string of at most 255 characters naming the step")
		}
		if st.Name == "" {
			st.Name = s
		}
		delete(m, k)
	}
	if c := o.cand("depends_on"); c.raw != nil {
		var deps []string
		if err := json.Unmarshal(c.raw, &deps); err != nil || len(deps) > 0 {
			return nil, &ValidationError{Field: c.path(), Rule: "absent or empty",
				Message: fmt.Sprintf("field '%s' is not supported: the order of steps follows the workflow type (chain, group, batch), not a dependency graph", c.path())}
		}
		delete(m, "depends_on")
	}
	if c := o.cand("unique"); c.raw != nil {
		return nil, &ValidationError{Field: c.path(), Rule: "absent in a workflow step",
			Message: fmt.Sprintf("field '%s' is not allowed: a workflow step's job is identified by the workflow, a unique policy could answer it with another job", c.path())}
	}
	opts, err := o.child("options")
	if err != nil {
		return nil, err
	}
	if c := opts.cand("unique"); c.raw != nil {
		return nil, &ValidationError{Field: c.path(), Rule: "absent in a workflow step",
			Message: fmt.Sprintf("field '%s' is not allowed: a workflow step's job is identified by the workflow, a unique policy could answer it with another job", c.path())}
	}
	if len(defaults) > 0 {
		merged := maps.Clone(defaults)
		maps.Copy(merged, opts.m)
		b, err := json.Marshal(merged)
		if err != nil {
			return nil, err
		}
		m["options"] = b
	}
	_, topPri := m["priority"]
	_, optPri := defaults["priority"]
	if !optPri && opts.m != nil {
		_, optPri = opts.m["priority"]
	}
	st.PrioritySet = topPri || optPri
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	j, err := parseJobValue(b, prefix)
	if err != nil {
		return nil, err
	}
	j.ID = "" // derived from the workflow id when the step is enqueued
	st.Job = j
	return st, nil
}

// workflowTimeout reads workflow_timeout: whole seconds (like the timeouts
// extension's job fields) or an ISO 8601 duration.
func workflowTimeout(c cand) (time.Duration, error) {
	const rule = "a positive number of seconds or an ISO 8601 duration (e.g. \"PT10M\")"
	if c.raw[0] == '"' {
		var s string
		if err := json.Unmarshal(c.raw, &s); err != nil {
			return 0, invalid(c, rule)
		}
		d, err := ParseISODuration(s)
		if err != nil || d <= 0 {
			return 0, invalid(c, rule)
		}
		return d, nil
	}
	n, err := intValue(c, 1, 365*24*3600, rule)
	if err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Second, nil
}
