package ojs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// reference is the reflection encoding AppendJSON replaces.
func reference(t testing.TB, j *Job) []byte {
	t.Helper()
	c := *j
	if c.Args == nil {
		c.Args = json.RawMessage("[]")
	}
	b, err := json.Marshal(jobAlias(c))
	if err != nil {
		t.Fatalf("reference encoding: %v", err)
	}
	if len(c.Extra) == 0 {
		return b
	}
	tail, err := json.Marshal(c.Extra)
	if err != nil {
		t.Fatalf("reference encoding of extra: %v", err)
	}
	return append(append(b[:len(b)-1], ','), tail[1:]...)
}

func fullJob() *Job {
	at := NewTime(time.Date(2026, 11, 22, 21, 0, 0, 123_456_789, time.UTC))
	no, two, grace, graceMs, progress, delay := false, 2, 5, int64(4500), 0.25, int64(1500)
	return &Job{
		SpecVersion: SpecVersion, ID: "0193-id", Type: "email.send", Queue: "tenant:acme.a",
		Args: json.RawMessage(`[1,"x",{"a":null}]`), Meta: json.RawMessage(`{"trace_id":"abc"}`),
		Priority: -3, Tags: []string{"a", "b"}, Schema: "s", Unique: json.RawMessage(`{"key":"k"}`),
		Timeout: 2, TimeoutMs: 1500, TotalTimeout: 60, TotalTimeoutMs: 60000, EnqueueTTL: 9, EnqueueTTLMs: 8001,
		GracePeriod: &grace, GracePeriodMs: &graceMs, HeartbeatTimeout: 30, HeartbeatTimeoutMs: 30000,
		ScheduledAt: at, ExpiresAt: at,
		Retry: &RetryPolicy{MaxAttempts: 3, InitialInterval: Duration(time.Second), BackoffCoefficient: 2.5,
			MaxInterval: Duration(90 * time.Minute), Jitter: true, NonRetryableErrors: []string{"fatal"},
			Backoff: "linear", OnExhaustion: "dead_letter"},
		State: StateActive, Attempt: 2, MaxAttempts: 3,
		CreatedAt: at, EnqueuedAt: at, StartedAt: at, CompletedAt: at, CancelledAt: at, DiscardedAt: at,
		ActivatedAt: at, NextAttemptAt: at, RetryDelayMs: &delay, WorkerID: "w-1",
		Error:    &JobError{Code: "c", Message: "m", Retryable: &no, Attempt: 1, At: at},
		Errors:   []JobError{{Code: "c", Message: "m"}},
		Result:   json.RawMessage(`{"ok":true}`),
		Progress: &progress, ProgressData: json.RawMessage(`{"rows":3}`), ProgressMessage: "rows <3>",
		ProgressUpdatedAt: at,
		LastCheckpoint:    json.RawMessage(`{"offset":14}`),
		Extra:             map[string]json.RawMessage{"zeta": json.RawMessage(`1`), "alpha": json.RawMessage(`"x"`)},
		RateLimit: &RateLimitPolicy{Key: "tenant:acme", Concurrency: &two,
			Rate: &RateWindow{Limit: 10, Period: Duration(time.Minute)}, OnLimit: "wait"},
		Internal: Internal{Token: "tok", LeaseUntil: at, BeatMs: 60000, HeldAck: "$JS.ACK.x", HeldToken: "held",
			Limits: []string{"c.tenant:acme", "r.x"}, DepthSeq: 7, OverSeq: 9, Origin: "org"},
	}
}

func TestAppendJSONMatchesReflection(t *testing.T) {
	cases := map[string]func(j *Job){
		"every field": func(*Job) {},
		"zero":        func(j *Job) { *j = Job{} },
		"new job": func(j *Job) {
			*j = Job{ID: "x", Type: "t", Queue: "default", Retry: &RetryPolicy{}, State: StateAvailable}
		},
		"only token":     func(j *Job) { j.Internal = Internal{Token: "t"} },
		"only lease":     func(j *Job) { j.Internal = Internal{LeaseUntil: j.ScheduledAt} },
		"only limits":    func(j *Job) { j.Internal = Internal{Limits: []string{"k"}} },
		"only depth":     func(j *Job) { j.Internal = Internal{DepthSeq: 42} },
		"only overdraft": func(j *Job) { j.Internal = Internal{OverSeq: 43} },
		"only origin":    func(j *Job) { j.Internal = Internal{Origin: "o"} },
		"no rate limit":  func(j *Job) { j.RateLimit = nil },
		"empty slices":   func(j *Job) { j.Tags, j.Errors, j.Retry.NonRetryableErrors = []string{}, []JobError{}, []string{} },
		"nil retryable":  func(j *Job) { j.Retry.NonRetryableErrors = nil },
		"escapes": func(j *Job) {
			j.Type = "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029é😀\xff"
			j.Tags = []string{"<script>", "\x7f"}
			j.Extra = map[string]json.RawMessage{"k<\"": json.RawMessage(`"v"`)}
		},
		"floats": func(j *Job) { j.Retry.BackoffCoefficient = 1e-7 },
		"big":    func(j *Job) { j.Retry.BackoffCoefficient = 1e21 },
		"whole":  func(j *Job) { j.Retry.BackoffCoefficient = 2 },
		"spaced raw": func(j *Job) {
			j.Args = json.RawMessage(" [1, 2,\n {\"a\" : \"b c\"}] ")
			j.Result = json.RawMessage("{ }")
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			j := fullJob()
			edit(j)
			got, err := j.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			want := reference(t, j)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendJSON:\n got %s\nwant %s", got, want)
			}
			public, err := j.AppendPublicJSON(nil)
			if wantPublic := reference(t, j.Public()); err != nil || !bytes.Equal(public, wantPublic) {
				t.Fatalf("AppendPublicJSON:\n got %s, %v\nwant %s", public, err, wantPublic)
			}
			viaMarshal, err := json.Marshal(j)
			if err != nil || !bytes.Equal(viaMarshal, want) {
				t.Fatalf("json.Marshal(job) = %s, %v; want %s", viaMarshal, err, want)
			}
			var back Job
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
		})
	}
}

func TestAppendJSONRejectsInvalidRaw(t *testing.T) {
	for _, raw := range []string{`{`, `[1,]`, `{"a" 1}`, `nul`} {
		j := &Job{Args: json.RawMessage(raw)}
		if _, err := j.AppendJSON(nil); err == nil {
			t.Errorf("args %q: no error", raw)
		}
		if _, err := json.Marshal(j); err == nil {
			t.Errorf("json.Marshal with args %q: no error", raw)
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("email.send", "default", `[1,"a"]`, 2.0)
	f.Add("<&>\u2028\xff", "q\x00", ` { "a" : [ ] } `, 1e-9)
	f.Fuzz(func(t *testing.T, typ, queue, args string, coef float64) {
		if !json.Valid([]byte(args)) {
			return
		}
		j := fullJob()
		j.Type, j.Queue, j.Args = typ, queue, json.RawMessage(args)
		j.Retry.BackoffCoefficient = coef
		want, err := json.Marshal(jobAlias(*j))
		if err != nil {
			return // NaN or Inf: encoding/json refuses them, never stored
		}
		_ = want
		got, err := j.AppendJSON(nil)
		if err != nil {
			t.Fatalf("AppendJSON: %v", err)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("AppendJSON wrote invalid JSON %q: %v", got, err)
		}
		if err := json.Unmarshal(reference(t, j), &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("AppendJSON decodes differently:\n got %s\nwant %s", got, reference(t, j))
		}
		public, err := j.AppendPublicJSON(nil)
		if want, _ := j.Public().AppendJSON(nil); err != nil || !bytes.Equal(public, want) {
			t.Fatalf("AppendPublicJSON:\n got %s, %v\nwant %s", public, err, want)
		}
	})
}

// fullJob must set every stored field of Job and Internal: a field added
// to the record but not to fullJob fails here, and once in fullJob the
// byte-for-byte comparison above fails until AppendJSON writes it. (The
// reflection-free encoder once dropped a new field silently.)
func TestFullJobSetsEveryStoredField(t *testing.T) {
	j := fullJob()
	check := func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("fullJob leaves %s%s (%s) unset: set it, and make AppendJSON write it", prefix, f.Name, name)
			}
		}
	}
	check(reflect.ValueOf(*j), "Job.")
	check(reflect.ValueOf(j.Internal), "Internal.")
}

// Issue 32: a record stored before it reads in today's shape: a discarded
// job gets completed_at (its discarded_at) and every error its type (the
// code, else handler_error); a record that has them keeps its own.
func TestStoredRecordBeforeIssue32Upgrades(t *testing.T) {
	t.Parallel()
	old := `{"id":"x","type":"t","queue":"q","args":[],"state":"discarded","attempt":2,"max_attempts":2,` +
		`"discarded_at":"2026-11-20T10:00:00.000Z","error":{"code":"E_DISK","message":"full","attempt":2},` +
		`"errors":[{"message":"bare","attempt":1},{"code":"E_DISK","message":"full","attempt":2}]}`
	var j Job
	if err := json.Unmarshal([]byte(old), &j); err != nil {
		t.Fatal(err)
	}
	if j.CompletedAt == nil || !j.CompletedAt.Equal(j.DiscardedAt.Time) {
		t.Fatalf("completed_at %v, want discarded_at %v", j.CompletedAt, j.DiscardedAt)
	}
	if j.Error.Type != "E_DISK" || j.Errors[0].Type != ErrorTypeHandler || j.Errors[1].Type != "E_DISK" {
		t.Fatalf("types: error %q, errors %q %q", j.Error.Type, j.Errors[0].Type, j.Errors[1].Type)
	}
	kept := `{"id":"x","type":"t","queue":"q","args":[],"state":"completed","completed_at":"2026-11-20T10:00:00.000Z",` +
		`"errors":[{"code":"c","type":"ConnectionTimeout","message":"m"}],"x_unknown":1}`
	var k Job
	if err := json.Unmarshal([]byte(kept), &k); err != nil {
		t.Fatal(err)
	}
	if k.Errors[0].Type != "ConnectionTimeout" || k.CompletedAt == nil || k.DiscardedAt != nil || k.Extra["x_unknown"] == nil {
		t.Fatalf("a record in today's shape changed on reading: %+v", k)
	}
}
