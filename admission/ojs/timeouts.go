package ojs

import (
	"fmt"
	"strings"
	"time"
)

// The timeout fields of ojs-timeouts.md 6, each in whole seconds at the top
// level and in milliseconds as <name>_ms (top level or options, the
// binding's form; spec/README.md decision 2). The binding's visibility
// timeout (visibility_timeout_ms, visibility_timeout) is the heartbeat
// timeout under its core name: both say how long an active job's worker
// may stay silent.
//
// Validation follows ojs-timeouts.md 6: timeout, total_timeout,
// enqueue_ttl and heartbeat_timeout are positive, grace_period is >= 0,
// and total_timeout is at least timeout when both are given. The official
// clients send options.timeout_ms and options.visibility_timeout_ms as 0
// for "not set", so 0 in those two option fields means the server default.

// timeoutValue is a timeout and whether it came in whole seconds rather
// than milliseconds.
type timeoutValue struct {
	d      time.Duration
	coarse bool
}

// sameTimeout compares two timeouts. A value in seconds cannot say 1.5 s, so
// it agrees with a millisecond value that rounds up to it: a job with
// timeout_ms 1500 is stored and shown with timeout 2 and parses back.
func sameTimeout(a, b timeoutValue) bool {
	if a.coarse == b.coarse {
		return a.d == b.d
	}
	if a.coarse {
		a, b = b, a
	}
	return ceilDiv(a.d, time.Second)*time.Second == b.d
}

// timeoutParser reads one timeout candidate: an integer of seconds, or of
// milliseconds for a key ending in _ms, or (visibility_timeout only) an
// ISO 8601 duration. zeroOK accepts 0 (grace_period); zeroUnset reads 0 as
// "not given" (the clients' zero options).
func timeoutParser(zeroOK bool, zeroUnset map[string]bool) func(cand) (timeoutValue, bool, error) {
	return func(c cand) (timeoutValue, bool, error) {
		if c.key == "visibility_timeout" && c.raw[0] == '"' {
			d, err := isoValue(c, `an ISO 8601 duration such as "PT30S" or a positive integer number of seconds`)
			if err == nil && d <= 0 {
				err = invalid(c, "a positive duration")
			}
			return timeoutValue{d: d}, err == nil, err
		}
		unit, what := time.Second, "seconds"
		if strings.HasSuffix(c.key, "_ms") {
			unit, what = time.Millisecond, "milliseconds"
		}
		lo, rule := int64(1), "a positive integer number of "+what
		if zeroOK {
			lo, rule = 0, "an integer number of "+what+" >= 0"
		}
		if zeroUnset[c.path()] && string(c.raw) == "0" {
			return timeoutValue{}, false, nil
		}
		n, err := intValue(c, lo, int64(maxDuration/unit), rule)
		return timeoutValue{d: time.Duration(n) * unit, coarse: unit == time.Second}, err == nil, err
	}
}

// clientZeros are the option fields the official clients send as 0 when
// unset.
var clientZeros = map[string]bool{"options.timeout_ms": true, "options.visibility_timeout_ms": true}

var (
	positiveTimeout = timeoutParser(false, clientZeros)
	graceTimeout    = timeoutParser(true, nil)
)

// timeoutKeys are every key timeoutCands may read, in either object.
var timeoutKeys = []string{
	"timeout", "timeout_ms", "total_timeout", "total_timeout_ms", "enqueue_ttl", "enqueue_ttl_ms",
	"grace_period", "grace_period_ms", "heartbeat_timeout", "heartbeat_timeout_ms",
	"visibility_timeout_ms", "visibility_timeout",
}

// timeoutCands are the places one timeout may be given, the exact
// (millisecond) forms first so that they are the value kept.
func timeoutCands(top, opts object, name string, aliases ...string) []cand {
	cs := []cand{opts.cand(name + "_ms"), top.cand(name + "_ms"), top.cand(name)}
	for _, a := range aliases {
		cs = append(cs, top.cand(a), opts.cand(a))
	}
	return cs
}

// parseTimeouts reads the timeouts of ojs-timeouts.md 6. Unset ones stay
// zero (nil for grace_period): the server defaults apply.
func parseTimeouts(j *Job, top, opts object) error {
	if !top.hasAny(timeoutKeys) && !opts.hasAny(timeoutKeys) {
		// None given (most jobs): nothing to resolve, and no candidate
		// lists built (issue 17, CPU per job).
		j.Timeout, j.TimeoutMs, j.TotalTimeout, j.TotalTimeoutMs = 0, 0, 0, 0
		j.EnqueueTTL, j.EnqueueTTLMs, j.HeartbeatTimeout, j.HeartbeatTimeoutMs = 0, 0, 0, 0
		return nil
	}
	var r resolver
	var exec, total, ttl, grace, beat timeoutValue
	execFrom := set(&r, &exec, positiveTimeout, sameTimeout, timeoutCands(top, opts, "timeout")...)
	totalFrom := set(&r, &total, positiveTimeout, sameTimeout, timeoutCands(top, opts, "total_timeout")...)
	set(&r, &ttl, positiveTimeout, sameTimeout, timeoutCands(top, opts, "enqueue_ttl")...)
	graceFrom := set(&r, &grace, graceTimeout, sameTimeout, timeoutCands(top, opts, "grace_period")...)
	set(&r, &beat, positiveTimeout, sameTimeout,
		timeoutCands(top, opts, "heartbeat_timeout", "visibility_timeout_ms", "visibility_timeout")...)
	if r.err != nil {
		return r.err
	}
	if execFrom != nil && totalFrom != nil && total.d < exec.d {
		return &ValidationError{Field: totalFrom.path(), Rule: "at least the job's timeout",
			Received: shortRaw(totalFrom.raw),
			Message: fmt.Sprintf("field '%s' (%s) is shorter than '%s' (%s): total_timeout must be at least timeout",
				totalFrom.path(), shortRaw(totalFrom.raw), execFrom.path(), shortRaw(execFrom.raw))}
	}
	j.Timeout, j.TimeoutMs = splitTimeout(exec.d)
	j.TotalTimeout, j.TotalTimeoutMs = splitTimeout(total.d)
	j.EnqueueTTL, j.EnqueueTTLMs = splitTimeout(ttl.d)
	j.HeartbeatTimeout, j.HeartbeatTimeoutMs = splitTimeout(beat.d)
	if graceFrom != nil {
		s, ms := splitTimeout(grace.d)
		j.GracePeriod, j.GracePeriodMs = &s, &ms
	}
	return nil
}

// splitTimeout returns d in whole milliseconds and whole seconds, both
// rounded up. A duration given finer than a millisecond (an ISO 8601
// "PT80.00001S") is first rounded up to one, so the two fields the record
// keeps agree with each other when parsed again (fuzzing found 80 000 ms
// beside 81 s).
func splitTimeout(d time.Duration) (int, int64) {
	ms := ceilDiv(d, time.Millisecond)
	return int(ceilDiv(time.Duration(ms)*time.Millisecond, time.Second)), int64(ms)
}

// TimeoutFields are the names PATCH /ojs/v1/jobs/{id} accepts for timeouts.
var TimeoutFields = []string{
	"timeout", "timeout_ms", "total_timeout", "total_timeout_ms", "enqueue_ttl", "enqueue_ttl_ms",
	"grace_period", "grace_period_ms", "heartbeat_timeout", "heartbeat_timeout_ms",
	"visibility_timeout", "visibility_timeout_ms",
}

// TimeoutPatch is a change of a job's timeouts (ojs-timeouts.md 12.3,
// dynamic timeout adjustment): each set flag replaces that timeout with the
// value in Values.
type TimeoutPatch struct {
	Values                                   Job
	Timeout, Total, TTL, Grace, HeartbeatSet bool
}

// ParseTimeoutPatch reads the timeout fields of a PATCH body, an object
// (other fields are ignored here), with the enqueue validation rules.
func ParseTimeoutPatch(raw []byte) (*TimeoutPatch, error) {
	top, err := decodeObject(raw, "")
	if err != nil {
		return nil, err
	}
	p := &TimeoutPatch{}
	if err := parseTimeouts(&p.Values, top, object{prefix: "options."}); err != nil {
		return nil, err
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := top.m[n]; ok {
				return true
			}
		}
		return false
	}
	p.Timeout = has("timeout", "timeout_ms")
	p.Total = has("total_timeout", "total_timeout_ms")
	p.TTL = has("enqueue_ttl", "enqueue_ttl_ms")
	p.Grace = has("grace_period", "grace_period_ms")
	p.HeartbeatSet = has("heartbeat_timeout", "heartbeat_timeout_ms", "visibility_timeout", "visibility_timeout_ms")
	return p, nil
}

// Apply writes the patch into j and checks the rule that spans fields:
// total_timeout at least timeout.
func (p *TimeoutPatch) Apply(j *Job) error {
	v := &p.Values
	if p.Timeout {
		j.Timeout, j.TimeoutMs = v.Timeout, v.TimeoutMs
	}
	if p.Total {
		j.TotalTimeout, j.TotalTimeoutMs = v.TotalTimeout, v.TotalTimeoutMs
	}
	if p.TTL {
		j.EnqueueTTL, j.EnqueueTTLMs = v.EnqueueTTL, v.EnqueueTTLMs
	}
	if p.Grace {
		j.GracePeriod, j.GracePeriodMs = clonePtr(v.GracePeriod), clonePtr(v.GracePeriodMs)
	}
	if p.HeartbeatSet {
		j.HeartbeatTimeout, j.HeartbeatTimeoutMs = v.HeartbeatTimeout, v.HeartbeatTimeoutMs
	}
	if j.TotalTimeoutMs > 0 && j.TimeoutMs > 0 && j.TotalTimeoutMs < j.TimeoutMs {
		return &ValidationError{Field: "total_timeout", Rule: "at least the job's timeout",
			Message: fmt.Sprintf("total_timeout (%d ms) would be shorter than timeout (%d ms)", j.TotalTimeoutMs, j.TimeoutMs)}
	}
	return nil
}
