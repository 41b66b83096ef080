package ojs

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy is the retry policy of ojs-retry.md. Durations are kept as
// time.Duration; they marshal as ISO 8601 strings.
type RetryPolicy struct {
	MaxAttempts        int      `json:"max_attempts"`
	InitialInterval    Duration `json:"initial_interval"`
	BackoffCoefficient float64  `json:"backoff_coefficient"`
	MaxInterval        Duration `json:"max_interval"`
	Jitter             bool     `json:"jitter"`
	NonRetryableErrors []string `json:"non_retryable_errors"`
	// Backoff is "exponential" (default), "linear", "polynomial" or "none".
	Backoff string `json:"backoff_type,omitempty"`
	// OnExhaustion is "discard" (default) or "dead_letter"; both end in the
	// discarded state, which is jetgate's dead letter queue.
	OnExhaustion string `json:"on_exhaustion,omitempty"`
}

// Backoff strategies.
const (
	BackoffExponential = "exponential"
	BackoffLinear      = "linear"
	BackoffPolynomial  = "polynomial"
	BackoffNone        = "none"
)

// DefaultRetryPolicy is ojs-retry.md section 8.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:        3,
		InitialInterval:    Duration(time.Second),
		BackoffCoefficient: 2.0,
		MaxInterval:        Duration(5 * time.Minute),
		Jitter:             true,
		NonRetryableErrors: []string{},
		Backoff:            BackoffExponential,
		OnExhaustion:       "discard",
	}
}

// Delay returns the backoff before the retry that follows failed attempt n
// (n counts from 1), capped at MaxInterval, with the jitter of section 5:
// a uniform factor in [0.5, 1.5) when Jitter is set, capped at MaxInterval
// again afterwards (RET-06).
func (p RetryPolicy) Delay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	base := float64(p.InitialInterval)
	coef := p.BackoffCoefficient
	if coef < 1 {
		coef = 1
	}
	var d float64
	switch p.Backoff {
	case BackoffNone:
		d = base
	case BackoffLinear:
		d = base * float64(n)
	case BackoffPolynomial:
		d = base * math.Pow(float64(n), coef)
	default:
		d = base * math.Pow(coef, float64(n-1))
	}
	maxD := float64(p.MaxInterval)
	if maxD > 0 && d > maxD {
		d = maxD
	}
	if p.Jitter {
		d *= 0.5 + rand.Float64()
		if maxD > 0 && d > maxD {
			d = maxD
		}
	}
	if !(d >= 0) { // NaN: a zero interval times an infinite factor
		d = 0
	}
	if d > math.MaxInt64/2 {
		d = math.MaxInt64 / 2
	}
	return time.Duration(d)
}

// NonRetryable reports whether an error of this kind must skip retries.
// Matching is exact or by prefix with a trailing ".*" (ojs-retry.md 6.2).
func (p RetryPolicy) NonRetryable(kind string) bool {
	for _, pat := range p.NonRetryableErrors {
		if pat == kind {
			return true
		}
		if n := len(pat); n >= 2 && pat[n-2:] == ".*" && len(kind) >= n-1 && kind[:n-1] == pat[:n-1] {
			return true
		}
	}
	return false
}
