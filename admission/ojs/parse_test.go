package ojs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, body string) *Job {
	t.Helper()
	j, err := ParseJob([]byte(body))
	if err != nil {
		t.Fatalf("ParseJob(%s): %v", body, err)
	}
	return j
}

// errCase is a body that must be rejected with a *ValidationError on field,
// whose message contains every string in contains.
type errCase struct {
	name     string
	body     string
	field    string
	contains []string
}

func runErrCases(t *testing.T, parse func([]byte) error, tests []errCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := parse([]byte(tt.body))
			if err == nil {
				t.Fatalf("parse(%s) succeeded, want error on %q", tt.body, tt.field)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("parse(%s) = %T %v, want *ValidationError", tt.body, err, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			if ve.Field != tt.field {
				t.Errorf("Field = %q, want %q (error: %v)", ve.Field, tt.field, err)
			}
			if ve.Rule == "" {
				t.Errorf("Rule is empty (error: %v)", err)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err.Error(), s)
				}
			}
		})
	}
}

func parseJobErr(b []byte) error { _, err := ParseJob(b); return err }

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func jsonEq(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	if !jsonEqual(got, json.RawMessage(want)) {
		t.Errorf("got JSON %s, want %s", got, want)
	}
}

// ojs-core 5.1/5.2 and http-binding 9.1: a minimal request gets every default.
func TestParseJobDefaults(t *testing.T) {
	t.Parallel()
	j := mustParse(t, `{"type":"email.send","args":["a@example.com",1]}`)
	if j.SpecVersion != "1.0" || j.Type != "email.send" || j.Queue != DefaultQueue {
		t.Errorf("specversion/type/queue = %q/%q/%q", j.SpecVersion, j.Type, j.Queue)
	}
	if err := ValidID(j.ID); err != nil {
		t.Errorf("generated id: %v", err)
	}
	jsonEq(t, j.Args, `["a@example.com",1]`)
	jsonEq(t, j.Meta, `{}`) // ojs-core 5.2 meta default {}
	if j.Priority != DefaultPriority {
		t.Errorf("Priority = %d, want %d (PRI-002)", j.Priority, DefaultPriority)
	}
	if j.State != "" || j.Attempt != 0 || j.CreatedAt != nil {
		t.Errorf("system fields set: state %q attempt %d created %v", j.State, j.Attempt, j.CreatedAt)
	}
	def := DefaultRetryPolicy()
	if j.Retry == nil || !reflect.DeepEqual(*j.Retry, def) {
		t.Errorf("Retry = %+v, want the default %+v (ojs-retry 8, RET-09)", j.Retry, def)
	}
	if j.MaxAttempts != 3 {
		t.Errorf("MaxAttempts = %d, want 3", j.MaxAttempts)
	}
	if j.Timeout != 0 || j.TimeoutMs != 0 || j.HeartbeatTimeoutMs != 0 || j.ScheduledAt != nil ||
		j.ExpiresAt != nil || j.Unique != nil || j.Tags != nil || j.Pending || j.Extra != nil {
		t.Errorf("unexpected optional fields: %+v", j)
	}
}

// What the official Go SDK sends (spec/README.md): everything under options,
// *_ms units, timestamps with a +02:00 offset.
func TestParseJobGoSDK(t *testing.T) {
	t.Parallel()
	body := `{
	  "type": "email.send",
	  "args": ["user@example.com", {"locale": "en"}],
	  "meta": {"trace_id": "abc"},
	  "options": {
	    "queue": "email",
	    "priority": 1,
	    "timeout_ms": 30000,
	    "delay_until": "2026-03-01T11:00:00+02:00",
	    "expires_at": "2026-03-01T20:00:00.250+02:00",
	    "retry": {"max_attempts": 5, "initial_interval_ms": 1500, "backoff_coefficient": 3,
	              "max_interval_ms": 600000, "jitter": false, "non_retryable_errors": ["validation.*"]},
	    "unique": {"key": "user-1", "period_ms": 60000, "on_conflict": "reject"},
	    "tags": ["onboarding", "email"],
	    "visibility_timeout_ms": 45000
	  }
	}`
	j := mustParse(t, body)
	if j.Queue != "email" || j.Priority != 1 {
		t.Errorf("queue/priority = %q/%d", j.Queue, j.Priority)
	}
	if j.TimeoutMs != 30000 || j.Timeout != 30 {
		t.Errorf("timeout = %ds / %dms, want 30s / 30000ms", j.Timeout, j.TimeoutMs)
	}
	if got := j.ExecutionTimeout(time.Hour); got != 30*time.Second {
		t.Errorf("ExecutionTimeout = %v", got)
	}
	if want := mustTime(t, "2026-03-01T09:00:00Z"); j.ScheduledAt == nil || !j.ScheduledAt.Equal(want) ||
		j.ScheduledAt.Location() != time.UTC {
		t.Errorf("ScheduledAt = %v, want %v in UTC", j.ScheduledAt, want)
	}
	if want := mustTime(t, "2026-03-01T18:00:00.250Z"); j.ExpiresAt == nil || !j.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", j.ExpiresAt, want)
	}
	want := RetryPolicy{MaxAttempts: 5, InitialInterval: Duration(1500 * time.Millisecond), BackoffCoefficient: 3,
		MaxInterval: Duration(10 * time.Minute), Jitter: false, NonRetryableErrors: []string{"validation.*"},
		Backoff: BackoffExponential, OnExhaustion: "discard"}
	if !reflect.DeepEqual(*j.Retry, want) {
		t.Errorf("Retry = %+v, want %+v", *j.Retry, want)
	}
	if j.MaxAttempts != 5 {
		t.Errorf("MaxAttempts = %d", j.MaxAttempts)
	}
	jsonEq(t, j.Unique, `{"key":"user-1","period_ms":60000,"on_conflict":"reject"}`)
	jsonEq(t, j.Meta, `{"trace_id":"abc"}`)
	if !reflect.DeepEqual(j.Tags, []string{"onboarding", "email"}) {
		t.Errorf("Tags = %q", j.Tags)
	}
	if j.HeartbeatTimeoutMs != 45000 {
		t.Errorf("HeartbeatTimeoutMs = %d", j.HeartbeatTimeoutMs)
	}
	if j.Extra != nil {
		t.Errorf("Extra = %s, want none: every option is known", j.Extra)
	}
	assertRoundTrip(t, j)
}

// The Go SDK sends its structs' zero values: null slices, a retry policy
// with only max_attempts set, visibility_timeout_ms 0.
func TestParseJobGoSDKZeroValues(t *testing.T) {
	t.Parallel()
	j := mustParse(t, `{"type":"report.generate","args":[],"meta":null,"options":{"queue":"default",
	  "retry":{"max_attempts":4,"initial_interval_ms":0,"backoff_coefficient":0,"max_interval_ms":0,
	  "non_retryable_errors":null},"unique":null,"tags":null,"visibility_timeout_ms":0}}`)
	want := DefaultRetryPolicy()
	want.MaxAttempts = 4
	if !reflect.DeepEqual(*j.Retry, want) {
		t.Errorf("Retry = %+v, want %+v", *j.Retry, want)
	}
	if j.HeartbeatTimeoutMs != 0 || j.Unique != nil || j.Tags != nil {
		t.Errorf("zero values kept: %+v", j)
	}
	jsonEq(t, j.Meta, `{}`)
}

// spec/README.md decision 2: each setting is accepted at the top level and
// in options, in either unit form.
func TestParseJobPlacements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  string
		check func(*Job) bool
	}{
		{"queue top-level (core 5.1)", `{"queue":"mail.high-1"}`, func(j *Job) bool { return j.Queue == "mail.high-1" }},
		{"queue options (binding 9.1)", `{"options":{"queue":"0mail"}}`, func(j *Job) bool { return j.Queue == "0mail" }},
		{"priority top-level PRI-001", `{"priority":0}`, func(j *Job) bool { return j.Priority == 0 }},
		{"priority options PRI-001", `{"options":{"priority":7}}`, func(j *Job) bool { return j.Priority == 7 }},
		{"priority 255 PRI-006", `{"priority":255}`, func(j *Job) bool { return j.Priority == 255 }},
		{"priority max", `{"priority":999}`, func(j *Job) bool { return j.Priority == MaxPriority }},
		{"priority 2.0 is an integer", `{"priority":2.0}`, func(j *Job) bool { return j.Priority == 2 }},
		{"priority 1e1 is an integer", `{"priority":1e1}`, func(j *Job) bool { return j.Priority == 10 }},
		{"priority null is absent", `{"priority":null}`, func(j *Job) bool { return j.Priority == DefaultPriority }},
		{"timeout seconds (core 5.2)", `{"timeout":300}`, func(j *Job) bool { return j.Timeout == 300 && j.TimeoutMs == 300000 }},
		{"options.timeout_ms 0 is the default (clients send it)", `{"options":{"timeout_ms":0}}`,
			func(j *Job) bool { return j.Timeout == 0 && j.TimeoutMs == 0 }},
		{"timeout_ms options", `{"options":{"timeout_ms":1500}}`, func(j *Job) bool { return j.Timeout == 2 && j.TimeoutMs == 1500 }},
		{"timeout_ms top-level", `{"timeout_ms":2000}`, func(j *Job) bool { return j.Timeout == 2 && j.TimeoutMs == 2000 }},
		{"scheduled_at top-level", `{"scheduled_at":"2026-03-15T09:30:00+02:00"}`,
			func(j *Job) bool { return j.ScheduledAt.Equal(time.Date(2026, 3, 15, 7, 30, 0, 0, time.UTC)) }},
		{"delay_until options", `{"options":{"delay_until":"2026-03-15T07:30:00Z"}}`,
			func(j *Job) bool { return j.ScheduledAt.Equal(time.Date(2026, 3, 15, 7, 30, 0, 0, time.UTC)) }},
		{"scheduled_at options (openapi alias)", `{"options":{"scheduled_at":"2026-03-15T07:30:00-00:30"}}`,
			func(j *Job) bool { return j.ScheduledAt.Equal(time.Date(2026, 3, 15, 8, 0, 0, 0, time.UTC)) }},
		{"scheduled_at truncated to ms", `{"scheduled_at":"2026-03-15T07:30:00.123456789Z"}`,
			func(j *Job) bool { return j.ScheduledAt.Equal(time.Date(2026, 3, 15, 7, 30, 0, 123e6, time.UTC)) }},
		{"expires_at top-level", `{"expires_at":"2026-03-15T09:30:00-05:00"}`,
			func(j *Job) bool { return j.ExpiresAt.Equal(time.Date(2026, 3, 15, 14, 30, 0, 0, time.UTC)) }},
		{"expires_at options", `{"options":{"expires_at":"2026-03-15T14:30:00Z"}}`,
			func(j *Job) bool { return j.ExpiresAt.Equal(time.Date(2026, 3, 15, 14, 30, 0, 0, time.UTC)) }},
		{"visibility_timeout_ms options", `{"options":{"visibility_timeout_ms":60000}}`,
			func(j *Job) bool { return j.HeartbeatTimeoutMs == 60000 }},
		{"visibility_timeout_ms top-level", `{"visibility_timeout_ms":60000}`,
			func(j *Job) bool { return j.HeartbeatTimeoutMs == 60000 }},
		{"visibility_timeout seconds (json-format 3.1)", `{"visibility_timeout":60}`,
			func(j *Job) bool { return j.HeartbeatTimeoutMs == 60000 }},
		{"visibility_timeout ISO (openapi)", `{"options":{"visibility_timeout":"PT1M"}}`,
			func(j *Job) bool { return j.HeartbeatTimeoutMs == 60000 }},
		{"pending options (binding 9.1)", `{"options":{"pending":true}}`, func(j *Job) bool { return j.Pending }},
		{"pending false", `{"options":{"pending":false}}`, func(j *Job) bool { return !j.Pending }},
		{"tags top-level", `{"tags":["a","b"]}`, func(j *Job) bool { return reflect.DeepEqual(j.Tags, []string{"a", "b"}) }},
		{"tags options", `{"options":{"tags":["a"]}}`, func(j *Job) bool { return reflect.DeepEqual(j.Tags, []string{"a"}) }},
		{"tags empty is none", `{"tags":[]}`, func(j *Job) bool { return j.Tags == nil }},
		{"unique top-level", `{"unique":{"key":["to"]}}`, func(j *Job) bool { return jsonEqual(j.Unique, []byte(`{"key":["to"]}`)) }},
		{"unique options", `{"options":{"unique":{}}}`, func(j *Job) bool { return string(j.Unique) == `{}` }},
		{"schema", `{"schema":"urn:ojs:schema:email.send:v1"}`, func(j *Job) bool { return j.Schema == "urn:ojs:schema:email.send:v1" }},
		{"meta object", `{"meta":{"tenant_id":"t1"}}`, func(j *Job) bool { return jsonEqual(j.Meta, []byte(`{"tenant_id":"t1"}`)) }},
		{"options.metadata merged into meta (openapi)", `{"meta":{"a":1,"b":2},"options":{"metadata":{"b":2,"c":3}}}`,
			func(j *Job) bool { return jsonEqual(j.Meta, []byte(`{"a":1,"b":2,"c":3}`)) }},
		{"options.metadata alone", `{"options":{"metadata":{"c":3}}}`, func(j *Job) bool { return jsonEqual(j.Meta, []byte(`{"c":3}`)) }},
		{"options null", `{"options":null}`, func(j *Job) bool { return j.Queue == DefaultQueue }},
		{"specversion 1.0", `{"specversion":"1.0"}`, func(j *Job) bool { return j.SpecVersion == "1.0" }},
		{"specversion 1.0.0-rc.1 (Go SDK's OJS-Version)", `{"specversion":"1.0.0-rc.1"}`, func(j *Job) bool { return j.SpecVersion == "1.0" }},
		{"specversion 1.0.2", `{"specversion":"1.0.2"}`, func(j *Job) bool { return j.SpecVersion == "1.0" }},
		{"client id kept (core 5.1)", `{"id":"019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"}`,
			func(j *Job) bool { return j.ID == "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f" }},
		{"null id generates one", `{"id":null}`, func(j *Job) bool { return ValidID(j.ID) == nil && j.ServerID }},
		{"type with digits and underscores", `{"type":"data.etl_2.transform"}`, func(j *Job) bool { return j.Type == "data.etl_2.transform" }},
		{"type of 255 characters", `{"type":"` + strings.Repeat("a", 255) + `"}`, func(j *Job) bool { return len(j.Type) == 255 }},
		{"queue of 128 characters", `{"queue":"` + strings.Repeat("q", 128) + `"}`, func(j *Job) bool { return len(j.Queue) == 128 }},
		{"type with escapes", `{"type":"email\u002esend"}`, func(j *Job) bool { return j.Type == "email.send" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := mustParse(t, withTypeArgs(tt.body))
			if !tt.check(j) {
				b, _ := json.Marshal(j)
				t.Errorf("check failed for %s: parsed %s", tt.body, b)
			}
			assertRoundTrip(t, j)
		})
	}
}

// withTypeArgs adds "type" and "args" to a body that lacks them.
func withTypeArgs(body string) string {
	if !strings.Contains(body, `"type"`) {
		body = `{"type":"test.job",` + body[1:]
	}
	if !strings.Contains(body, `"args"`) {
		body = `{"args":[],` + body[1:]
	}
	return strings.Replace(body, `,}`, `}`, 1)
}

// TestParseJobTypeHyphensAndDigits: clients send types whose segments hold
// hyphens and digits after the first letter (issue 16, core 5.1 widened);
// the longest accepted type is 255 characters.
func TestParseJobTypeHyphensAndDigits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 255)
	for _, typ := range []string{"retry.test.exponential-backoff", "email.send-v2", "a-b_c-9.x1", "e--x", "email.send-", long} {
		j := mustParse(t, `{"type":"`+typ+`","args":[]}`)
		if j.Type != typ {
			t.Errorf("Type = %q, want %q", j.Type, typ)
		}
	}
}

func TestParseJobRejects(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 256)
	tests := []errCase{
		// Body (binding 6.1).
		{"body not JSON", `{"type":`, "", []string{"not valid JSON"}},
		{"body empty", ``, "", []string{"not valid JSON"}},
		{"body array", `[{"type":"a","args":[]}]`, "", []string{"JSON object", "array"}},
		{"body string", `"job"`, "", []string{"JSON object", "string"}},
		{"trailing garbage", `{"type":"a","args":[]} x`, "", []string{"not valid JSON"}},
		// type (core 5.1).
		{"type missing L0-002", `{"args":[]}`, "type", []string{"'type' is required"}},
		{"type null", `{"type":null,"args":[]}`, "type", []string{"required"}},
		{"type number", `{"type":5,"args":[]}`, "type", []string{"received number"}},
		{"type empty", `{"type":"","args":[]}`, "type", []string{`received ""`}},
		{"type uppercase", `{"type":"Email.send","args":[]}`, "type", []string{`"Email.send"`}},
		{"type leading dot", `{"type":".email","args":[]}`, "type", nil},
		{"type trailing dot", `{"type":"email.","args":[]}`, "type", nil},
		{"type double dot", `{"type":"email..send","args":[]}`, "type", nil},
		{"type segment starts with digit", `{"type":"email.2send","args":[]}`, "type", nil},
		{"type segment starts with underscore", `{"type":"_email","args":[]}`, "type", nil},
		{"type segment starts with hyphen", `{"type":"email.-send","args":[]}`, "type", []string{"[a-z][a-z0-9_-]*"}},
		{"type space", `{"type":"email send","args":[]}`, "type", []string{"[a-z][a-z0-9_-]*"}},
		{"type star", `{"type":"email.*","args":[]}`, "type", nil},
		{"type gt", `{"type":"email.>","args":[]}`, "type", nil},
		{"type star inside", `{"type":"email.se*nd","args":[]}`, "type", nil},
		{"type too long", `{"type":"` + long + `","args":[]}`, "type", []string{"255"}},
		// args (core 5.1, binding 9.1).
		{"args missing", `{"type":"a"}`, "args", []string{"'args' is required"}},
		{"args object", `{"type":"a","args":{"to":"x"}}`, "args", []string{"JSON array", "received object"}},
		{"args string", `{"type":"a","args":"x"}`, "args", []string{"JSON array", "received string"}},
		{"args number", `{"type":"a","args":1}`, "args", []string{"received number"}},
		{"args null", `{"type":"a","args":null}`, "args", []string{"received null"}},
		// meta, options, schema.
		{"meta array", `{"type":"a","args":[],"meta":[1]}`, "meta", []string{"JSON object", "received array"}},
		{"meta string", `{"type":"a","args":[],"meta":"x"}`, "meta", []string{"received string"}},
		{"options.metadata string", `{"type":"a","args":[],"options":{"metadata":"x"}}`, "options.metadata", nil},
		{"options array", `{"type":"a","args":[],"options":[]}`, "options", []string{"JSON object", "received array"}},
		{"schema number", `{"type":"a","args":[],"schema":1}`, "schema", nil},
		// specversion (core 5.1).
		{"specversion 2.0", `{"specversion":"2.0","type":"a","args":[]}`, "specversion", []string{`"2.0"`}},
		{"specversion 1.1", `{"specversion":"1.1","type":"a","args":[]}`, "specversion", nil},
		{"specversion 1.0 prefix only", `{"specversion":"1.0.","type":"a","args":[]}`, "specversion", nil},
		{"specversion 1.00", `{"specversion":"1.00","type":"a","args":[]}`, "specversion", nil},
		{"specversion number", `{"specversion":1.0,"type":"a","args":[]}`, "specversion", []string{"received number"}},
		// id (core 5.1).
		{"id v4", `{"id":"9b2c7a3e-2f4d-4c1e-8a6b-1d2e3f4a5b6c","type":"a","args":[]}`, "id", []string{"UUIDv7"}},
		{"id garbage", `{"id":"job-1","type":"a","args":[]}`, "id", []string{`"job-1"`}},
		// Core 5.1: a client id must be a lowercase UUIDv7; uppercase is refused, not lowercased.
		{"id uppercase core 5.1", `{"id":"019461A8-1A2B-7C3D-8E4F-5A6B7C8D9E0F","type":"a","args":[]}`, "id", []string{"lowercase UUIDv7", "019461A8"}},
		{"id mixed case core 5.1", `{"id":"019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0F","type":"a","args":[]}`, "id", []string{"lowercase UUIDv7"}},
		{"id number", `{"id":1,"type":"a","args":[]}`, "id", []string{"received number"}},
		// issue 32: an empty id is malformed like any other.
		{"id empty issue 32", `{"id":"","type":"a","args":[]}`, "id", []string{"lowercase UUIDv7", `""`}},
		// queue (core 5.1).
		{"queue uppercase", `{"type":"a","args":[],"queue":"Email"}`, "queue", []string{`"Email"`}},
		{"queue leading hyphen", `{"type":"a","args":[],"queue":"-q"}`, "queue", nil},
		{"queue leading dot", `{"type":"a","args":[],"options":{"queue":".q"}}`, "options.queue", nil},
		{"queue underscore", `{"type":"a","args":[],"queue":"my_queue"}`, "queue", nil},
		{"queue empty", `{"type":"a","args":[],"queue":""}`, "queue", nil},
		{"queue too long", `{"type":"a","args":[],"queue":"` + strings.Repeat("q", 129) + `"}`, "queue", []string{"128"}},
		{"queue number", `{"type":"a","args":[],"queue":1}`, "queue", []string{"received number"}},
		// priority (ojs-priority PRI-001, PRI-005).
		{"priority negative PRI-005", `{"type":"a","args":[],"priority":-1}`, "priority", []string{"between 0 and 999", "received -1"}},
		{"priority negative in options PRI-005", `{"type":"a","args":[],"options":{"priority":-10}}`, "options.priority", nil},
		{"priority fraction", `{"type":"a","args":[],"priority":1.5}`, "priority", []string{"integer", "received 1.5"}},
		{"priority string", `{"type":"a","args":[],"priority":"high"}`, "priority", []string{"received string"}},
		{"priority too big", `{"type":"a","args":[],"priority":1000}`, "priority", nil},
		{"priority huge", `{"type":"a","args":[],"priority":1e300}`, "priority", nil},
		// tags.
		{"tags string", `{"type":"a","args":[],"tags":"a"}`, "tags", []string{"array of strings"}},
		{"tags numbers", `{"type":"a","args":[],"options":{"tags":[1]}}`, "options.tags", nil},
		// timeouts (core 5.2, binding 9.1).
		{"timeout negative", `{"type":"a","args":[],"timeout":-1}`, "timeout", []string{"seconds"}},
		{"timeout fraction", `{"type":"a","args":[],"timeout":1.5}`, "timeout", nil},
		{"timeout string", `{"type":"a","args":[],"timeout":"30s"}`, "timeout", []string{"received string"}},
		{"timeout_ms negative", `{"type":"a","args":[],"options":{"timeout_ms":-5}}`, "options.timeout_ms", []string{"milliseconds"}},
		{"timeout_ms overflow", `{"type":"a","args":[],"options":{"timeout_ms":9223372036854775807}}`, "options.timeout_ms", nil},
		{"visibility_timeout_ms negative", `{"type":"a","args":[],"options":{"visibility_timeout_ms":-1}}`, "options.visibility_timeout_ms", nil},
		{"visibility_timeout_ms string", `{"type":"a","args":[],"options":{"visibility_timeout_ms":"30000"}}`, "options.visibility_timeout_ms", nil},
		{"visibility_timeout bad ISO", `{"type":"a","args":[],"options":{"visibility_timeout":"30s"}}`, "options.visibility_timeout", []string{"ISO 8601"}},
		// timestamps (core 5.5 rule 2, json-format 5.3).
		{"scheduled_at without zone", `{"type":"a","args":[],"scheduled_at":"2026-03-01T09:00:00"}`, "scheduled_at", []string{"time zone"}},
		{"scheduled_at date only", `{"type":"a","args":[],"scheduled_at":"2026-03-01"}`, "scheduled_at", nil},
		{"scheduled_at epoch number", `{"type":"a","args":[],"scheduled_at":1767225600}`, "scheduled_at", []string{"received number"}},
		{"delay_until garbage", `{"type":"a","args":[],"options":{"delay_until":"tomorrow"}}`, "options.delay_until", nil},
		{"delay_until relative without duration", `{"type":"a","args":[],"options":{"delay_until":"+5s"}}`, "options.delay_until", []string{"+PT5S"}},
		{"delay_until relative negative", `{"type":"a","args":[],"options":{"delay_until":"+-PT5S"}}`, "options.delay_until", nil},
		{"delay_until minus", `{"type":"a","args":[],"options":{"delay_until":"-PT5S"}}`, "options.delay_until", nil},
		{"expires_at relative past 9999", `{"type":"a","args":[],"expires_at":"+P9999999D"}`, "expires_at", nil},
		{"expires_at bad month", `{"type":"a","args":[],"expires_at":"2026-13-01T00:00:00Z"}`, "expires_at", nil},
		{"expires_at year past 9999 in UTC", `{"type":"a","args":[],"expires_at":"9999-12-31T23:00:00-02:00"}`, "expires_at", nil},
		{"pending string", `{"type":"a","args":[],"options":{"pending":"yes"}}`, "options.pending", []string{"boolean"}},
		// unique.
		{"unique array", `{"type":"a","args":[],"unique":["a"]}`, "unique", []string{"JSON object"}},
		{"unique string options", `{"type":"a","args":[],"options":{"unique":"k"}}`, "options.unique", nil},
	}
	runErrCases(t, parseJobErr, tests)
}

// ojs-retry 8.1 partial overrides, both unit forms in both places, 11.1
// validation.
func TestParseJobRetry(t *testing.T) {
	t.Parallel()
	def := DefaultRetryPolicy()
	with := func(f func(*RetryPolicy)) RetryPolicy {
		p := DefaultRetryPolicy()
		f(&p)
		return p
	}
	tests := []struct {
		name string
		body string
		want RetryPolicy
	}{
		{"none: default RET-09", `{}`, def},
		{"empty object", `{"retry":{}}`, def},
		{"partial override RET-10 (retry 8.1 example)", `{"retry":{"max_attempts":10,"on_exhaustion":"dead_letter"}}`,
			with(func(p *RetryPolicy) { p.MaxAttempts = 10; p.OnExhaustion = "dead_letter" })},
		{"max_attempts 0 means no retry (retry 2.2)", `{"options":{"retry":{"max_attempts":0}}}`,
			with(func(p *RetryPolicy) { p.MaxAttempts = 0 })},
		{"ISO form top-level", `{"retry":{"initial_interval":"PT0.5S","max_interval":"PT1H","backoff_coefficient":1.5}}`,
			with(func(p *RetryPolicy) {
				p.InitialInterval = Duration(500 * time.Millisecond)
				p.MaxInterval = Duration(time.Hour)
				p.BackoffCoefficient = 1.5
			})},
		{"ISO form in options (conformance L1-005)", `{"options":{"retry":{"max_attempts":3,"initial_interval":"PT1S","backoff_coefficient":2.0}}}`, def},
		{"ms form top-level", `{"retry":{"initial_interval_ms":250,"max_interval_ms":1000}}`,
			with(func(p *RetryPolicy) {
				p.InitialInterval = Duration(250 * time.Millisecond)
				p.MaxInterval = Duration(time.Second)
			})},
		{"options.retry_policy alias (openapi)", `{"options":{"retry_policy":{"jitter":false}}}`,
			with(func(p *RetryPolicy) { p.Jitter = false })},
		{"fields merged across places", `{"retry":{"max_attempts":7},"options":{"retry":{"jitter":false}}}`,
			with(func(p *RetryPolicy) { p.MaxAttempts = 7; p.Jitter = false })},
		{"same value in both unit forms", `{"retry":{"initial_interval":"PT2S"},"options":{"retry":{"initial_interval_ms":2000}}}`,
			with(func(p *RetryPolicy) { p.InitialInterval = Duration(2 * time.Second) })},
		{"backoff_type linear", `{"retry":{"backoff_type":"linear"}}`, with(func(p *RetryPolicy) { p.Backoff = BackoffLinear })},
		{"backoff_type polynomial", `{"retry":{"backoff_type":"polynomial","backoff_coefficient":4}}`,
			with(func(p *RetryPolicy) { p.Backoff = BackoffPolynomial; p.BackoffCoefficient = 4 })},
		{"backoff_type none", `{"retry":{"backoff_type":"none"}}`, with(func(p *RetryPolicy) { p.Backoff = BackoffNone })},
		{"backoff_strategy constant (openapi)", `{"retry":{"backoff_strategy":"constant"}}`, with(func(p *RetryPolicy) { p.Backoff = BackoffNone })},
		{"backoff_coefficient 1.0 allowed", `{"retry":{"backoff_coefficient":1.0}}`, with(func(p *RetryPolicy) { p.BackoffCoefficient = 1 })},
		{"max_interval equal to initial", `{"retry":{"initial_interval":"PT10S","max_interval":"PT10S"}}`,
			with(func(p *RetryPolicy) {
				p.InitialInterval = Duration(10 * time.Second)
				p.MaxInterval = Duration(10 * time.Second)
			})},
		{"non_retryable_errors", `{"retry":{"non_retryable_errors":["auth.*","resource.not_found"]}}`,
			with(func(p *RetryPolicy) { p.NonRetryableErrors = []string{"auth.*", "resource.not_found"} })},
		{"non_retryable_errors null", `{"retry":{"non_retryable_errors":null}}`, def},
		{"days and weeks", `{"retry":{"max_interval":"P1W","initial_interval":"P1D"}}`,
			with(func(p *RetryPolicy) {
				p.InitialInterval = Duration(24 * time.Hour)
				p.MaxInterval = Duration(7 * 24 * time.Hour)
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := mustParse(t, withTypeArgs(tt.body))
			if !reflect.DeepEqual(*j.Retry, tt.want) {
				t.Errorf("Retry = %+v\nwant    %+v", *j.Retry, tt.want)
			}
			if j.MaxAttempts != tt.want.MaxAttempts {
				t.Errorf("MaxAttempts = %d, want %d", j.MaxAttempts, tt.want.MaxAttempts)
			}
			assertRoundTrip(t, j)
		})
	}
}

// ojs-retry 11.1: invalid policies are rejected at enqueue (RET-16).
func TestParseJobRetryRejects(t *testing.T) {
	t.Parallel()
	b := func(retry string) string { return `{"type":"a","args":[],"options":{"retry":` + retry + `}}` }
	tests := []errCase{
		{"retry not an object", b(`5`), "options.retry", []string{"JSON object", "received number"}},
		{"retry true (Sidekiq style)", `{"type":"a","args":[],"retry":true}`, "retry", []string{"received boolean"}},
		{"max_attempts negative", b(`{"max_attempts":-1}`), "options.retry.max_attempts", []string{">= 0"}},
		{"max_attempts fraction", b(`{"max_attempts":2.5}`), "options.retry.max_attempts", nil},
		{"max_attempts string", b(`{"max_attempts":"3"}`), "options.retry.max_attempts", []string{"received string"}},
		{"initial_interval not ISO (RET-19)", b(`{"initial_interval":"1s"}`), "options.retry.initial_interval", []string{"ISO 8601"}},
		{"initial_interval zero", b(`{"initial_interval":"PT0S"}`), "options.retry.initial_interval", []string{"> 0"}},
		{"initial_interval number", b(`{"initial_interval":1000}`), "options.retry.initial_interval", []string{"received number"}},
		{"initial_interval_ms negative", b(`{"initial_interval_ms":-1}`), "options.retry.initial_interval_ms", nil},
		{"initial_interval_ms string", b(`{"initial_interval_ms":"PT1S"}`), "options.retry.initial_interval_ms", []string{"received string"}},
		{"max_interval months", b(`{"max_interval":"P1M"}`), "options.retry.max_interval", nil},
		{"max_interval below initial", b(`{"initial_interval":"PT10S","max_interval":"PT5S"}`), "options.retry.max_interval",
			[]string{"initial_interval", "PT5S < PT10S"}},
		{"initial above default max", b(`{"initial_interval":"PT10M"}`), "options.retry.initial_interval", []string{"PT5M < PT10M"}},
		{"backoff_coefficient below 1 (RET-03)", b(`{"backoff_coefficient":0.5}`), "options.retry.backoff_coefficient", []string{">= 1.0"}},
		{"backoff_coefficient negative", b(`{"backoff_coefficient":-2}`), "options.retry.backoff_coefficient", nil},
		{"backoff_coefficient string", b(`{"backoff_coefficient":"2"}`), "options.retry.backoff_coefficient", []string{"received string"}},
		{"backoff_coefficient overflow", b(`{"backoff_coefficient":1e999}`), "options.retry.backoff_coefficient", nil},
		{"jitter string", b(`{"jitter":"true"}`), "options.retry.jitter", []string{"boolean"}},
		{"non_retryable_errors string", b(`{"non_retryable_errors":"auth.*"}`), "options.retry.non_retryable_errors", nil},
		{"non_retryable_errors numbers", b(`{"non_retryable_errors":[1]}`), "options.retry.non_retryable_errors", nil},
		{"non_retryable_errors empty string", b(`{"non_retryable_errors":[""]}`), "options.retry.non_retryable_errors", nil},
		{"on_exhaustion unknown", b(`{"on_exhaustion":"retry_forever"}`), "options.retry.on_exhaustion", []string{"dead_letter"}},
		{"backoff_type unknown", b(`{"backoff_type":"fibonacci"}`), "options.retry.backoff_type", []string{"exponential"}},
		{"unknown retry field (schema additionalProperties false)", b(`{"max_attempt":3}`), "options.retry.max_attempt",
			[]string{"not a retry policy field"}},
		{"top-level retry field error path", `{"type":"a","args":[],"retry":{"max_attempts":-3}}`, "retry.max_attempts", nil},
	}
	runErrCases(t, parseJobErr, tests)
}

// Issue 32: a retry policy's values that break ojs-retry.md 11.1 are
// Semantic (the bindings answer 422 validation_error); a retry that is
// not an object, an unknown key in it, or two forms that disagree are not
// (400, the request's shape).
func TestParseJobRetryRejectsSemantic(t *testing.T) {
	t.Parallel()
	b := func(retry string) string { return `{"type":"a","args":[],"options":{"retry":` + retry + `}}` }
	for body, want := range map[string]bool{
		b(`{"max_attempts":-1}`):                                true,
		b(`{"backoff_coefficient":0.5}`):                        true,
		b(`{"initial_interval":"PT10S","max_interval":"PT5S"}`): true,
		b(`{"on_exhaustion":"retry_forever"}`):                  true,
		b(`{"jitter":"true"}`):                                  true,
		`{"type":"a","args":[],"retry":{"max_attempts":-3}}`:    true,
		b(`5`):                 false,
		b(`{"max_attempt":3}`): false,
		`{"type":"a","args":[],"retry":{"max_attempts":2},"options":{"retry":{"max_attempts":3}}}`: false,
		`{"type":"a","args":[],"priority":-1}`:                                                     false,
	} {
		_, err := ParseJob([]byte(body))
		ve, ok := errors.AsType[*ValidationError](err)
		if !ok {
			t.Errorf("ParseJob(%s) = %v, want a *ValidationError", body, err)
			continue
		}
		if ve.Semantic != want {
			t.Errorf("ParseJob(%s): %v Semantic %v, want %v", body, ve, ve.Semantic, want)
		}
	}
}

// spec/README.md decision 2: one setting in two places or forms with
// different values is a 400 naming both fields; equal values are fine.
func TestParseJobConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		body         string
		field, other string
	}{
		{"queue", `{"queue":"a","options":{"queue":"b"}}`, "options.queue", "queue"},
		{"priority PRI-001", `{"priority":1,"options":{"priority":3}}`, "options.priority", "priority"},
		{"timeout vs timeout_ms", `{"timeout":30,"options":{"timeout_ms":20000}}`, "timeout", "options.timeout_ms"},
		{"timeout vs rounded-up ms", `{"timeout":1,"options":{"timeout_ms":1500}}`, "timeout", "options.timeout_ms"},
		{"timeout_ms top vs options", `{"timeout_ms":1000,"options":{"timeout_ms":2000}}`, "timeout_ms", "options.timeout_ms"},
		{"scheduled_at vs delay_until", `{"scheduled_at":"2026-03-01T09:00:00Z","options":{"delay_until":"2026-03-01T09:00:01Z"}}`,
			"options.delay_until", "scheduled_at"},
		{"delay_until vs options.scheduled_at", `{"options":{"delay_until":"2026-03-01T09:00:00Z","scheduled_at":"2026-03-01T10:00:00Z"}}`,
			"options.scheduled_at", "options.delay_until"},
		{"expires_at", `{"expires_at":"2026-03-01T09:00:00Z","options":{"expires_at":"2026-03-02T09:00:00Z"}}`,
			"options.expires_at", "expires_at"},
		{"visibility ms vs seconds", `{"visibility_timeout":30,"options":{"visibility_timeout_ms":60000}}`,
			"visibility_timeout", "options.visibility_timeout_ms"},
		{"visibility ms vs ISO", `{"options":{"visibility_timeout_ms":1000,"visibility_timeout":"PT2S"}}`,
			"options.visibility_timeout", "options.visibility_timeout_ms"},
		{"tags", `{"tags":["a"],"options":{"tags":["b"]}}`, "options.tags", "tags"},
		{"unique", `{"unique":{"key":"a"},"options":{"unique":{"key":"b"}}}`, "options.unique", "unique"},
		{"meta vs options.metadata key", `{"meta":{"k":1},"options":{"metadata":{"k":2}}}`, "options.metadata.k", "meta.k"},
		{"retry max_attempts", `{"retry":{"max_attempts":3},"options":{"retry":{"max_attempts":4}}}`,
			"options.retry.max_attempts", "retry.max_attempts"},
		{"retry interval ms vs ISO, same object", `{"options":{"retry":{"initial_interval_ms":1000,"initial_interval":"PT2S"}}}`,
			"options.retry.initial_interval", "options.retry.initial_interval_ms"},
		{"retry interval ISO vs ms, two places", `{"retry":{"max_interval":"PT1M"},"options":{"retry":{"max_interval_ms":30000}}}`,
			"retry.max_interval", "options.retry.max_interval_ms"},
		{"retry vs retry_policy", `{"options":{"retry":{"jitter":true},"retry_policy":{"jitter":false}}}`,
			"options.retry_policy.jitter", "options.retry.jitter"},
		{"backoff_type vs backoff_strategy", `{"retry":{"backoff_type":"linear","backoff_strategy":"exponential"}}`,
			"retry.backoff_strategy", "retry.backoff_type"},
		{"non_retryable_errors", `{"retry":{"non_retryable_errors":["a"]},"options":{"retry":{"non_retryable_errors":["b"]}}}`,
			"options.retry.non_retryable_errors", "retry.non_retryable_errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseJob([]byte(withTypeArgs(tt.body)))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseJob = %v, want a *ValidationError", err)
			}
			msg := err.Error()
			if ve.Field != tt.field && ve.Field != tt.other {
				t.Errorf("Field = %q, want %q or %q", ve.Field, tt.field, tt.other)
			}
			for _, f := range []string{tt.field, tt.other} {
				if !strings.Contains(msg, "'"+f+"'") {
					t.Errorf("message %q does not name '%s'", msg, f)
				}
			}
		})
	}
}

func TestParseJobSameValueTwice(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"queue":"a","options":{"queue":"a"}}`,
		`{"priority":4,"options":{"priority":4.0}}`,
		`{"timeout":30,"options":{"timeout_ms":30000}}`,
		`{"timeout":2,"options":{"timeout_ms":1500}}`, // seconds cannot say 1.5 s: 2 agrees
		`{"scheduled_at":"2026-03-01T09:00:00Z","options":{"delay_until":"2026-03-01T11:00:00+02:00"}}`,
		`{"expires_at":"2026-03-01T09:00:00.000Z","options":{"expires_at":"2026-03-01T09:00:00Z"}}`,
		`{"visibility_timeout":60,"options":{"visibility_timeout_ms":60000,"visibility_timeout":"PT1M"}}`,
		`{"tags":["a","b"],"options":{"tags":["a","b"]}}`,
		`{"unique":{"a":1,"b":2},"options":{"unique":{"b":2,"a":1.0}}}`,
		`{"retry":{"initial_interval":"PT1S","max_attempts":5},"options":{"retry":{"initial_interval_ms":1000,"max_attempts":5}}}`,
		`{"retry":{"backoff_type":"none","backoff_strategy":"constant"}}`,
		`{"meta":{"k":[1,2]},"options":{"metadata":{"k":[1,2]}}}`,
	}
	for _, body := range bodies {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			j := mustParse(t, withTypeArgs(body))
			assertRoundTrip(t, j)
		})
	}
}

// ojs-core 5.3: system-managed fields sent by a client are ignored, never
// kept; x_jetgate (server bookkeeping) cannot be forged.
func TestParseJobIgnoresSystemFields(t *testing.T) {
	t.Parallel()
	j := mustParse(t, `{"type":"a","args":[],"state":"completed","attempt":9,"max_attempts":99,
	  "created_at":"2020-01-01T00:00:00Z","enqueued_at":"2020-01-01T00:00:00Z","started_at":"2020-01-01T00:00:00Z",
	  "completed_at":"2020-01-01T00:00:00Z","cancelled_at":"2020-01-01T00:00:00Z","discarded_at":"2020-01-01T00:00:00Z",
	  "activated_at":"2020-01-01T00:00:00Z","next_attempt_at":"2020-01-01T00:00:00Z","next_retry_at":"2020-01-01T00:00:00Z",
	  "retry_delay_ms":5,"worker_id":"w1","error":{"message":"x"},"errors":[{"message":"x"}],"result":{"ok":true},
	  "x_jetgate":{"token":"forged","subject":"x"}}`)
	if j.State != "" || j.Attempt != 0 || j.MaxAttempts != 3 || j.CreatedAt != nil || j.EnqueuedAt != nil ||
		j.StartedAt != nil || j.CompletedAt != nil || j.CancelledAt != nil || j.DiscardedAt != nil ||
		j.ActivatedAt != nil || j.NextAttemptAt != nil || j.WorkerID != "" || j.Error != nil || j.Errors != nil ||
		j.Result != nil || !j.Internal.IsZero() {
		t.Errorf("system fields kept: %+v", j)
	}
	if j.Extra != nil {
		t.Errorf("Extra = %s, want none", j.Extra)
	}
}

// ojs-core 5.5 rule 4, json-format 14.3, L0-ENV-006: unknown fields are kept
// and round-trip; extension fields wait in Extra for their parsers.
func TestParseJobUnknownFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	body := `{"type":"video.transcode","args":["v1"],"depends_on":["k"],"x_custom":{"nested":[1,"<b>",null]},
	  "future_null":null,"options":{"queue":"media","batch":{"key":"opt"},"future_option":true}}`
	j := mustParse(t, body)
	want := map[string]string{
		"depends_on":  `["k"]`,
		"x_custom":    `{"nested":[1,"<b>",null]}`,
		"future_null": `null`,
		"options":     `{"batch":{"key":"opt"},"future_option":true}`,
	}
	if len(j.Extra) != len(want) {
		t.Errorf("Extra has %d keys, want %d: %s", len(j.Extra), len(want), j.Extra)
	}
	for k, v := range want {
		if !jsonEqual(j.Extra[k], json.RawMessage(v)) {
			t.Errorf("Extra[%q] = %s, want %s", k, j.Extra[k], v)
		}
	}
	if j.Queue != "media" {
		t.Errorf("Queue = %q", j.Queue)
	}

	// Stored and read back as a record (Job.MarshalJSON / UnmarshalJSON).
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var stored Job
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !jsonEqual(stored.Extra[k], json.RawMessage(v)) {
			t.Errorf("record Extra[%q] = %s, want %s", k, stored.Extra[k], v)
		}
	}
	// Shown to a client and sent back: the same job.
	assertRoundTrip(t, j)
}

// assertRoundTrip checks that j marshals and parses back to the same job:
// what GET shows can be enqueued again unchanged.
func assertRoundTrip(t *testing.T, j *Job) {
	t.Helper()
	b1, err := json.Marshal(j)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	j2, err := ParseJob(b1)
	if err != nil {
		t.Fatalf("re-parse of %s: %v", b1, err)
	}
	b2, err := json.Marshal(j2)
	if err != nil {
		t.Fatalf("marshal again: %v", err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("round trip changed the job:\n first %s\nsecond %s", b1, b2)
	}
	if !reflect.DeepEqual(j.Retry, j2.Retry) || !reflect.DeepEqual(j.Tags, j2.Tags) ||
		j.ID != j2.ID || j.TimeoutMs != j2.TimeoutMs || len(j.Extra) != len(j2.Extra) {
		t.Fatalf("round trip changed fields:\n first %+v\nsecond %+v", j, j2)
	}
}

// http-binding 9.2, json-format 10.2, L4-BULK-002.
func TestParseBatch(t *testing.T) {
	t.Parallel()
	t.Run("three jobs", func(t *testing.T) {
		t.Parallel()
		jobs, err := ParseBatch([]byte(`{"jobs":[
		  {"type":"email.send","args":["alice"],"options":{"queue":"email","tags":["onboarding"]}},
		  {"type":"email.send","args":["bob"],"priority":0},
		  {"specversion":"1.0","id":"019539a4-b68c-7def-8000-1a2b3c4d5e6f","type":"email.send","queue":"email","args":["carol"]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 3 {
			t.Fatalf("got %d jobs", len(jobs))
		}
		if jobs[0].Queue != "email" || jobs[1].Priority != 0 || jobs[2].ID != "019539a4-b68c-7def-8000-1a2b3c4d5e6f" {
			t.Errorf("jobs = %+v %+v %+v", jobs[0], jobs[1], jobs[2])
		}
		if jobs[0].ID == jobs[1].ID {
			t.Errorf("generated ids repeat")
		}
	})
	t.Run("1000 jobs L4-BULK-002", func(t *testing.T) {
		t.Parallel()
		jobs, err := ParseBatch(batchOf(MaxBatchSize))
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != MaxBatchSize {
			t.Fatalf("got %d jobs", len(jobs))
		}
	})
	tests := []errCase{
		{"not JSON", `{"jobs":[`, "", []string{"not valid JSON"}},
		{"array body", `[{"type":"a","args":[]}]`, "", []string{"JSON object"}},
		{"jobs missing", `{}`, "jobs", []string{"required"}},
		{"jobs null", `{"jobs":null}`, "jobs", []string{"required"}},
		{"jobs object", `{"jobs":{"type":"a"}}`, "jobs", []string{"array", "received object"}},
		{"jobs empty", `{"jobs":[]}`, "jobs", []string{"non-empty"}},
		{"job not an object", `{"jobs":[{"type":"a","args":[]},5]}`, "jobs[1]", []string{"JSON object", "received number"}},
		{"missing type at index 1 (binding 9.2 example)", `{"jobs":[{"type":"a","args":[]},{"args":[]}]}`, "jobs[1].type",
			[]string{"'jobs[1].type' is required"}},
		{"nested path", `{"jobs":[{"type":"a","args":[],"options":{"retry":{"max_attempts":-1}}}]}`,
			"jobs[0].options.retry.max_attempts", nil},
		{"conflict names prefixed fields", `{"jobs":[{"type":"a","args":[]},{"type":"a","args":[],"priority":1,"options":{"priority":2}}]}`,
			"jobs[1].options.priority", []string{"'jobs[1].priority'", "'jobs[1].options.priority'"}},
		{"duplicate client ids", `{"jobs":[{"id":"019539a4-b68c-7def-8000-1a2b3c4d5e6f","type":"a","args":[]},
		  {"id":"019539a4-b68c-7def-8000-1a2b3c4d5e6f","type":"a","args":[]}]}`, "jobs[1].id", []string{"jobs[0]"}},
		{"uppercase client id core 5.1", `{"jobs":[{"type":"a","args":[]},{"id":"019539A4-B68C-7DEF-8000-1A2B3C4D5E6F","type":"a","args":[]}]}`,
			"jobs[1].id", []string{"lowercase UUIDv7"}},
	}
	runErrCases(t, func(b []byte) error { _, err := ParseBatch(b); return err }, tests)
	t.Run("too many jobs", func(t *testing.T) {
		t.Parallel()
		_, err := ParseBatch(batchOf(MaxBatchSize + 1))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "jobs" || !strings.Contains(err.Error(), "at most 1000") {
			t.Fatalf("ParseBatch(1001 jobs) = %v", err)
		}
	})
}

func batchOf(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"bulk.item","args":[%d],"options":{"queue":"bulk"}}`, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// The parsed job does not alias the request body.
func TestParseJobCopiesBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"a","args":["xyz"],"meta":{"k":"v"},"ext":"e"}`)
	j, err := ParseJob(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = ' '
	}
	jsonEq(t, j.Args, `["xyz"]`)
	jsonEq(t, j.Meta, `{"k":"v"}`)
	jsonEq(t, j.Extra["ext"], `"e"`)
}

func FuzzParseJob(f *testing.F) {
	seeds := []string{
		`{"type":"email.send","args":["a"]}`,
		`{"type":"a.b","args":[],"queue":"q","priority":5,"timeout":30,"scheduled_at":"2026-03-01T09:00:00+02:00",
		  "retry":{"max_attempts":4,"initial_interval":"PT0.5S","max_interval":"PT1H","backoff_type":"linear"},"x":1}`,
		`{"type":"a","args":[1],"options":{"queue":"email","priority":1,"timeout_ms":1500,"delay_until":"2026-03-01T11:00:00+02:00",
		  "expires_at":"2026-03-02T00:00:00Z","retry":{"max_attempts":5,"initial_interval_ms":1000,"backoff_coefficient":2,
		  "max_interval_ms":300000,"jitter":true,"non_retryable_errors":["a.*"]},"unique":{"key":"k","period_ms":1},
		  "tags":["t"],"visibility_timeout_ms":30000,"pending":true,"rate_limit":{"k":1}}}`,
		`{"type":"a","args":[],"meta":{"a":1},"options":{"metadata":{"b":2}},"state":"completed","x_jetgate":{}}`,
		`{"type":"email.send-v2","args":[],"options":{"delay_until":"+PT5S","expires_at":"2026-01-02T03:04:05.5+02:00",
		  "rate_limit":{"rate":10,"period":"minute","max_per_second":2}}}`,
		`{"type":"a","args":[],"queue":"q","scheduled_at":"+P1DT2H","rate_limit":{"key":"k","max_per_second":3,"concurrency":1}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := ParseJob(body)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseJob error is %T, not *ValidationError: %v", err, err)
			}
			return
		}
		if ValidID(j.ID) != nil || !validType(j.Type) || !validQueue(j.Queue) || j.Priority < 0 ||
			j.Priority > MaxPriority || j.Retry == nil || j.MaxAttempts != j.Retry.MaxAttempts {
			t.Fatalf("ParseJob accepted an invalid job: %+v", j)
		}
		for _, at := range []*Time{j.ScheduledAt, j.ExpiresAt} {
			if at != nil && at.After(LatestTime) { // issue 31: it would fire at once
				t.Fatalf("ParseJob accepted %v, past %s", at.Time, LatestTimeText)
			}
		}
		assertRoundTrip(t, j)
	})
}

func BenchmarkParseJob(b *testing.B) {
	benchmarks := []struct {
		name string
		body string
	}{
		{"minimal", `{"type":"email.send","args":["user@example.com","welcome"]}`},
		{"go_sdk", `{"type":"email.send","args":["user@example.com",{"locale":"en"}],"meta":{"trace_id":"abc"},
		  "options":{"queue":"email","priority":1,"timeout_ms":30000,"delay_until":"2026-03-01T11:00:00+02:00",
		  "retry":{"max_attempts":5,"initial_interval_ms":1000,"backoff_coefficient":2,"max_interval_ms":300000,
		  "jitter":true,"non_retryable_errors":["validation.*"]},"unique":{"key":"k","period_ms":60000,"on_conflict":"reject"},
		  "tags":["onboarding","email"],"visibility_timeout_ms":45000}}`},
		{"envelope", `{"specversion":"1.0","id":"019461a8-2b3c-7d4e-9f50-6a7b8c9d0e1f","type":"report.generate",
		  "queue":"reports","args":[42,"quarterly"],"priority":1,"timeout":300,"scheduled_at":"2026-03-01T09:00:00Z",
		  "retry":{"max_attempts":5,"initial_interval":"PT1S","max_interval":"PT5M"},"total_timeout":3600}`},
	}
	for _, bm := range benchmarks {
		body := []byte(bm.body)
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for range b.N {
				if _, err := ParseJob(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ParseTemplate reads a template jetgate stored itself (a workflow step,
// stored with "id": ""): the empty id that issue 32 refuses from clients
// is no error there, and leaves the id to the template's owner.
func TestParseTemplateLeavesTheIDToItsOwner(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"id":"","type":"a","args":[]}`, `{"type":"a","args":[]}`, `{"id":null,"type":"a","args":[]}`} {
		j, err := ParseTemplate([]byte(body))
		if err != nil || j.ID != "" || j.ServerID || j.Type != "a" {
			t.Fatalf("ParseTemplate(%s) = %+v, %v; want the job with no id", body, j, err)
		}
		if _, err := ParseJob([]byte(body)); body == `{"id":"","type":"a","args":[]}` && err == nil {
			t.Fatalf("ParseJob(%s) accepted the empty id", body)
		}
	}
	const id = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	if j, err := ParseTemplate([]byte(`{"id":"` + id + `","type":"a","args":[]}`)); err != nil || j.ID != id {
		t.Fatalf("ParseTemplate with an id: %+v, %v", j, err)
	}
	if _, err := ParseTemplate([]byte(`{"id":"x","type":"a","args":[]}`)); err == nil {
		t.Fatal("ParseTemplate accepted a malformed id")
	}
}
