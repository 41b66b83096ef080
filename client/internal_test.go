package client

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// NATSBIND.md: where HTTP puts a value in the path or query, the NATS
// body carries it as a field of the same name, beside the body's own.
func TestNATSBodyCarriesPathFields(t *testing.T) {
	for _, c := range []struct {
		body   string
		fields []field
		want   string
	}{
		{"", []field{{name: "id", value: "j1"}}, `{"id":"j1"}`},
		{`{"priority":3}`, []field{{name: "id", value: "j1"}}, `{"id":"j1","priority":3}`},
		{`{}`, []field{{name: "queue", value: "a.b"}}, `{"queue":"a.b"}`},
		{`{"x":1}`, nil, `{"x":1}`},
		{"", nil, `{}`},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		got, err := natsBody(body, c.fields)
		if err != nil || string(got) != c.want {
			t.Errorf("natsBody(%s, %v) = %s, %v; want %s", c.body, c.fields, got, err, c.want)
		}
	}
}

// ojs-backpressure.md 8.1: the wait doubles from Initial, is capped at
// Max, is never shorter than Retry-After, and carries at most 20 % jitter.
func TestBackoffWait(t *testing.T) {
	b := newBackpressure(RetryConfig{Initial: 100 * time.Millisecond, Max: time.Second}, BreakerConfig{}, PressureConfig{})
	for _, c := range []struct {
		n     int
		after time.Duration
		base  time.Duration
	}{
		{0, 0, 100 * time.Millisecond}, {1, 0, 200 * time.Millisecond}, {3, 0, 800 * time.Millisecond},
		{5, 0, time.Second}, {0, 3 * time.Second, 3 * time.Second}, {40, 0, time.Second},
	} {
		for range 50 {
			d := b.wait(c.n, c.after)
			if d < c.base || d > c.base+c.base/5 {
				t.Fatalf("wait(%d, %s) = %s, want %s..+20%%", c.n, c.after, d, c.base)
			}
		}
	}
}

// Retry-After is read as fractional seconds (the official SDKs do).
func TestRetryAfterHeader(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "1.5")
	if d := retryAfter(h); d != 1500*time.Millisecond {
		t.Fatalf("Retry-After 1.5 = %s", d)
	}
	if d := retryAfter(http.Header{}); d != 0 {
		t.Fatalf("absent Retry-After = %s", d)
	}
}

// ojs-backpressure.md 8.2: opens after Threshold 429s, half-opens for
// one probe after Cooldown, a success closes it, a failed probe reopens.
func TestBreakerStates(t *testing.T) {
	now := time.Unix(0, 0)
	b := newBackpressure(RetryConfig{}, BreakerConfig{Threshold: 3, Cooldown: time.Second}, PressureConfig{})
	b.now = func() time.Time { return now }
	for range 3 {
		if !b.admit() {
			t.Fatal("closed breaker refused")
		}
		b.result(true)
	}
	if b.admit() {
		t.Fatal("open breaker admitted")
	}
	now = now.Add(time.Second)
	if !b.admit() || b.admit() {
		t.Fatal("half-open breaker must admit exactly one probe")
	}
	b.result(true) // the probe failed: open again
	if b.admit() {
		t.Fatal("breaker not reopened by a failed probe")
	}
	now = now.Add(time.Second)
	if !b.admit() {
		t.Fatal("no probe after the second cooldown")
	}
	b.result(false)
	if !b.admit() || !b.admit() {
		t.Fatal("breaker not closed by a success")
	}
}

// ojs-worker-protocol.md 7.2, issue 19: a handler that returns its
// context's error after the drain cancelled it is a shutdown, not a
// handler error, whichever of the drain and the handler reports first.
func TestJobErrorShutdownCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrShutdown)
	if got := jobError(ctx.Err(), context.Cause(ctx)); got.Type != "shutdown" {
		t.Fatalf("type %q, want shutdown", got.Type)
	}
	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(ErrExecutionTimeout)
	if got := jobError(ctx.Err(), context.Cause(ctx)); got.Type != "timeout" {
		t.Fatalf("type %q, want timeout", got.Type)
	}
}
