package client

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Option sets one extension field of an enqueued job.
type Option func(*jobSpec)

// jobSpec is the body of one enqueued job, in the binding's options form
// (what the official SDKs send, spec/README.md) plus the millisecond forms
// of the timeouts extension.
type jobSpec struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Args    json.RawMessage `json:"args"`
	Meta    map[string]any  `json:"meta,omitempty"`
	Options jobOptions      `json:"options"`
	// blockTimeout is the OJS-Block-Timeout header of the request.
	blockTimeout *time.Duration
}

type jobOptions struct {
	Queue              string           `json:"queue"`
	Priority           *int             `json:"priority,omitempty"`
	TimeoutMs          int64            `json:"timeout_ms,omitempty"`
	TotalTimeoutMs     int64            `json:"total_timeout_ms,omitempty"`
	EnqueueTTLMs       int64            `json:"enqueue_ttl_ms,omitempty"`
	GracePeriodMs      *int64           `json:"grace_period_ms,omitempty"`
	HeartbeatTimeoutMs int64            `json:"heartbeat_timeout_ms,omitempty"`
	DelayUntil         string           `json:"delay_until,omitempty"`
	ExpiresAt          string           `json:"expires_at,omitempty"`
	Retry              *retryOptions    `json:"retry,omitempty"`
	Unique             *UniquePolicy    `json:"unique,omitempty"`
	RateLimit          *RateLimitPolicy `json:"rate_limit,omitempty"`
	Tags               []string         `json:"tags,omitempty"`
	Pending            bool             `json:"pending,omitempty"`
}

// RetryPolicy is a job's retry policy (ojs-retry.md); zero fields take
// the server's defaults (3 attempts, 1 s, x2, at most 5 min, jitter).
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts; 0 takes the server's
	// default (3). For max_attempts 0 (the first failure is final), add
	// the MaxAttempts(0) option after Retry.
	MaxAttempts        int
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaxInterval        time.Duration
	// NoJitter turns off the jitter that is on by default.
	NoJitter bool
	// NonRetryableErrors are error types that end the job at once.
	NonRetryableErrors []string
	// Backoff is "exponential" (default), "linear", "polynomial" or "none".
	Backoff string
	// DeadLetter keeps the job in the dead letter queue when attempts are
	// exhausted (on_exhaustion "dead_letter").
	DeadLetter bool
}

type retryOptions struct {
	// MaxAttempts is a pointer so that 0, which the server honours (the
	// first failure is final), is sent and not dropped as empty.
	MaxAttempts        *int     `json:"max_attempts,omitempty"`
	InitialIntervalMs  int64    `json:"initial_interval_ms,omitempty"`
	BackoffCoefficient float64  `json:"backoff_coefficient,omitempty"`
	MaxIntervalMs      int64    `json:"max_interval_ms,omitempty"`
	Jitter             *bool    `json:"jitter,omitempty"`
	NonRetryableErrors []string `json:"non_retryable_errors,omitempty"`
	Backoff            string   `json:"backoff_type,omitempty"`
	OnExhaustion       string   `json:"on_exhaustion,omitempty"`
}

// UniquePolicy is a job's uniqueness policy (ojs-unique-jobs.md): the key
// (or the args / meta keys it is derived from), how long it holds, in
// which states a duplicate counts, and what a duplicate does (reject,
// replace, replace_except_schedule, ignore).
type UniquePolicy struct {
	Key        string   `json:"key,omitempty"`
	Keys       []string `json:"keys,omitempty"`
	ArgsKeys   []string `json:"args_keys,omitempty"`
	MetaKeys   []string `json:"meta_keys,omitempty"`
	PeriodMs   int64    `json:"period_ms,omitempty"`
	States     []string `json:"states,omitempty"`
	OnConflict string   `json:"on_conflict,omitempty"`
}

// RateLimitPolicy is a job's rate limit (ojs-rate-limiting.md 6): the key
// its jobs share, and any of a concurrency limit, a window and a
// throttle; OnLimit is "wait" (default), "reschedule" or "drop".
type RateLimitPolicy = ojs.RateLimitPolicy

// RateWindow is limit starts per period, for RateLimitPolicy.Rate and
// .Throttle.
type RateWindow = ojs.RateWindow

// Window returns a RateWindow of limit starts per period.
func Window(limit int, period time.Duration) *RateWindow {
	return &RateWindow{Limit: limit, Period: ojs.Duration(period)}
}

// Queue sets the job's queue (default "default").
func Queue(name string) Option { return func(s *jobSpec) { s.Options.Queue = name } }

// Priority sets the job's priority: lower runs first, default 2
// (ojs-priority.md).
func Priority(p int) Option { return func(s *jobSpec) { s.Options.Priority = &p } }

// ID sets the job's id (default: the server makes one).
func ID(id string) Option { return func(s *jobSpec) { s.ID = id } }

// ScheduledAt makes the job available at t.
func ScheduledAt(t time.Time) Option {
	return func(s *jobSpec) { s.Options.DelayUntil = t.UTC().Format(time.RFC3339Nano) }
}

// Delay makes the job available after d.
func Delay(d time.Duration) Option { return ScheduledAt(time.Now().Add(d)) }

// ExpiresAt discards the job if it has not started by t.
func ExpiresAt(t time.Time) Option {
	return func(s *jobSpec) { s.Options.ExpiresAt = t.UTC().Format(time.RFC3339Nano) }
}

// EnqueueTTL discards the job if it has not started within d of its
// creation (ojs-timeouts.md 5.3).
func EnqueueTTL(d time.Duration) Option { return func(s *jobSpec) { s.Options.EnqueueTTLMs = ms(d) } }

// Timeout is the execution timeout of one attempt (ojs-timeouts.md 5.1);
// the worker cancels the handler's context then.
func Timeout(d time.Duration) Option { return func(s *jobSpec) { s.Options.TimeoutMs = ms(d) } }

// TotalTimeout bounds the job's life across attempts (5.2).
func TotalTimeout(d time.Duration) Option {
	return func(s *jobSpec) { s.Options.TotalTimeoutMs = ms(d) }
}

// GracePeriod is the time a handler has after its context is cancelled at
// the execution timeout (5.4); 0 is none.
func GracePeriod(d time.Duration) Option {
	return func(s *jobSpec) { v := ms(d); s.Options.GracePeriodMs = &v }
}

// HeartbeatTimeout is the longest silence of the job's worker before the
// job is stalled (5.5).
func HeartbeatTimeout(d time.Duration) Option {
	return func(s *jobSpec) { s.Options.HeartbeatTimeoutMs = ms(d) }
}

// Retry sets the job's retry policy.
func Retry(p RetryPolicy) Option {
	return func(s *jobSpec) {
		r := &retryOptions{InitialIntervalMs: ms(p.InitialInterval),
			BackoffCoefficient: p.BackoffCoefficient, MaxIntervalMs: ms(p.MaxInterval),
			NonRetryableErrors: p.NonRetryableErrors, Backoff: p.Backoff}
		if p.MaxAttempts != 0 {
			r.MaxAttempts = ptr(p.MaxAttempts)
		}
		if p.NoJitter {
			r.Jitter = ptr(false)
		}
		if p.DeadLetter {
			r.OnExhaustion = "dead_letter"
		}
		s.Options.Retry = r
	}
}

// MaxAttempts sets the total attempts of the job's retry policy, the rest
// staying the server's defaults (or what an earlier Retry set). 0 is sent
// as 0: the job runs once and its first failure is final
// (docs/decisions.md).
func MaxAttempts(n int) Option {
	return func(s *jobSpec) {
		if s.Options.Retry == nil {
			s.Options.Retry = &retryOptions{}
		}
		s.Options.Retry.MaxAttempts = &n
	}
}

// Unique sets the job's uniqueness policy.
func Unique(p UniquePolicy) Option { return func(s *jobSpec) { s.Options.Unique = &p } }

// RateLimit sets the job's rate limit policy.
func RateLimit(p RateLimitPolicy) Option { return func(s *jobSpec) { s.Options.RateLimit = &p } }

// RateLimitKey limits the job by key alone: the key's limits are the
// ones other jobs or an operator override set.
func RateLimitKey(key string) Option {
	return func(s *jobSpec) {
		if s.Options.RateLimit == nil {
			s.Options.RateLimit = &RateLimitPolicy{}
		}
		s.Options.RateLimit.Key = key
	}
}

// Tags sets the job's tags.
func Tags(tags ...string) Option { return func(s *jobSpec) { s.Options.Tags = tags } }

// Meta sets one key of the job's meta.
func Meta(key string, value any) Option {
	return func(s *jobSpec) {
		if s.Meta == nil {
			s.Meta = map[string]any{}
		}
		s.Meta[key] = value
	}
}

// Pending stages the job until it is activated.
func Pending() Option { return func(s *jobSpec) { s.Options.Pending = true } }

// BlockTimeout lets the server hold the enqueue up to d while the queue is
// full, for queues with the block strategy (OJS-Block-Timeout,
// ojs-backpressure.md 5.2).
func BlockTimeout(d time.Duration) Option { return func(s *jobSpec) { s.blockTimeout = &d } }

func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// header is the request header the spec's options ask for.
func (s *jobSpec) header() map[string]string {
	if s.blockTimeout == nil {
		return nil
	}
	return map[string]string{"OJS-Block-Timeout": strconv.FormatFloat(s.blockTimeout.Seconds(), 'f', -1, 64)}
}

// newSpec builds the body of one job.
func newSpec(ctx context.Context, typ string, args []any, opts []Option) (*jobSpec, error) {
	if args == nil {
		args = []any{}
	}
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	s := &jobSpec{Type: typ, Args: a, Options: jobOptions{Queue: ojs.DefaultQueue}}
	for _, o := range opts {
		o(s)
	}
	traceMeta(ctx, s)
	return s, nil
}
