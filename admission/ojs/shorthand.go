package ojs

import (
	"fmt"
	"maps"
	"time"
)

// The rate limit shorthand clients send beside the full form of
// ojs-rate-limiting.md 6.1, and what each means in it:
//
//	{"rate": N, "period": "second"|"minute"|"hour"|"day"}
//	    a window of N starts per period: "rate": {"limit": N, "period": "PT1M"};
//	    period may also be an ISO 8601 duration.
//	{"max_per_second": N}
//	    a throttle of N evenly spaced starts per second:
//	    "throttle": {"limit": N, "period": "PT1S"}.
//
// Shorthand and full form may be mixed when they set different limits
// ({"concurrency": 5, "max_per_second": 10}); a shorthand and a full-form
// field that set the same limit ("max_per_second" with "throttle", "period"
// with a "rate" object) are refused, naming both. A policy with shorthand
// and no key is keyed by its job's queue: the key is the queue's name
// (queue names are valid keys), so GET /ojs/v1/rate-limits/<queue> shows it.

// shorthandPeriods are the period words of the shorthand.
var shorthandPeriods = map[string]time.Duration{
	"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
}

const periodRule = `"second", "minute", "hour", "day" or a positive ISO 8601 duration, with a numeric rate`

// shorthand is what a policy's shorthand fields set.
type shorthand struct {
	rate, throttle *RateWindow
}

func (s shorthand) used() bool { return s.rate != nil || s.throttle != nil }

// parseShorthand reads the shorthand fields of a rate_limit object and
// returns the object without them, for the full form's parser.
func parseShorthand(o object) (shorthand, object, error) {
	var s shorthand
	rate, period, mps := o.cand("rate"), o.cand("period"), o.cand("max_per_second")
	if rate.raw != nil && isNumber(rate.raw) {
		w, err := shorthandRate(rate, period)
		if err != nil {
			return s, o, err
		}
		s.rate = w
	} else if period.raw != nil {
		if rate.raw != nil {
			return s, o, mixed(period, rate, "a rate object carries its own period ('"+rate.path()+".period')")
		}
		return s, o, &ValidationError{Field: period.path(), Rule: periodRule,
			Message: fmt.Sprintf("field '%s' goes with a numeric '%s' (shorthand for a window of rate starts per period)", period.path(), rate.path())}
	}
	if mps.raw != nil {
		if th := o.cand("throttle"); th.raw != nil {
			return s, o, mixed(mps, th, "both set the throttle")
		}
		n, err := intValue(mps, 1, MaxRateLimit, fmt.Sprintf("an integer from 1 to %d (evenly spaced starts per second)", MaxRateLimit))
		if err != nil {
			return s, o, err
		}
		s.throttle = &RateWindow{Limit: int(n), Period: Duration(time.Second)}
	}
	if !s.used() {
		return s, o, nil
	}
	rest := object{prefix: o.prefix, m: maps.Clone(o.m)}
	delete(rest.m, "period")
	delete(rest.m, "max_per_second")
	if s.rate != nil {
		delete(rest.m, "rate")
	}
	return s, rest, nil
}

// shorthandRate reads {"rate": N, "period": P}.
func shorthandRate(rate, period cand) (*RateWindow, error) {
	n, err := intValue(rate, 1, MaxRateLimit, fmt.Sprintf("an integer from 1 to %d with a period, or an object with limit and period", MaxRateLimit))
	if err != nil {
		return nil, err
	}
	if period.raw == nil {
		return nil, &ValidationError{Field: period.path(), Rule: periodRule,
			Message: fmt.Sprintf("field '%s' is required with a numeric '%s' (%s)", period.path(), rate.path(), periodRule)}
	}
	s, ok := stringValue(period.raw)
	if !ok {
		return nil, wrongKind(period, periodRule)
	}
	d, ok := shorthandPeriods[s]
	if !ok {
		iso, err := ParseISODuration(s)
		if err != nil || iso <= 0 {
			return nil, invalid(period, periodRule)
		}
		d = iso
	}
	return &RateWindow{Limit: int(n), Period: Duration(d)}, nil
}

// mixed is the error for a shorthand field and a full-form field that set
// the same limit.
func mixed(a, b cand, why string) error {
	return &ValidationError{Field: a.path(), Rule: "the shorthand or the full form, not both",
		Message: fmt.Sprintf("fields '%s' and '%s' cannot be combined: %s; send one of them", a.path(), b.path(), why)}
}

// cmpOr returns a if it is not nil, else b.
func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
