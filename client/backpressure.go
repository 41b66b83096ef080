package client

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RetryConfig is how an enqueue refused with 429 is retried
// (ojs-backpressure.md 8.1): wait Retry-After (Initial when absent), then
// double the wait up to Max, with jitter, at most MaxRetries times before
// the *Error reaches the caller.
type RetryConfig struct {
	// MaxRetries is the number of retries (default 5; negative: none).
	MaxRetries int
	// Initial is the first wait when the server sent no Retry-After
	// (default 1 s); Max caps a wait (default 30 s).
	Initial, Max time.Duration
}

// BreakerConfig is the circuit breaker (8.2): it opens after Threshold
// consecutive 429s (default 5), refusing enqueues with ErrCircuitOpen;
// after Cooldown (default 10 s) one enqueue goes through (half open), and
// a success closes it.
type BreakerConfig struct {
	Threshold int
	Cooldown  time.Duration
	Disabled  bool
}

// PressureConfig paces enqueues into a queue whose X-OJS-Queue-Pressure
// (depth / bound, 7.3) is above Threshold (default 0.8): each enqueue to
// it first waits MaxDelay (default 200 ms) scaled by how far the pressure
// is between Threshold and 1.
type PressureConfig struct {
	Threshold float64
	MaxDelay  time.Duration
	Disabled  bool
}

// backpressure is the client's producer-side state.
type backpressure struct {
	retry    RetryConfig
	breaker  BreakerConfig
	pressure PressureConfig
	now      func() time.Time

	mu        sync.Mutex
	fails     int       // consecutive 429s
	openUntil time.Time // breaker open until then (zero: closed)
	probing   bool      // half open: one probe in flight
	queues    map[string]float64
}

func newBackpressure(r RetryConfig, b BreakerConfig, p PressureConfig) *backpressure {
	if r.MaxRetries == 0 {
		r.MaxRetries = 5
	}
	if r.Initial <= 0 {
		r.Initial = time.Second
	}
	if r.Max <= 0 {
		r.Max = 30 * time.Second
	}
	if b.Threshold <= 0 {
		b.Threshold = 5
	}
	if b.Cooldown <= 0 {
		b.Cooldown = 10 * time.Second
	}
	if p.Threshold <= 0 || p.Threshold >= 1 {
		p.Threshold = 0.8
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 200 * time.Millisecond
	}
	return &backpressure{retry: r, breaker: b, pressure: p, now: time.Now, queues: map[string]float64{}}
}

// admit asks the breaker whether an enqueue may go out now.
func (b *backpressure) admit() bool {
	if b.breaker.Disabled {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return true
	}
	if b.now().Before(b.openUntil) || b.probing {
		return false
	}
	b.probing = true // half open: this one enqueue probes
	return true
}

// result records the outcome of an enqueue: a 429 or not.
func (b *backpressure) result(refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if !refused {
		b.fails, b.openUntil = 0, time.Time{}
		return
	}
	b.fails++
	if !b.breaker.Disabled && (b.fails >= b.breaker.Threshold || !b.openUntil.IsZero()) {
		b.openUntil = b.now().Add(b.breaker.Cooldown)
	}
}

// open reports whether the breaker is open now.
func (b *backpressure) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openUntil.IsZero() && b.now().Before(b.openUntil)
}

// wait is the wait before retry n (from 0) after a 429 that asked for
// after: the larger of after and the doubled backoff, capped at Max, with
// up to 20 % jitter added (never below after).
func (b *backpressure) wait(n int, after time.Duration) time.Duration {
	d := b.retry.Initial << min(n, 20)
	if d <= 0 || d > b.retry.Max {
		d = b.retry.Max
	}
	d = max(d, after)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// notePressure records the pressure a successful enqueue into queue
// reported (absent header: none).
func (b *backpressure) notePressure(queue string, h http.Header) {
	p := 0.0
	if v := h.Get("X-OJS-Queue-Pressure"); v != "" {
		p, _ = strconv.ParseFloat(v, 64)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p <= 0 {
		delete(b.queues, queue)
		return
	}
	b.queues[queue] = p
}

// pace is how long to wait before the next enqueue into queue.
func (b *backpressure) pace(queue string) time.Duration {
	if b.pressure.Disabled {
		return 0
	}
	b.mu.Lock()
	p := b.queues[queue]
	b.mu.Unlock()
	if p <= b.pressure.Threshold {
		return 0
	}
	f := min((p-b.pressure.Threshold)/(1-b.pressure.Threshold), 1)
	return time.Duration(f * float64(b.pressure.MaxDelay))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }
