package ojs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// ojs-rate-limiting.md 6: the policy parses from the top level and from
// options, with every member.
func TestParseRateLimitPolicy(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"type":"a.b","args":[],"rate_limit":{"key":"api.partner.com","concurrency":10,"rate":{"limit":500,"period":"PT1M"},"throttle":{"limit":10,"period":"PT1S"},"on_limit":"wait"}}`,
		`{"type":"a.b","args":[],"options":{"rate_limit":{"key":"api.partner.com","concurrency":10,"rate":{"limit":500,"period":"PT1M"},"throttle":{"limit":10,"period":"PT1S"},"on_limit":"wait"}}}`,
	} {
		j := mustParse(t, body)
		p := j.RateLimit
		if p == nil || p.Key != "api.partner.com" || *p.Concurrency != 10 || p.Rate.Limit != 500 ||
			p.Rate.Period.D() != time.Minute || p.Throttle.Interval() != 100*time.Millisecond || p.Action() != OnLimitWait {
			t.Fatalf("%s: policy %+v", body, p)
		}
	}
	j := mustParse(t, `{"type":"a.b","args":[],"rate_limit":{"key":"k","concurrency":0}}`)
	if *j.RateLimit.Concurrency != 0 || j.RateLimit.Action() != OnLimitWait {
		t.Fatalf("concurrency 0 (a paused key) and default on_limit wait: %+v", j.RateLimit)
	}
}

// Every validation rule of a rate_limit names its field.
func TestParseRateLimitPolicyRejects(t *testing.T) {
	t.Parallel()
	cases := []struct{ policy, field string }{
		{`{"concurrency":1}`, "rate_limit.key"},
		{`{"key":""}`, "rate_limit.key"},
		{`{"key":"-lead"}`, "rate_limit.key"},
		{`{"key":"has space"}`, "rate_limit.key"},
		{`{"key":"a*b"}`, "rate_limit.key"},
		{`{"key":"` + strings.Repeat("k", 256) + `"}`, "rate_limit.key"},
		{`{"key":7}`, "rate_limit.key"},
		{`{"key":"k","concurrency":-1}`, "rate_limit.concurrency"},
		{`{"key":"k","concurrency":1.5}`, "rate_limit.concurrency"},
		{`{"key":"k","rate":{"limit":0,"period":"PT1M"}}`, "rate_limit.rate.limit"},
		{`{"key":"k","rate":{"limit":5}}`, "rate_limit.rate.period"},
		{`{"key":"k","rate":{"period":"PT1M"}}`, "rate_limit.rate.limit"},
		{`{"key":"k","rate":{"limit":5,"period":"1 minute"}}`, "rate_limit.rate.period"},
		{`{"key":"k","rate":{"limit":5,"period":"PT0S"}}`, "rate_limit.rate.period"},
		{`{"key":"k","throttle":{"limit":5,"period":60}}`, "rate_limit.throttle.period"},
		{`{"key":"k","throttle":{"limit":5,"period":"PT1S","burst":2}}`, "rate_limit.throttle.burst"},
		{`{"key":"k","on_limit":"queue"}`, "rate_limit.on_limit"},
		{`{"key":"k","concurency":3}`, "rate_limit.concurency"},
		{`"k"`, "rate_limit"},
	}
	for _, c := range cases {
		_, err := ParseJob([]byte(`{"type":"a.b","args":[],"rate_limit":` + c.policy + `}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: error %v, want a validation error on %s", c.policy, err, c.field)
		}
	}
	// Given in both places with different values: a conflict naming both.
	_, err := ParseJob([]byte(`{"type":"a.b","args":[],"rate_limit":{"key":"a"},"options":{"rate_limit":{"key":"b"}}}`))
	if err == nil || !strings.Contains(err.Error(), "options.rate_limit") || !strings.Contains(err.Error(), "'rate_limit'") {
		t.Errorf("conflict: %v", err)
	}
}
