package ojs

import (
	"testing"
	"time"
)

// ojs-retry 3.1-3.5 and Appendix A, without jitter: exact delays.
func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	policy := func(backoff string, initial time.Duration, coef float64, maxI time.Duration) RetryPolicy {
		return RetryPolicy{MaxAttempts: 30, InitialInterval: Duration(initial), BackoffCoefficient: coef,
			MaxInterval: Duration(maxI), Backoff: backoff}
	}
	s := time.Second
	tests := []struct {
		name   string
		policy RetryPolicy
		want   []time.Duration // delay after failed attempt 1, 2, ...
	}{
		{"none 3.1", policy(BackoffNone, 5*s, 2, time.Hour), []time.Duration{5 * s, 5 * s, 5 * s, 5 * s}},
		{"linear 3.2", policy(BackoffLinear, 5*s, 2, time.Hour), []time.Duration{5 * s, 10 * s, 15 * s, 20 * s}},
		{"exponential 3.3 (table, capped at PT5M)", policy(BackoffExponential, s, 2, 5*time.Minute),
			[]time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 300 * s, 300 * s}},
		{"exponential is the default strategy", policy("", s, 3, time.Hour), []time.Duration{s, 3 * s, 9 * s}},
		{"polynomial 3.4 (table)", policy(BackoffPolynomial, s, 4, 5*time.Minute),
			[]time.Duration{s, 16 * s, 81 * s, 256 * s, 300 * s}},
		{"polynomial 12.3 (15s * n^4, cap PT1H)", policy(BackoffPolynomial, 15*s, 4, time.Hour),
			[]time.Duration{15 * s, 240 * s, 1215 * s, 3600 * s, 3600 * s}},
		{"coefficient 1.0 is constant (2.2)", policy(BackoffExponential, 10*s, 1, 10*s), []time.Duration{10 * s, 10 * s, 10 * s}},
		{"ms precision", policy(BackoffExponential, 250*time.Millisecond, 2, time.Hour),
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				if got := tt.policy.Delay(i + 1); got != want {
					t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

func TestRetryPolicyDelayEdges(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy()
	p.Jitter = false
	if got := p.Delay(0); got != time.Second {
		t.Errorf("Delay(0) = %v, want the first retry's %v", got, time.Second)
	}
	if got := p.Delay(1 << 30); got != 5*time.Minute {
		t.Errorf("Delay(huge) = %v, want the cap", got)
	}
	noCap := RetryPolicy{InitialInterval: Duration(time.Second), BackoffCoefficient: 10}
	if got := noCap.Delay(1000); got <= 0 {
		t.Errorf("uncapped Delay(1000) = %v, want a large positive delay", got)
	}
	zero := RetryPolicy{BackoffCoefficient: 10}
	if got := zero.Delay(1000); got != 0 {
		t.Errorf("zero-interval Delay(1000) = %v, want 0", got)
	}
}

// ojs-retry 5.1-5.3: jitter multiplies by [0.5, 1.5) and the result is capped
// at max_interval again (RET-05, RET-06).
func TestRetryPolicyDelayJitter(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialInterval: Duration(10 * time.Second), BackoffCoefficient: 2,
		MaxInterval: Duration(300 * time.Second), Jitter: true}
	tests := []struct {
		n        int
		min, max time.Duration // max exclusive unless capped
		capped   bool
	}{
		{1, 5 * time.Second, 15 * time.Second, false},
		{2, 10 * time.Second, 30 * time.Second, false},
		{5, 80 * time.Second, 240 * time.Second, false},
		{6, 150 * time.Second, 300 * time.Second, true}, // 5.3 table: [150s, 300s]
	}
	for _, tt := range tests {
		var lo, hi time.Duration = time.Duration(1 << 62), 0
		for range 2000 {
			d := p.Delay(tt.n)
			lo, hi = min(lo, d), max(hi, d)
			if d < tt.min || d > tt.max || (!tt.capped && d == tt.max) {
				t.Fatalf("Delay(%d) = %v outside [%v, %v)", tt.n, d, tt.min, tt.max)
			}
		}
		// 2000 uniform draws cover most of the range.
		span := tt.max - tt.min
		if lo > tt.min+span/10 || hi < tt.max-span/10 {
			t.Errorf("Delay(%d) ranged over [%v, %v], want most of [%v, %v)", tt.n, lo, hi, tt.min, tt.max)
		}
	}
}

// ojs-retry 6.2 matching table (RET-07, RET-18).
func TestRetryPolicyNonRetryable(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{NonRetryableErrors: []string{"validation.payload_invalid", "auth.*"}}
	tests := []struct {
		kind string
		want bool
	}{
		{"validation.payload_invalid", true},
		{"validation.schema_error", false},
		{"auth.token_expired", true},
		{"auth.forbidden", true},
		{"auth.nested.deeper", true},
		{"auth", false},
		{"authz.denied", false},
		{"external.auth.failure", false},
		{"", false},
		{"validation.payload_invalid.extra", false},
	}
	for _, tt := range tests {
		if got := p.NonRetryable(tt.kind); got != tt.want {
			t.Errorf("NonRetryable(%q) = %v, want %v", tt.kind, got, tt.want)
		}
	}
	if DefaultRetryPolicy().NonRetryable("anything") {
		t.Error("the default policy has no non-retryable errors")
	}
}

func TestJobErrorKind(t *testing.T) {
	t.Parallel()
	if k := (&JobError{Type: "auth.expired", Code: "E1"}).Kind(); k != "auth.expired" {
		t.Errorf("Kind() = %q, want the type", k)
	}
	if k := (&JobError{Code: "auth.expired"}).Kind(); k != "auth.expired" {
		t.Errorf("Kind() = %q, want the code", k)
	}
}

// ojs-retry 8: the default policy.
func TestDefaultRetryPolicy(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy()
	if p.MaxAttempts != 3 || p.InitialInterval.D() != time.Second || p.BackoffCoefficient != 2 ||
		p.MaxInterval.D() != 5*time.Minute || !p.Jitter || p.NonRetryableErrors == nil ||
		len(p.NonRetryableErrors) != 0 || p.OnExhaustion != "discard" || p.Backoff != BackoffExponential {
		t.Errorf("DefaultRetryPolicy() = %+v", p)
	}
	p.NonRetryableErrors = append(p.NonRetryableErrors, "x")
	if len(DefaultRetryPolicy().NonRetryableErrors) != 0 {
		t.Error("DefaultRetryPolicy shares its slice")
	}
}
