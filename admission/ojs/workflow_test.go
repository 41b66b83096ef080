package ojs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// ojs-http-binding.md 14.1: the server validates a workflow definition
// before it enqueues anything; each rejection names the field.
func TestParseWorkflowRejections_Binding_14_1(t *testing.T) {
	step := `{"type":"a.b","args":[]}`
	for _, c := range []struct{ name, body, field string }{
		{"no type", `{"steps":[` + step + `]}`, "type"},
		{"unknown type", `{"type":"dag","steps":[` + step + `]}`, "type"},
		{"no steps", `{"type":"chain"}`, "steps"},
		{"empty steps", `{"type":"chain","steps":[]}`, "steps"},
		{"empty jobs", `{"type":"group","jobs":[]}`, "jobs"},
		{"steps and jobs", `{"type":"group","jobs":[` + step + `],"steps":[` + step + `]}`, "jobs"},
		{"steps not an array", `{"type":"chain","steps":{}}`, "steps"},
		{"bad nested args", `{"type":"chain","steps":[` + step + `,{"type":"a.b","args":3}]}`, "steps[1].args"},
		{"nested type missing", `{"type":"group","jobs":[{"args":[]}]}`, "jobs[0].type"},
		{"bad nested priority", `{"type":"chain","steps":[{"type":"a.b","args":[],"options":{"priority":-1}}]}`, "steps[0].options.priority"},
		{"duplicate names", `{"type":"chain","steps":[{"name":"x","type":"a.b","args":[]},{"name":"x","type":"a.b","args":[]}]}`, "steps[1].name"},
		{"depends_on graph", `{"type":"chain","steps":[{"type":"a.b","args":[],"depends_on":["y"]}]}`, "steps[0].depends_on"},
		{"unique in a step", `{"type":"group","jobs":[{"type":"a.b","args":[],"unique":{"key":"k"}}]}`, "jobs[0].unique"},
		{"callbacks on a chain", `{"type":"chain","steps":[` + step + `],"callbacks":{"on_success":` + step + `}}`, "callbacks.on_success"},
		{"unknown callback", `{"type":"batch","jobs":[` + step + `],"callbacks":{"on_done":` + step + `}}`, "callbacks.on_done"},
		{"bad callback job", `{"type":"batch","jobs":[` + step + `],"callbacks":{"on_failure":{"args":[]}}}`, "callbacks.on_failure.type"},
		{"bad workflow_timeout", `{"type":"chain","workflow_timeout":0,"steps":[` + step + `]}`, "workflow_timeout"},
		{"bad workflow_timeout string", `{"type":"chain","workflow_timeout":"soon","steps":[` + step + `]}`, "workflow_timeout"},
		{"bad default options", `{"type":"chain","options":{"queue":3},"steps":[` + step + `]}`, "options.queue"},
		{"unknown field", `{"type":"chain","steps":[` + step + `],"chains":1}`, "chains"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ojs.ParseWorkflow([]byte(c.body))
			var ve *ojs.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("err %v, want a validation error naming %q", err, c.field)
			}
		})
	}
}

// The shapes of openapi.yaml (type + steps / jobs + callbacks) and of
// ojs-conformance.md L3-001 (a chain given as jobs); options are defaults
// for every step; a step's own priority is noted (ojs-priority.md 9.2).
func TestParseWorkflowShapes(t *testing.T) {
	w, err := ojs.ParseWorkflow([]byte(`{"type":"chain","name":"n","workflow_timeout":"PT2M","options":{"queue":"q","priority":5},
		"jobs":[{"type":"a.b","args":[1]},{"id":"second","type":"a.c","args":[],"options":{"queue":"r"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Type != "chain" || w.Name != "n" || w.Timeout != 2*time.Minute || len(w.Steps) != 2 {
		t.Fatalf("%+v", w)
	}
	if s := w.Steps[0]; s.Name != "step-1" || s.Job.Queue != "q" || s.Job.Priority != 5 || !s.PrioritySet || s.Job.ID != "" {
		t.Fatalf("step 0 %+v %+v", s, s.Job)
	}
	if s := w.Steps[1]; s.Name != "second" || s.Job.Queue != "r" {
		t.Fatalf("step 1 %+v %+v", s, s.Job)
	}
	w, err = ojs.ParseWorkflow([]byte(`{"type":"batch","jobs":[{"type":"a.b","args":[]}],
		"on_complete":{"type":"cb","args":[]},"callbacks":{"on_failure":{"type":"cb","args":[]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Callbacks) != 2 || w.Callbacks["on_complete"] == nil || w.Callbacks["on_failure"] == nil || w.Steps[0].PrioritySet {
		t.Fatalf("%+v", w)
	}
}
