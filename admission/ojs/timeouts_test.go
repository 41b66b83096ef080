package ojs

import (
	"errors"
	"strings"
	"testing"
)

// ojs-timeouts.md 6, validation rules: each one is a 400 naming the field
// and the rule.
func TestParseTimeoutRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, field, rule string }{
		{"timeout positive", `{"timeout":0}`, "timeout", "positive integer"},
		{"timeout negative", `{"timeout":-1}`, "timeout", "positive integer"},
		{"timeout_ms positive", `{"timeout_ms":0}`, "timeout_ms", "positive integer number of milliseconds"},
		{"total_timeout positive", `{"total_timeout":0}`, "total_timeout", "positive integer"},
		{"total_timeout >= timeout", `{"timeout":60,"total_timeout":30}`, "total_timeout", "at least the job's timeout"},
		{"total_timeout_ms >= timeout", `{"timeout":2,"options":{"total_timeout_ms":1500}}`, "options.total_timeout_ms", "at least"},
		{"grace_period >= 0", `{"grace_period":-1}`, "grace_period", ">= 0"},
		{"grace_period integer", `{"grace_period":1.5}`, "grace_period", ">= 0"},
		{"heartbeat_timeout positive", `{"heartbeat_timeout":0}`, "heartbeat_timeout", "positive integer"},
		{"heartbeat_timeout string", `{"heartbeat_timeout":"60"}`, "heartbeat_timeout", "positive integer"},
		{"enqueue_ttl positive", `{"enqueue_ttl":0}`, "enqueue_ttl", "positive integer"},
		{"enqueue_ttl_ms positive", `{"options":{"enqueue_ttl_ms":0}}`, "options.enqueue_ttl_ms", "positive integer"},
		{"heartbeat vs visibility", `{"heartbeat_timeout":60,"options":{"visibility_timeout_ms":30000}}`, "", "same value"},
		{"enqueue_ttl vs ms", `{"enqueue_ttl":6,"enqueue_ttl_ms":5000}`, "", "same value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"type":"a.b","args":[],` + strings.TrimPrefix(tc.body, "{")
			_, err := ParseJob([]byte(body))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%s: got %v, want a ValidationError", body, err)
			}
			if (tc.field != "" && ve.Field != tc.field) || !strings.Contains(ve.Rule+" "+ve.Error(), tc.rule) {
				t.Fatalf("%s: field %q rule %q (%v), want field %q and %q", body, ve.Field, ve.Rule, ve, tc.field, tc.rule)
			}
		})
	}
}

// The accepted forms: seconds at the top level, milliseconds as _ms (top
// level or options), grace_period 0, and the clients' zero options.
func TestParseTimeoutForms(t *testing.T) {
	t.Parallel()
	j, err := ParseJob([]byte(`{"type":"a.b","args":[],"timeout":3600,"total_timeout":86400,"enqueue_ttl":7200,
		"grace_period":0,"heartbeat_timeout":120,"options":{"timeout_ms":0,"visibility_timeout_ms":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.TimeoutMs != 3600_000 || j.TotalTimeout != 86400 || j.TotalTimeoutMs != 86400_000 || j.EnqueueTTLMs != 7200_000 ||
		j.GracePeriod == nil || *j.GracePeriod != 0 || *j.GracePeriodMs != 0 || j.HeartbeatTimeoutMs != 120_000 {
		t.Fatalf("parsed %+v", j)
	}
	j, err = ParseJob([]byte(`{"type":"a.b","args":[],"options":{"total_timeout_ms":1500,"grace_period_ms":250,
		"heartbeat_timeout_ms":700,"enqueue_ttl_ms":900},"visibility_timeout":"PT0.7S"}`))
	if err != nil {
		t.Fatal(err)
	}
	if j.TotalTimeout != 2 || j.TotalTimeoutMs != 1500 || *j.GracePeriod != 1 || *j.GracePeriodMs != 250 ||
		j.HeartbeatTimeoutMs != 700 || j.EnqueueTTL != 1 || j.EnqueueTTLMs != 900 {
		t.Fatalf("parsed %+v", j)
	}
	j, err = ParseJob([]byte(`{"type":"a.b","args":[]}`))
	if err != nil || j.GracePeriod != nil || j.TimeoutMs != 0 || j.HeartbeatTimeoutMs != 0 {
		t.Fatalf("unset timeouts must stay unset: %v %+v", err, j)
	}
}

// Any PATCH body or progress update either parses or is a
// ValidationError (a 400 naming the field), or for a progress field over
// its size a TooLargeError (413, issue 31), never a panic; a parsed
// progress is within [0, 1] (PRG-002).
func FuzzParseTimeoutPatchAndProgress(f *testing.F) {
	for _, s := range []string{
		`{"timeout":30,"total_timeout":60}`, `{"enqueue_ttl_ms":300,"grace_period":0}`, `{"total_timeout":null}`,
		`{"visibility_timeout":"PT1M"}`, `{"progress":0.5,"data":{"a":1},"checkpoint":{"o":2}}`, `{"progress":7}`,
		`{"data":{}}`, `{"progress":-1e308}`, `[]`, `{"timeout":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ve *ValidationError
		if p, err := ParseTimeoutPatch(body); err != nil {
			if !errors.As(err, &ve) {
				t.Fatalf("ParseTimeoutPatch error is %T: %v", err, err)
			}
		} else if err := p.Apply(&Job{}); err != nil && !errors.As(err, &ve) {
			t.Fatalf("Apply error is %T: %v", err, err)
		}
		u, err := ParseProgressUpdate(body)
		if err != nil {
			var te *TooLargeError
			if !errors.As(err, &ve) && !errors.As(err, &te) {
				t.Fatalf("ParseProgressUpdate error is %T: %v", err, err)
			}
			return
		}
		if u.Progress != nil && (*u.Progress < 0 || *u.Progress > 1) {
			t.Fatalf("progress %v outside [0, 1]", *u.Progress)
		}
	})
}
