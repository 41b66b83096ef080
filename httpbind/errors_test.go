package httpbind

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// limited is a backend's rate-limit or backpressure rejection.
type limited struct {
	after time.Duration
	h     http.Header
}

func (l limited) Error() string             { return "rate limit exceeded for key 'stripe'" }
func (l limited) RetryAfter() time.Duration { return l.after }
func (l limited) Headers() http.Header      { return l.h }
func (l limited) ErrorDetails() map[string]any {
	return map[string]any{"key": "stripe"}
}

// detailed adds details to an ordinary typed error.
type detailed struct{ error }

func (d detailed) ErrorDetails() map[string]any { return map[string]any{"limit": 5} }
func (d detailed) Unwrap() error                { return d.error }

// Every error the Backend may return maps to the status, code, retryable
// flag and details of ojs-http-binding.md 16.2, 16.3 and the endpoint
// sections (9.1 duplicate, 9.4/10.2 state conflicts, 11.3 queue paused,
// 18.2 rate limited).
func TestErrorMapping_16(t *testing.T) {
	t.Parallel()
	paused := ojs.NewTime(testNow)
	tests := []struct {
		name      string
		err       error
		status    int
		code      string
		retryable bool
		details   map[string]any
	}{
		{"validation", &ojs.ValidationError{Field: "args", Rule: "an array", Received: "object"},
			400, "invalid_request", false, map[string]any{"field": "args", "rule": "an array", "received": "object"}},
		{"not found", fmt.Errorf("get: %w", &ojs.NotFoundError{Resource: "job", ID: "abc"}),
			404, "not_found", false, map[string]any{"resource_type": "job", "resource_id": "abc"}},
		{"state", &ojs.StateError{JobID: "j1", Current: ojs.StateCompleted, Expected: ojs.StateActive, Op: "ack"},
			409, "conflict", false,
			map[string]any{"job_id": "j1", "current_state": "completed", "expected_state": "active"}},
		{"state without expected", &ojs.StateError{JobID: "j1", Current: ojs.StateCompleted, Op: "cancel"},
			409, "conflict", false, map[string]any{"job_id": "j1", "current_state": "completed"}},
		{"duplicate", &ojs.DuplicateError{ExistingID: "j0", UniqueKey: "k"},
			409, "duplicate", false, map[string]any{"existing_job_id": "j0", "unique_key": "k"}},
		{"queue paused", &ojs.QueuePausedError{Queue: "email", PausedAt: paused},
			422, "queue_paused", true, map[string]any{"queue": "email", "paused_at": "2026-02-12T10:30:00.123Z"}},
		{"sentinel invalid", fmt.Errorf("bad: %w", ojs.ErrInvalid), 400, "invalid_request", false, nil},
		{"sentinel not found", ojs.ErrNotFound, 404, "not_found", false, nil},
		{"sentinel state", ojs.ErrInvalidState, 409, "conflict", false, nil},
		{"sentinel duplicate", ojs.ErrDuplicate, 409, "duplicate", false, nil},
		{"sentinel conflict", ojs.ErrConflict, 409, "conflict", true, nil},
		{"sentinel paused", ojs.ErrQueuePaused, 422, "queue_paused", true, nil},
		{"sentinel queue full", fmt.Errorf("admit: %w", ojs.ErrQueueFull), 429, "QUEUE_FULL", true, nil},
		{"too large", fmt.Errorf("publish: %w", ojs.ErrTooLarge), 413, "payload_too_large", false, nil},
		{"unavailable", fmt.Errorf("kv get: %w", ojs.ErrUnavailable), 503, "backend_error", true, nil},
		{"shutting down", ojs.ErrShuttingDown, 503, "backend_error", true, nil},
		{"deadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), 503, "backend_error", true, nil},
		{"unknown", errors.New("nats: secret internals at 10.0.0.7"), 500, "backend_error", true, nil},
		{"detailer", detailed{&ojs.StateError{JobID: "j1", Current: ojs.StateActive, Op: "x"}},
			409, "conflict", false, map[string]any{"limit": float64(5)}},
		{"rate limited", fmt.Errorf("admit: %w", limited{after: 250 * time.Millisecond}),
			429, "rate_limited", true, map[string]any{"retry_after_seconds": 0.25, "key": "stripe"}},
	}
	b := setup(t, Config{})
	for _, tc := range tests {
		b.fake.err = tc.err
		r := b.do(t, http.MethodGet, "/ojs/v1/jobs/"+ojs.NewID(), "", nil)
		d := r.wantError(t, tc.status, tc.code, tc.retryable)
		wantHeaders(t, r)
		for k, v := range tc.details {
			if d[k] != v {
				t.Errorf("%s: details[%s] = %v, want %v (%s)", tc.name, k, d[k], v, r.raw)
			}
		}
		// ojs-errors.md ERR-006: 429 and 503 carry Retry-After.
		if (tc.status == 429 || tc.status == 503) && r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d without Retry-After", tc.name, tc.status)
		}
		// A validation error's hint names the field to fix.
		if f, ok := tc.details["field"].(string); ok && !strings.Contains(r.obj(t, "error")["hint"].(string), "'"+f+"'") {
			t.Errorf("%s: hint does not name field %s: %s", tc.name, f, r.raw)
		}
		if strings.Contains(string(r.raw), "secret") {
			t.Errorf("%s: internal error leaked: %s", tc.name, r.raw)
		}
	}
	if logs := b.logs.String(); !strings.Contains(logs, "secret internals") || !strings.Contains(logs, "level=ERROR") {
		t.Errorf("the 500's real error was not logged at error level:\n%s", logs)
	}
}

// 18.2 and spec/README.md decision 3: 429 carries Retry-After (fractional
// seconds allowed) and the headers the error supplies.
func TestErrorMapping_RateLimitHeaders_18_2(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{5 * time.Second, "5"},
		{1500 * time.Millisecond, "1.5"},
		{250*time.Millisecond + 1, "0.251"},
		{-time.Second, "0"},
	} {
		b.fake.err = limited{after: tc.after, h: http.Header{
			"X-Ratelimit-Limit":     {"100"},
			"X-RateLimit-Remaining": {"0"},
			"X-OJS-Queue-Depth":     {"50000"},
		}}
		r := b.do(t, http.MethodPost, "/ojs/v1/jobs", sdkEnqueue, nil)
		r.wantError(t, http.StatusTooManyRequests, ojs.CodeRateLimited, true)
		wantHeaders(t, r)
		if got := r.Header.Get("Retry-After"); got != tc.want {
			t.Errorf("Retry-After for %v = %q, want %q", tc.after, got, tc.want)
		}
		for k, v := range map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0",
			"X-OJS-Queue-Depth": "50000"} {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	}
}

// ErrShuttingDown asks clients to come back shortly.
func TestErrorMapping_ShuttingDownRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.err = ojs.ErrShuttingDown
	r := b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["default"]}`, nil)
	r.wantError(t, http.StatusServiceUnavailable, ojs.CodeBackendError, true)
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q", r.Header.Get("Retry-After"))
	}
}

// Issue 31: the 503 of a server shutting down (a blocked producer at
// SIGTERM) is an expected answer, logged at Info as natsbind logs it; any
// other 5xx stays at Error.
func TestShuttingDownIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.fake.err = fmt.Errorf("wait for room in queue q: %w", ojs.ErrShuttingDown)
	r := b.do(t, "POST", "/ojs/v1/jobs", `{"type":"t","args":[]}`, sdkHeaders)
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", r.StatusCode, r.raw)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "level=INFO msg=\"request failed\"") || strings.Contains(logs, "level=ERROR") {
		t.Fatalf("the shutdown 503 was not logged at Info (and only there):\n%s", logs)
	}
}
