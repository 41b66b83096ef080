package ojs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// On-limit actions of a rate limit policy (ojs-rate-limiting.md 6.2).
const (
	OnLimitWait       = "wait"
	OnLimitReschedule = "reschedule"
	OnLimitDrop       = "drop"
)

// RateLimitPolicy is the rate_limit object of a job (ojs-rate-limiting.md
// 6): a key shared by the jobs it limits, and any of a concurrency limit,
// a window limit and a throttle. Nil members are "no limit".
type RateLimitPolicy struct {
	Key         string      `json:"key"`
	Concurrency *int        `json:"concurrency,omitempty"`
	Rate        *RateWindow `json:"rate,omitempty"`
	Throttle    *RateWindow `json:"throttle,omitempty"`
	OnLimit     string      `json:"on_limit,omitempty"`
}

// RateWindow is limit starts per period (a window limit or a throttle).
type RateWindow struct {
	Limit  int      `json:"limit"`
	Period Duration `json:"period"`
}

// Limits is the limiting part of a policy, without key and action: what a
// job declares, what a queue is configured with, or an override.
type Limits struct {
	Concurrency *int        `json:"concurrency,omitempty"`
	Rate        *RateWindow `json:"rate,omitempty"`
	Throttle    *RateWindow `json:"throttle,omitempty"`
}

// Limits returns the limiting part of p.
func (p *RateLimitPolicy) Limits() Limits {
	return Limits{Concurrency: p.Concurrency, Rate: p.Rate, Throttle: p.Throttle}
}

// Action is p's on_limit, defaulting to wait (ojs-rate-limiting.md 6.2).
func (p *RateLimitPolicy) Action() string {
	if p == nil || p.OnLimit == "" {
		return OnLimitWait
	}
	return p.OnLimit
}

// Empty reports whether l limits nothing.
func (l Limits) Empty() bool { return l.Concurrency == nil && l.Rate == nil && l.Throttle == nil }

// Interval is the spacing of a throttle's starts: period/limit.
func (w RateWindow) Interval() time.Duration {
	if w.Limit <= 0 {
		return 0
	}
	return w.Period.D() / time.Duration(w.Limit)
}

// rateKeyPattern is the key pattern of ojs-rate-limiting.md 6.2.
var rateKeyPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]*$`)

// MaxRateKeyLen bounds a rate limit key, like other names.
const MaxRateKeyLen = 255

// ValidRateKey reports whether s is a valid rate limit key.
func ValidRateKey(s string) bool { return len(s) <= MaxRateKeyLen && rateKeyPattern.MatchString(s) }

// MaxRateLimit bounds concurrency and window limits.
const MaxRateLimit = 1_000_000

// parseRateLimit reads a rate_limit object (top level or options).
func parseRateLimit(c cand) (*RateLimitPolicy, bool, error) {
	p, err := ParseRateLimitPolicy(c.raw, c.path()+".")
	return p, err == nil, err
}

func sameRateLimit(a, b *RateLimitPolicy) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// ParseRateLimitPolicy parses and validates a rate_limit object; prefix
// ("rate_limit." or "options.rate_limit.") starts the field path of errors.
//
// Beside the full form of ojs-rate-limiting.md 6.1 it accepts the shorthand
// clients send (shorthand.go): {"rate": N, "period": "minute"} and
// {"max_per_second": N}. A policy given only in shorthand may leave out the
// key; its Key is then "" and the job parser keys it by the job's queue.
func ParseRateLimitPolicy(raw json.RawMessage, prefix string) (*RateLimitPolicy, error) {
	o, err := decodeObject(raw, prefix)
	if err != nil {
		return nil, err
	}
	if err := onlyFields(o, "key", "concurrency", "rate", "throttle", "on_limit", "period", "max_per_second"); err != nil {
		return nil, err
	}
	short, o, err := parseShorthand(o)
	if err != nil {
		return nil, err
	}
	p := &RateLimitPolicy{}
	k := o.cand("key")
	if k.raw == nil && !short.used() {
		return nil, required(k)
	}
	if k.raw != nil {
		key, ok := stringValue(k.raw)
		if !ok {
			return nil, wrongKind(k, "a string")
		}
		if !ValidRateKey(key) {
			return nil, invalid(k, fmt.Sprintf("a rate limit key matching %s, at most %d characters", rateKeyPattern, MaxRateKeyLen))
		}
		p.Key = key
	}
	l, err := parseLimits(o)
	if err != nil {
		return nil, err
	}
	p.Concurrency, p.Rate, p.Throttle = l.Concurrency, cmpOr(l.Rate, short.rate), cmpOr(l.Throttle, short.throttle)
	if c := o.cand("on_limit"); c.raw != nil {
		s, ok := stringValue(c.raw)
		if !ok {
			return nil, wrongKind(c, `one of "wait", "reschedule", "drop"`)
		}
		switch s {
		case OnLimitWait, OnLimitReschedule, OnLimitDrop:
			p.OnLimit = s
		default:
			return nil, invalid(c, `one of "wait", "reschedule", "drop"`)
		}
	}
	return p, nil
}

// ParseLimits parses the limits of a queue-level rate limit or an override
// (concurrency, rate, throttle); other keys are left to the caller.
func ParseLimits(raw json.RawMessage, prefix string) (Limits, error) {
	o, err := decodeObject(raw, prefix)
	if err != nil {
		return Limits{}, err
	}
	return parseLimits(o)
}

func parseLimits(o object) (Limits, error) {
	var l Limits
	if c := o.cand("concurrency"); c.raw != nil {
		// concurrency 0 pauses the key (ojs-rate-limiting.md 6.2).
		n, err := intValue(c, 0, MaxRateLimit, fmt.Sprintf("an integer from 0 to %d", MaxRateLimit))
		if err != nil {
			return Limits{}, err
		}
		v := int(n)
		l.Concurrency = &v
	}
	var err error
	if l.Rate, err = parseRateWindow(o.cand("rate")); err != nil {
		return Limits{}, err
	}
	if l.Throttle, err = parseRateWindow(o.cand("throttle")); err != nil {
		return Limits{}, err
	}
	if l.Throttle != nil && l.Throttle.Interval() <= 0 {
		return Limits{}, &ValidationError{Field: o.prefix + "throttle", Rule: "a period of at least one nanosecond per start",
			Message: fmt.Sprintf("field '%sthrottle' allows more starts than the period can space", o.prefix)}
	}
	return l, nil
}

func parseRateWindow(c cand) (*RateWindow, error) {
	if c.raw == nil {
		return nil, nil
	}
	o, err := decodeObject(c.raw, c.path()+".")
	if err != nil {
		return nil, err
	}
	if len(o.m) == 0 && c.raw[0] != '{' {
		return nil, wrongKind(c, "an object with limit and period")
	}
	if err := onlyFields(o, "limit", "period"); err != nil {
		return nil, err
	}
	lc, pc := o.cand("limit"), o.cand("period")
	if lc.raw == nil {
		return nil, required(lc)
	}
	if pc.raw == nil {
		return nil, required(pc)
	}
	n, err := intValue(lc, 1, MaxRateLimit, fmt.Sprintf("an integer from 1 to %d", MaxRateLimit))
	if err != nil {
		return nil, err
	}
	s, ok := stringValue(pc.raw)
	if !ok {
		return nil, wrongKind(pc, `an ISO 8601 duration such as "PT1M"`)
	}
	d, err := ParseISODuration(s)
	if err != nil || d <= 0 {
		return nil, invalid(pc, `a positive ISO 8601 duration such as "PT1M"`)
	}
	return &RateWindow{Limit: int(n), Period: Duration(d)}, nil
}

// onlyFields rejects keys other than names, so a typo such as "limt" is
// an error instead of a limit silently not applied.
func onlyFields(o object, names ...string) error {
	for k := range o.m {
		ok := false
		for _, n := range names {
			if k == n {
				ok = true
				break
			}
		}
		if !ok {
			return &ValidationError{Field: o.prefix + k, Rule: "a known field",
				Message: fmt.Sprintf("field '%s%s' is not part of this object (known: %v)", o.prefix, k, names)}
		}
	}
	return nil
}

// RateLimitStatus is the state of a rate limit partition
// (GET /ojs/v1/rate-limits/{key}, ojs-rate-limiting.md 10.1).
type RateLimitStatus struct {
	Key   string `json:"key"`
	Scope string `json:"scope"`
	// Concurrency, Rate and Throttle are the limits in force, with usage.
	Concurrency *ConcurrencyStatus `json:"concurrency,omitempty"`
	Rate        *WindowStatus      `json:"rate,omitempty"`
	Throttle    *ThrottleStatus    `json:"throttle,omitempty"`
	// WaitingCount is the number of jobs parked on the limit.
	WaitingCount int `json:"waiting_count"`
	// Policy is the stored policy (before any override).
	Policy Limits `json:"policy"`
	// Override is the override in force, if any.
	Override *RateLimitOverride `json:"override,omitempty"`
	// RateLimitUntil holds every start until then (RL-R003).
	RateLimitUntil       *Time  `json:"rate_limit_until,omitempty"`
	RateLimitUntilReason string `json:"rate_limit_until_reason,omitempty"`
	// StartsTotal counts every start the limit admitted.
	StartsTotal uint64 `json:"starts_total"`
}

// ConcurrencyStatus is a concurrency limit and its usage.
type ConcurrencyStatus struct {
	Limit     int `json:"limit"`
	Active    int `json:"active"`
	Available int `json:"available"`
}

// WindowStatus is a window limit and the current window's count.
type WindowStatus struct {
	Limit          int      `json:"limit"`
	Period         Duration `json:"period"`
	CurrentCount   int      `json:"current_count"`
	WindowResetsAt *Time    `json:"window_resets_at,omitempty"`
}

// ThrottleStatus is a throttle and its next allowed start.
type ThrottleStatus struct {
	Limit         int      `json:"limit"`
	Period        Duration `json:"period"`
	NextAllowedAt *Time    `json:"next_allowed_at,omitempty"`
}

// RateLimitOverride temporarily replaces limits of a key
// (PUT /ojs/v1/rate-limits/{key}, RL-R004); a nil ExpiresAt lasts until
// replaced or removed.
type RateLimitOverride struct {
	Limits
	ExpiresAt *Time `json:"expires_at,omitempty"`
}

// RateLimitPage is GET /ojs/v1/rate-limits.
type RateLimitPage struct {
	Items      []RateLimitStatus   `json:"items"`
	Pagination RateLimitPagination `json:"pagination"`
}

// RateLimitPagination carries both the extension's page/per_page
// (ojs-rate-limiting.md 10.3) and the binding's limit/offset.
type RateLimitPagination struct {
	Total   int  `json:"total"`
	Page    int  `json:"page"`
	PerPage int  `json:"per_page"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
	HasMore bool `json:"has_more"`
}

// ErrorTypeRateLimited is the error type of a job discarded by on_limit
// "drop".
const ErrorTypeRateLimited = "rate_limited"
