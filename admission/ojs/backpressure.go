package ojs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Backpressure strategies (ojs-backpressure.md section 5).
const (
	StrategyReject     = "reject"
	StrategyBlock      = "block"
	StrategyDropOldest = "drop_oldest"
)

// DefaultWarningThreshold is the pressure at which warning events fire
// (ojs-backpressure.md 6.2); CriticalThreshold is the critical level of
// ojs-backpressure.txt.
const (
	DefaultWarningThreshold = 0.8
	CriticalThreshold       = 0.95
)

// ErrQueueFull is the sentinel of QueueFullError.
var ErrQueueFull = errors.New("queue full")

// Backpressure bounds a queue (ojs-backpressure.md 6). Zero bounds mean
// unbounded. TenantKey and TenantMaxDepth bound depth per value of a meta
// field, so one tenant cannot fill a shared queue (section 9.2).
type Backpressure struct {
	MaxDepth         int64   `json:"max_depth"`
	MaxSizeBytes     int64   `json:"max_size_bytes"`
	Strategy         string  `json:"strategy"`
	WarningThreshold float64 `json:"warning_threshold"`
	TenantKey        string  `json:"tenant_key,omitempty"`
	TenantMaxDepth   int64   `json:"tenant_max_depth,omitempty"`
	// CountActive counts active jobs against the bound too. The spec's
	// depth is available + scheduled + retryable (ojs-backpressure.md 3),
	// so by default a job gives its place back when a worker claims it,
	// and a failed attempt takes one again to retry. With CountActive a
	// job keeps its place until it finishes: a retry never finds its queue
	// full, and the bound holds for every job the queue has, running or not.
	CountActive bool `json:"count_active,omitempty"`
}

// Bounded reports whether any bound is set.
func (b Backpressure) Bounded() bool {
	return b.MaxDepth > 0 || b.MaxSizeBytes > 0 || b.TenantMaxDepth > 0
}

// WithDefaults fills the strategy and warning threshold.
func (b Backpressure) WithDefaults() Backpressure {
	if b.Strategy == "" {
		b.Strategy = StrategyReject
	}
	if b.WarningThreshold == 0 {
		b.WarningThreshold = DefaultWarningThreshold
	}
	return b
}

// Validate checks b as sent by a client, naming the offending field.
func (b Backpressure) Validate(prefix string) error {
	switch {
	case b.MaxDepth < 0:
		return &ValidationError{Field: prefix + "max_depth", Rule: "integer >= 0 (0 means unbounded)"}
	case b.MaxSizeBytes < 0:
		return &ValidationError{Field: prefix + "max_size_bytes", Rule: "integer >= 0 (0 means unbounded)"}
	case b.TenantMaxDepth < 0:
		return &ValidationError{Field: prefix + "tenant_max_depth", Rule: "integer >= 0 (0 means unbounded)"}
	case b.TenantMaxDepth > 0 && b.TenantKey == "":
		return &ValidationError{Field: prefix + "tenant_key", Rule: "the meta field naming the tenant, required with tenant_max_depth"}
	case b.WarningThreshold < 0 || b.WarningThreshold > 1 || math.IsNaN(b.WarningThreshold):
		return &ValidationError{Field: prefix + "warning_threshold", Rule: "number between 0.0 and 1.0"}
	}
	switch b.Strategy {
	case "", StrategyReject, StrategyBlock, StrategyDropOldest:
		return nil
	}
	return &ValidationError{Field: prefix + "strategy", Rule: `one of "reject", "block", "drop_oldest"`, Received: fmt.Sprintf("%q", b.Strategy)}
}

// QueueConfig is a queue's configuration as GET/PUT
// /ojs/v1/admin/queues/{name}/config show it. Source says where the
// effective backpressure comes from: "queue" (set for this queue),
// "default" (the server-wide default) or "none" (unbounded).
type QueueConfig struct {
	Queue        string        `json:"queue"`
	Backpressure *Backpressure `json:"backpressure"`
	Source       string        `json:"source"`
}

// Pressure is a bounded queue's fill level at one moment. Depth counts the
// jobs holding a unit of the bound (see admission's backpressure doc);
// Ratio is the larger of depth/max_depth and size/max_size_bytes.
type Pressure struct {
	Queue        string  `json:"queue"`
	Depth        int64   `json:"depth"`
	MaxDepth     int64   `json:"max_depth,omitempty"`
	SizeBytes    int64   `json:"size_bytes"`
	MaxSizeBytes int64   `json:"max_size_bytes,omitempty"`
	Ratio        float64 `json:"pressure"`
	Strategy     string  `json:"strategy"`
}

// QueueFullError is an enqueue refused by a queue's bound: 429 with
// Retry-After and the X-OJS-Queue-* headers. The job is not stored.
type QueueFullError struct {
	Pressure
	// Bound names the bound that was hit: "max_depth", "max_size_bytes"
	// or "tenant_max_depth".
	Bound  string
	Tenant string
	// Waited is how long a blocking enqueue waited before giving up.
	Waited     time.Duration
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	switch e.Bound {
	case "max_size_bytes":
		return fmt.Sprintf("queue '%s' is at capacity: size bound of %d bytes reached", e.Queue, e.MaxSizeBytes)
	case "tenant_max_depth":
		return fmt.Sprintf("queue '%s' is at capacity for tenant '%s'", e.Queue, e.Tenant)
	}
	return fmt.Sprintf("queue '%s' is at capacity: depth bound of %d jobs reached", e.Queue, e.MaxDepth)
}

// Unwrap makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }

type ctxKey int

const (
	pressureKey ctxKey = iota
	blockKey
)

// PressureReport collects the pressure of the bounded queues an enqueue
// touched, so the binding can answer with X-OJS-Queue-Pressure.
type PressureReport struct {
	mu  sync.Mutex
	max *Pressure
}

// WithPressureReport returns a context whose enqueues report pressure into
// the returned report.
func WithPressureReport(ctx context.Context) (context.Context, *PressureReport) {
	r := &PressureReport{}
	return context.WithValue(ctx, pressureKey, r), r
}

// ReportPressure records p in ctx's report, keeping the highest ratio.
func ReportPressure(ctx context.Context, p Pressure) {
	r, ok := ctx.Value(pressureKey).(*PressureReport)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max == nil || p.Ratio > r.max.Ratio {
		r.max = &p
	}
}

// Highest returns the most pressed queue reported, if any.
func (r *PressureReport) Highest() (Pressure, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max == nil {
		return Pressure{}, false
	}
	return *r.max, true
}

// WithBlockTimeout sets how long an enqueue into a full queue with the
// block strategy may wait (the OJS-Block-Timeout request header).
func WithBlockTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, blockKey, d)
}

// BlockTimeout returns the block timeout set on ctx, and whether one was.
func BlockTimeout(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(blockKey).(time.Duration)
	return d, ok
}
