package ojs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Issue 16: a rate_limit may use the shorthand clients send.
// {"rate": N, "period": word} is a window of N per period; {"max_per_second":
// N} a throttle of N per second; without a key, the policy is keyed by the
// job's queue (the key is the queue's name).
func TestParseRateLimitShorthand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body     string
		key      string
		rate     *RateWindow
		throttle *RateWindow
		conc     int
	}{
		{`{"rate_limit":{"rate":10,"period":"second"}}`, "default", &RateWindow{10, Duration(time.Second)}, nil, -1},
		{`{"queue":"email","rate_limit":{"rate":100,"period":"minute","key":"smtp"}}`, "smtp", &RateWindow{100, Duration(time.Minute)}, nil, -1},
		{`{"options":{"queue":"email","rate_limit":{"rate":5,"period":"hour"}}}`, "email", &RateWindow{5, Duration(time.Hour)}, nil, -1},
		{`{"rate_limit":{"rate":7,"period":"day"}}`, "default", &RateWindow{7, Duration(24 * time.Hour)}, nil, -1},
		{`{"rate_limit":{"rate":7,"period":"PT30S"}}`, "default", &RateWindow{7, Duration(30 * time.Second)}, nil, -1},
		{`{"queue":"q1","rate_limit":{"max_per_second":20}}`, "q1", nil, &RateWindow{20, Duration(time.Second)}, -1},
		{`{"rate_limit":{"key":"api","max_per_second":4,"concurrency":2}}`, "api", nil, &RateWindow{4, Duration(time.Second)}, 2},
		{`{"rate_limit":{"rate":60,"period":"minute","max_per_second":2}}`, "default", &RateWindow{60, Duration(time.Minute)}, &RateWindow{2, Duration(time.Second)}, -1},
		{`{"rate_limit":{"key":"k","rate":60,"period":"minute","throttle":{"limit":1,"period":"PT2S"}}}`, "k", &RateWindow{60, Duration(time.Minute)}, &RateWindow{1, Duration(2 * time.Second)}, -1},
	} {
		j := mustParse(t, withTypeArgs(tt.body))
		p := j.RateLimit
		if p == nil || p.Key != tt.key || !sameWindow(p.Rate, tt.rate) || !sameWindow(p.Throttle, tt.throttle) ||
			(tt.conc < 0) != (p.Concurrency == nil) || (p.Concurrency != nil && *p.Concurrency != tt.conc) {
			t.Errorf("%s: policy %+v (rate %+v, throttle %+v)", tt.body, p, p.Rate, p.Throttle)
		}
		assertRoundTrip(t, j)
	}
}

func sameWindow(a, b *RateWindow) bool { return a == b || a != nil && b != nil && *a == *b }

// Shorthand errors name their field and rule; a shorthand and a full-form
// field that set the same limit are refused naming both.
func TestParseRateLimitShorthandRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ policy, field, both string }{
		{`{"rate":10}`, "rate_limit.period", "rate_limit.rate"},
		{`{"rate":10,"period":"fortnight"}`, "rate_limit.period", ""},
		{`{"rate":10,"period":60}`, "rate_limit.period", ""},
		{`{"rate":0,"period":"second"}`, "rate_limit.rate", ""},
		{`{"rate":1.5,"period":"second"}`, "rate_limit.rate", ""},
		{`{"period":"minute"}`, "rate_limit.period", "rate_limit.rate"},
		{`{"key":"k","rate":{"limit":5,"period":"PT1M"},"period":"minute"}`, "rate_limit.period", "rate_limit.rate"},
		{`{"max_per_second":0}`, "rate_limit.max_per_second", ""},
		{`{"max_per_second":"10"}`, "rate_limit.max_per_second", ""},
		{`{"max_per_second":10,"throttle":{"limit":1,"period":"PT1S"}}`, "rate_limit.max_per_second", "rate_limit.throttle"},
		{`{"key":"bad key","max_per_second":1}`, "rate_limit.key", ""},
		{`{"concurrency":3}`, "rate_limit.key", ""}, // full form alone still needs a key (6.2)
	} {
		_, err := ParseJob([]byte(`{"type":"a.b","args":[],"rate_limit":` + c.policy + `}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: error %v, want a validation error on %s", c.policy, err, c.field)
			continue
		}
		if c.both != "" && !strings.Contains(err.Error(), "'"+c.both+"'") {
			t.Errorf("%s: error %q does not name %s", c.policy, err, c.both)
		}
	}
}
