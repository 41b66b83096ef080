package wire

import (
	"bytes"
	"net/url"
	"strconv"

	"github.com/jetgate/jetgate/admission/ojs"
)

// DecodeOverride reads the body of PUT /ojs/v1/rate-limits/{key}
// (ojs-rate-limiting.md 10.2, RL-R004): {"concurrency"?, "rate"?,
// "throttle"?, "expires_at"?}, at least one limit.
func DecodeOverride(body []byte) (ojs.RateLimitOverride, error) {
	var ov ojs.RateLimitOverride
	body = limitsBody(body)
	o, err := ParseObject(body)
	if err != nil {
		return ov, err
	}
	if err := OnlyFields(o, "concurrency", "rate", "throttle", "expires_at"); err != nil {
		return ov, err
	}
	if ov.Limits, err = ojs.ParseLimits(body, ""); err != nil {
		return ov, err
	}
	if raw, ok := o.Get("expires_at"); ok {
		if ov.ExpiresAt, err = ScheduleTime("expires_at", raw); err != nil {
			return ov, err
		}
	}
	if ov.Limits.Empty() {
		return ov, Invalid("concurrency", "present: an override sets at least one of concurrency, rate, throttle", "none of them")
	}
	return ov, nil
}

// DecodeQueueLimits reads the body of PUT
// /ojs/v1/admin/queues/{name}/rate-limit (7.2, RL-R005):
// {"concurrency"?, "rate"?, "throttle"?}, at least one.
func DecodeQueueLimits(body []byte) (*ojs.Limits, error) {
	body = limitsBody(body)
	o, err := ParseObject(body)
	if err != nil {
		return nil, err
	}
	if err := OnlyFields(o, "concurrency", "rate", "throttle"); err != nil {
		return nil, err
	}
	l, err := ojs.ParseLimits(body, "")
	if err != nil {
		return nil, err
	}
	if l.Empty() {
		return nil, Invalid("concurrency", "present: a queue rate limit sets at least one of concurrency, rate, throttle", "none of them")
	}
	return &l, nil
}

// limitsBody reads an empty body of limits as {}, so the missing limits
// are what is reported.
func limitsBody(body []byte) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}")
	}
	return body
}

// RateKey checks a rate limit key named in a path or body field "key".
func RateKey(key string) (string, error) {
	if !ojs.ValidRateKey(key) {
		return "", Invalid("key", "a rate limit key matching ^[a-zA-Z0-9][a-zA-Z0-9._:-]*$ (at most 255 characters)", strconv.Quote(Short(key)))
	}
	return key, nil
}

// Page sizes of GET /ojs/v1/rate-limits (10.3 shows 20).
const (
	rateLimitsDefaultLimit = 20
	rateLimitsMaxLimit     = 200
)

// RateLimitsPage reads the query of GET /ojs/v1/rate-limits (10.3): page
// and per_page as the extension shows, or the binding's limit and offset.
func RateLimitsPage(q url.Values) (ojs.PageRequest, error) {
	page, err := ParsePage(q, rateLimitsDefaultLimit, rateLimitsMaxLimit)
	if err != nil {
		return page, err
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return page, Invalid("per_page", "an integer between 1 and 200", strconv.Quote(Short(v)))
		}
		page.Limit = min(n, rateLimitsMaxLimit)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return page, Invalid("page", "an integer >= 1", strconv.Quote(Short(v)))
		}
		page.Offset = (n - 1) * page.Limit
	}
	return page, nil
}
