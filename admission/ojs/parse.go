package ojs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs/internal/jsonscan"
)

// Limits of the enqueue parser.
const (
	// MaxBatchSize is the most jobs one batch enqueue may carry
	// (ojs-json-format.md 8.3 asks for at least 1,000).
	MaxBatchSize = 1000
	// MaxTypeLength is the longest job type accepted (ojs-core.md 5.1).
	MaxTypeLength = 255
	// MaxQueueLength is the longest queue name accepted (ojs-core.md 5.1).
	MaxQueueLength = 128
	// MaxAttemptsLimit is the largest retry.max_attempts accepted.
	MaxAttemptsLimit = math.MaxInt32
)

// ParseJob turns one enqueue request body (ojs-http-binding.md 9.1) into a
// validated job ready for the server: ID, Queue, Priority, Meta and Retry are
// filled (defaults included), State and the other system fields are left
// empty. Every rejection is a *ValidationError naming the JSON path.
//
// Both the envelope form of ojs-core.md 5 (top-level queue, priority,
// timeout in seconds, scheduled_at, retry with ISO 8601 durations) and the
// binding's options form (options.queue, options.timeout_ms,
// options.delay_until, options.retry with *_ms fields, ...) are accepted; a
// setting given twice with different values is rejected (spec/README.md
// decision 2). A job marshalled with json.Marshal parses back to the same job.
func ParseJob(body []byte) (*Job, error) {
	return parseJobValue(body, "")
}

// ParseTemplate parses a job template jetgate stored itself, whose id its
// owner sets (a workflow step, enqueued under an id derived from its
// workflow's): as ParseJob, except that an empty id, which templates are
// stored with, is no error (issue 32 refuses it from clients) and leaves
// ID empty, not a server-made id, for the caller to set.
func ParseTemplate(body []byte) (*Job, error) {
	top, err := decodeObject(body, "")
	if err != nil {
		return nil, err
	}
	if c := top.cand("id"); c.raw == nil || string(c.raw) == `""` {
		delete(top.m, "id")
		j, err := parseJobObject(top)
		if err != nil {
			return nil, err
		}
		j.ID, j.ServerID = "", false
		return j, nil
	}
	return parseJobObject(top)
}

// ParseBatch parses a batch enqueue body {"jobs":[...]} (ojs-http-binding.md
// 9.2). It is all or nothing: the first invalid job fails the batch, with
// field paths such as "jobs[3].args". The list must hold 1..MaxBatchSize jobs
// and client-chosen ids must be distinct.
func ParseBatch(body []byte) ([]*Job, error) {
	root, err := decodeObject(body, "")
	if err != nil {
		return nil, err
	}
	c := root.cand("jobs")
	if c.raw == nil {
		return nil, required(c)
	}
	if c.raw[0] != '[' {
		return nil, wrongKind(c, "an array of jobs")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(c.raw, &items); err != nil {
		return nil, wrongKind(c, "an array of jobs")
	}
	switch {
	case len(items) == 0:
		return nil, &ValidationError{Field: "jobs", Rule: "a non-empty array of jobs", Received: "[]"}
	case len(items) > MaxBatchSize:
		return nil, &ValidationError{Field: "jobs", Rule: fmt.Sprintf("an array of at most %d jobs", MaxBatchSize),
			Received: fmt.Sprintf("%d jobs", len(items))}
	}
	jobs := make([]*Job, len(items))
	seen := make(map[string]int, len(items))
	for i, item := range items {
		prefix := "jobs[" + strconv.Itoa(i) + "]."
		j, err := parseJobValue(item, prefix)
		if err != nil {
			return nil, err
		}
		if k, dup := seen[j.ID]; dup {
			return nil, &ValidationError{Field: prefix + "id", Rule: "unique within the batch",
				Message: fmt.Sprintf("field '%sid' repeats the id of jobs[%d] (%s)", prefix, k, j.ID)}
		}
		seen[j.ID] = i
		jobs[i] = j
	}
	return jobs, nil
}

// jobStep parses one group of settings from the top level and the options.
type jobStep func(j *Job, top, opts object) error

// jobSteps run in this order, so the first error reported is the most basic.
var jobSteps = []jobStep{
	parseIdentity, parsePayload, parseRouting, parseTimeouts, parseSchedule, parseRetry, parsePolicies,
}

// parseJobValue parses one job object; prefix is "" or "jobs[3]." and starts
// every field path of an error.
func parseJobValue(raw json.RawMessage, prefix string) (*Job, error) {
	top, err := decodeObject(raw, prefix)
	if err != nil {
		return nil, err
	}
	return parseJobObject(top)
}

// parseJobObject parses one decoded job object (see parseJobValue).
func parseJobObject(top object) (*Job, error) {
	opts, err := top.child("options")
	if err != nil {
		return nil, err
	}
	j := &Job{SpecVersion: SpecVersion}
	for _, step := range jobSteps {
		if err := step(j, top, opts); err != nil {
			return nil, err
		}
	}
	j.Extra = extraFields(top, opts)
	return j, nil
}

// Top-level fields the parser reads; every other field Job knows is system
// managed and ignored (ojs-core.md 5.3).
var topFields = map[string]bool{
	"specversion": true, "id": true, "type": true, "args": true, "meta": true, "schema": true,
	"queue": true, "priority": true, "tags": true, "unique": true, "retry": true, "options": true,
	"timeout": true, "timeout_ms": true, "visibility_timeout": true, "visibility_timeout_ms": true,
	"total_timeout": true, "total_timeout_ms": true, "enqueue_ttl": true, "enqueue_ttl_ms": true,
	"grace_period": true, "grace_period_ms": true, "heartbeat_timeout": true, "heartbeat_timeout_ms": true,
	"scheduled_at": true, "expires_at": true, "rate_limit": true,
}

// systemOnly are system-managed names Job has no field for; they are
// dropped like the system fields Job does have.
var systemOnly = map[string]bool{"next_retry_at": true, "retry_delay_ms": true}

// optionFields are the keys of "options" the parser reads: the binding's
// (ojs-http-binding.md 9.1) and the openapi.yaml aliases scheduled_at,
// retry_policy, visibility_timeout and metadata.
var optionFields = map[string]bool{
	"queue": true, "priority": true, "timeout_ms": true, "delay_until": true, "scheduled_at": true,
	"expires_at": true, "retry": true, "retry_policy": true, "unique": true, "tags": true,
	"visibility_timeout_ms": true, "visibility_timeout": true, "pending": true, "metadata": true,
	"rate_limit": true, "total_timeout_ms": true, "enqueue_ttl_ms": true, "grace_period_ms": true,
	"heartbeat_timeout_ms": true,
}

// extraFields keeps what the parser does not read so it round-trips
// (ojs-core.md 5.5 rule 4): unknown top-level fields verbatim, and unknown
// option keys (e.g. options.rate_limit) under Extra["options"], an object
// holding only those keys. Extensions parsed later find them there.
func extraFields(top, opts object) map[string]json.RawMessage {
	var extra map[string]json.RawMessage
	for k, v := range top.m {
		if topFields[k] || knownField(k) || systemOnly[k] {
			continue
		}
		if extra == nil {
			extra = make(map[string]json.RawMessage)
		}
		extra[k] = v
	}
	var unknown map[string]json.RawMessage
	for k, v := range opts.m {
		if !optionFields[k] {
			if unknown == nil {
				unknown = make(map[string]json.RawMessage)
			}
			unknown[k] = v
		}
	}
	if unknown != nil {
		b, err := json.Marshal(unknown)
		if err == nil {
			if extra == nil {
				extra = make(map[string]json.RawMessage)
			}
			extra["options"] = b
		}
	}
	return extra
}

// parseIdentity reads specversion and id.
func parseIdentity(j *Job, top, _ object) error {
	if c := top.cand("specversion"); c.raw != nil {
		s, ok := stringValue(c.raw)
		if !ok {
			return wrongKind(c, `the string "1.0"`)
		}
		if !specVersionOK(s) {
			return invalid(c, `"1.0" (a 1.0.x version is accepted too)`)
		}
	}
	c := top.cand("id")
	if c.raw == nil {
		j.ID, j.ServerID = NewID(), true
		return nil
	}
	s, ok := stringValue(c.raw)
	if !ok {
		return wrongKind(c, idRule)
	}
	// An empty id is malformed like any other (issue 32): a client that
	// wants the server to choose leaves id out (or sends null).
	// ojs-core.md 5.1: a lowercase UUIDv7. An uppercase id is refused, not
	// lowercased (ojs-json-format.md 6.2 would accept it): the client keeps
	// the id it sent, and a lowercased job would not be found under it.
	if !validID(s) {
		return invalid(c, idRule)
	}
	j.ID = s
	return nil
}

// specVersionOK accepts "1.0" and 1.0.x versions such as "1.0.0-rc.1" (the
// Go SDK's OJS-Version): only major.minor governs the envelope
// (ojs-json-format.md 3.2).
func specVersionOK(v string) bool {
	return v == "1.0" || len(v) > 4 && v[:4] == "1.0." && '0' <= v[4] && v[4] <= '9'
}

const typeRule = `a dot-separated job type such as "email.send-v2" (segments [a-z][a-z0-9_-]*, at most 255 characters)`

// parsePayload reads type, args, meta (merged with options.metadata) and schema.
func parsePayload(j *Job, top, opts object) error {
	c := top.cand("type")
	if c.raw == nil {
		return required(c)
	}
	s, ok := stringValue(c.raw)
	if !ok {
		return wrongKind(c, typeRule)
	}
	if !validType(s) {
		return invalid(c, typeRule)
	}
	j.Type = s
	if c = top.cand("args"); c.raw == nil {
		if _, present := top.m["args"]; !present {
			return required(c)
		}
		return &ValidationError{Field: c.path(), Rule: "a JSON array", Received: "null"}
	}
	if c.raw[0] != '[' {
		return wrongKind(c, "a JSON array")
	}
	j.Args = c.raw
	meta, err := parseMeta(top.cand("meta"), opts.cand("metadata"))
	if err != nil {
		return err
	}
	j.Meta = meta
	if c = top.cand("schema"); c.raw != nil {
		if j.Schema, ok = stringValue(c.raw); !ok {
			return wrongKind(c, "a schema URI string")
		}
	}
	return nil
}

// validType checks the type pattern of ojs-core.md 5.1, widened to take
// hyphens after a segment's first letter because clients send such types
// ("retry.test.exponential-backoff", "email.send-v2"). Empty segments,
// uppercase, whitespace and the subject wildcards '*' and '>' stay refused;
// the type never becomes a subject token or KV key.
func validType(s string) bool {
	if len(s) == 0 || len(s) > MaxTypeLength {
		return false
	}
	start := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if start {
				return false
			}
			start = true
		case 'a' <= c && c <= 'z':
			start = false
		case '0' <= c && c <= '9' || c == '_' || c == '-':
			if start {
				return false
			}
		default:
			return false
		}
	}
	return !start
}

// parseMeta reads meta, which must be an object (ojs-core.md 5.2), and merges
// options.metadata (openapi.yaml) into it. A key given in both with different
// values is a conflict. Absent meta is the documented default {}.
func parseMeta(meta, alt cand) (json.RawMessage, error) {
	for _, c := range []cand{meta, alt} {
		if c.raw != nil && c.raw[0] != '{' {
			return nil, wrongKind(c, "a JSON object")
		}
	}
	switch {
	case meta.raw == nil && alt.raw == nil:
		return json.RawMessage("{}"), nil
	case alt.raw == nil:
		return meta.raw, nil
	case meta.raw == nil:
		return alt.raw, nil
	}
	var a, b map[string]json.RawMessage
	if json.Unmarshal(meta.raw, &a) != nil || json.Unmarshal(alt.raw, &b) != nil {
		return nil, wrongKind(meta, "a JSON object")
	}
	for k, v := range b {
		if old, ok := a[k]; ok && !jsonEqual(old, v) {
			return nil, conflict(cand{prefix: meta.path() + ".", key: k, raw: old},
				cand{prefix: alt.path() + ".", key: k, raw: v})
		}
		a[k] = v
	}
	return json.Marshal(a)
}

const (
	queueRule = `a queue name matching [a-z0-9][a-z0-9\-\.]* of at most 128 characters`
	tagsRule  = "an array of strings"
)

var priorityRule = fmt.Sprintf("an integer between 0 and %d (lower runs first)", MaxPriority)

// parseRouting reads queue, priority and tags (top level or options).
func parseRouting(j *Job, top, opts object) error {
	var r resolver
	j.Queue = DefaultQueue
	set(&r, &j.Queue, parseQueue, same, top.cand("queue"), opts.cand("queue"))
	j.Priority = DefaultPriority
	set(&r, &j.Priority, parsePriority, same, top.cand("priority"), opts.cand("priority"))
	set(&r, &j.Tags, parseTags, slices.Equal, top.cand("tags"), opts.cand("tags"))
	return r.err
}

func parseQueue(c cand) (string, bool, error) {
	s, ok := stringValue(c.raw)
	if !ok {
		return "", false, wrongKind(c, queueRule)
	}
	if !validQueue(s) {
		return "", false, invalid(c, queueRule)
	}
	return s, true, nil
}

// validQueue checks the queue pattern of ojs-core.md 5.1.
func validQueue(s string) bool {
	if len(s) == 0 || len(s) > MaxQueueLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || i > 0 && (c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// parsePriority reads a priority: an integer 0..MaxPriority, lower runs
// first (ojs-priority.md PRI-001, PRI-005, PRI-006).
func parsePriority(c cand) (int, bool, error) {
	n, err := intValue(c, 0, MaxPriority, priorityRule)
	return int(n), err == nil, err
}

func parseTags(c cand) ([]string, bool, error) {
	tags, err := stringsValue(c, tagsRule, false)
	if len(tags) == 0 {
		tags = nil // [] and absent are the same job
	}
	return tags, err == nil, err
}

// parseSchedule reads scheduled_at (or options.delay_until, or
// options.scheduled_at) and expires_at (top level or options). Each is an
// RFC 3339 timestamp, echoed later exactly as given, or "+" and an ISO 8601
// duration counted from now ("+PT5S"), echoed as the absolute time it
// resolved to. A time in the past is accepted and means now: a job
// scheduled in the past is available at once, one that expired in the past
// expires at once.
func parseSchedule(j *Job, top, opts object) error {
	var r resolver
	now := time.Now()
	parse := func(c cand) (Time, bool, error) { return parseTime(c, now) }
	var at, exp Time
	if set(&r, &at, parse, Time.equal, top.cand("scheduled_at"), opts.cand("delay_until"),
		opts.cand("scheduled_at")) != nil {
		j.ScheduledAt = &at
	}
	if set(&r, &exp, parse, Time.equal, top.cand("expires_at"), opts.cand("expires_at")) != nil {
		j.ExpiresAt = &exp
	}
	return r.err
}

const timeRule = `an RFC 3339 timestamp with a time zone, such as "2026-03-01T09:00:00Z", ` +
	`or "+" and an ISO 8601 duration from now, such as "+PT5S" or "+P1M"`

// parseTime reads an RFC 3339 timestamp with a zone designator, keeping its
// text for the echo (time.go), or a relative "+<ISO 8601 duration>" counted
// from now (RelativeTime). The instant is in UTC, truncated to
// milliseconds: the precision jetgate stores, so a job reads back exactly
// as stored. A time past LatestTime, the latest jetgate can schedule, is
// refused naming the field and that time (issue 31: it would wrap around
// in JetStream and fire at once).
func parseTime(c cand, now time.Time) (Time, bool, error) {
	s, ok := stringValue(c.raw)
	if !ok {
		return Time{}, false, wrongKind(c, timeRule)
	}
	var t Time
	if rel, ok := strings.CutPrefix(s, "+"); ok {
		at, far, err := RelativeTime(rel, now)
		switch {
		case far:
			return Time{}, false, TimeTooLate(c.path(), shorten(s))
		case err != nil:
			return Time{}, false, invalid(c, timeRule)
		}
		t = *NewTime(at.Truncate(time.Millisecond))
	} else {
		var err error
		if t, err = readTime(s); err != nil {
			return Time{}, false, invalid(c, timeRule)
		}
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return Time{}, false, invalid(c, "a timestamp between years 0000 and 9999 UTC")
	}
	if t.After(LatestTime) {
		return Time{}, false, TimeTooLate(c.path(), shorten(s))
	}
	return t, true, nil
}

// parsePolicies reads unique (top level or options, kept raw), and
// options.pending.
func parsePolicies(j *Job, top, opts object) error {
	var r resolver
	set(&r, &j.Unique, parseObject, jsonEqual, top.cand("unique"), opts.cand("unique"))
	set(&r, &j.Pending, parseBool, same, opts.cand("pending"))
	set(&r, &j.RateLimit, parseRateLimit, sameRateLimit, top.cand("rate_limit"), opts.cand("rate_limit"))
	if r.err == nil && j.RateLimit != nil && j.RateLimit.Key == "" {
		j.RateLimit.Key = j.Queue // shorthand without a key is keyed by the queue (shorthand.go)
	}
	return r.err
}

func parseObject(c cand) (json.RawMessage, bool, error) {
	if c.raw[0] != '{' {
		return nil, false, wrongKind(c, "a JSON object")
	}
	return c.raw, true, nil
}

func parseBool(c cand) (bool, bool, error) {
	switch string(c.raw) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, wrongKind(c, "a boolean")
}

// retryFields are the keys a retry object may hold: ojs-retry.md 2.1 with
// ISO 8601 durations, the binding's *_ms forms, and the strategy under both
// names openapi.yaml gives. Other keys are rejected (ojs-retry.md 14 closes
// the schema), which catches typos such as "max_attempt".
var retryFields = map[string]bool{
	"max_attempts": true, "initial_interval": true, "initial_interval_ms": true,
	"backoff_coefficient": true, "max_interval": true, "max_interval_ms": true, "jitter": true,
	"non_retryable_errors": true, "backoff_type": true, "backoff_strategy": true, "on_exhaustion": true,
}

// parseRetry builds the effective retry policy: the defaults of ojs-retry.md 8
// overridden field by field (8.1) by retry, options.retry and
// options.retry_policy. Each field may come in either unit form; the same
// field given twice with different values is a conflict. Job.MaxAttempts is
// the policy's.
func parseRetry(j *Job, top, opts object) error {
	var objs []object
	for _, c := range []cand{top.cand("retry"), opts.cand("retry"), opts.cand("retry_policy")} {
		if c.raw == nil {
			continue
		}
		o, err := decodeObject(c.raw, c.path()+".")
		if err != nil {
			return err
		}
		bad := ""
		for k := range o.m {
			if !retryFields[k] && (bad == "" || k < bad) { // the first in order: stable errors
				bad = k
			}
		}
		if bad != "" {
			return &ValidationError{Field: o.prefix + bad, Rule: "a retry policy field",
				Message: fmt.Sprintf("field '%s%s' is not a retry policy field (expected max_attempts, "+
					"initial_interval[_ms], backoff_coefficient, max_interval[_ms], jitter, "+
					"non_retryable_errors, backoff_type or on_exhaustion)", o.prefix, bad)}
		}
		objs = append(objs, o)
	}
	p := DefaultRetryPolicy()
	if err := applyRetry(&p, objs); err != nil {
		return err
	}
	j.Retry = &p
	j.MaxAttempts = p.MaxAttempts
	return nil
}

func applyRetry(p *RetryPolicy, objs []object) error {
	fields := func(keys ...string) []cand {
		var cs []cand
		for _, o := range objs {
			for _, k := range keys {
				cs = append(cs, o.cand(k))
			}
		}
		return cs
	}
	var r resolver
	set(&r, &p.MaxAttempts, policyRule(parseAttempts), same, fields("max_attempts")...)
	initFrom := set(&r, &p.InitialInterval, policyRule(parseInterval), same, fields("initial_interval_ms", "initial_interval")...)
	set(&r, &p.BackoffCoefficient, policyRule(parseCoefficient), same, fields("backoff_coefficient")...)
	maxFrom := set(&r, &p.MaxInterval, policyRule(parseInterval), same, fields("max_interval_ms", "max_interval")...)
	set(&r, &p.Jitter, policyRule(parseBool), same, fields("jitter")...)
	set(&r, &p.NonRetryableErrors, policyRule(parseNonRetryable), slices.Equal, fields("non_retryable_errors")...)
	set(&r, &p.Backoff, policyRule(parseBackoff), same, fields("backoff_type", "backoff_strategy")...)
	set(&r, &p.OnExhaustion, policyRule(parseExhaustion), same, fields("on_exhaustion")...)
	if r.err == nil && p.MaxInterval < p.InitialInterval {
		from := cmp.Or(maxFrom, initFrom) // only a given initial_interval can exceed the default max
		return &ValidationError{Field: from.path(), Rule: "a duration >= initial_interval", Semantic: true,
			Received: FormatISODuration(p.MaxInterval.D()) + " < " + FormatISODuration(p.InitialInterval.D())}
	}
	return r.err
}

// policyRule marks the errors of a retry policy field's parser Semantic
// (issue 32): ojs-retry.md 11.1 lists every rule a policy's values must
// meet (max_attempts >= 0, backoff_coefficient >= 1.0, jitter a boolean,
// ...) as one error type, validation.retry_policy_invalid, which the
// bindings answer 422 validation_error. A retry object that is not an
// object, an unknown key in it, or two forms of one field that disagree
// stay 400: the request's shape, not the policy, is wrong.
func policyRule[T any](parse func(cand) (T, bool, error)) func(cand) (T, bool, error) {
	return func(c cand) (T, bool, error) {
		v, ok, err := parse(c)
		if ve, isVE := err.(*ValidationError); isVE {
			m := *ve
			m.Semantic = true
			err = &m
		}
		return v, ok, err
	}
}

// parseAttempts reads max_attempts: ojs-retry.md 2.2 and 11.1 allow 0 (no
// retry, the first failure is terminal) and any positive count.
func parseAttempts(c cand) (int, bool, error) {
	n, err := intValue(c, 0, MaxAttemptsLimit, "an integer >= 0")
	return int(n), err == nil, err
}

const intervalRule = `an ISO 8601 duration > 0 such as "PT1S"`

// parseInterval reads initial_interval / max_interval as an ISO 8601 string
// (> 0), or *_ms as integer milliseconds where 0 means "not set": SDKs that
// send every field of their retry struct send 0 for the ones left unset.
func parseInterval(c cand) (Duration, bool, error) {
	if strings.HasSuffix(c.key, "_ms") {
		d, err := durationInt(c, time.Millisecond)
		return Duration(d), d > 0, err
	}
	d, err := isoValue(c, intervalRule)
	if err == nil && d <= 0 {
		err = invalid(c, intervalRule)
	}
	return Duration(d), err == nil, err
}

// parseCoefficient reads backoff_coefficient: a number >= 1.0 (ojs-retry.md
// 2.2, RET-03). An exact 0 is an SDK's unset field and keeps the default.
func parseCoefficient(c cand) (float64, bool, error) {
	const rule = "a number >= 1.0"
	if !isNumber(c.raw) {
		return 0, false, wrongKind(c, rule)
	}
	f, err := strconv.ParseFloat(string(c.raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || (f != 0 && f < 1) {
		return 0, false, invalid(c, rule)
	}
	return f, f != 0, nil
}

func parseNonRetryable(c cand) ([]string, bool, error) {
	errs, err := stringsValue(c, "an array of non-empty error type strings", true)
	if errs == nil {
		errs = []string{}
	}
	return errs, err == nil, err
}

func parseBackoff(c cand) (string, bool, error) {
	const rule = `one of "exponential", "linear", "polynomial", "none" ("constant")`
	s, ok := stringValue(c.raw)
	if !ok {
		return "", false, wrongKind(c, rule)
	}
	switch s {
	case BackoffExponential, BackoffLinear, BackoffPolynomial, BackoffNone:
		return s, true, nil
	case "constant": // openapi.yaml's name for none
		return BackoffNone, true, nil
	}
	return "", false, invalid(c, rule)
}

func parseExhaustion(c cand) (string, bool, error) {
	const rule = `"discard" or "dead_letter"`
	s, ok := stringValue(c.raw)
	if !ok {
		return "", false, wrongKind(c, rule)
	}
	if s != "discard" && s != "dead_letter" {
		return "", false, invalid(c, rule)
	}
	return s, true, nil
}

// object is a decoded JSON object and the path prefix of its keys: "",
// "options.", "jobs[3].options.". A zero object (absent) has no keys.
type object struct {
	prefix string
	m      map[string]json.RawMessage
}

// decodeObject decodes raw, which must be a JSON object. prefix is the path
// prefix of its keys; the object's own path is prefix without the final dot.
func decodeObject(raw []byte, prefix string) (o object, err error) {
	own := strings.TrimSuffix(prefix, ".")
	raw = bytes.TrimLeft(raw, " \t\r\n")
	o.prefix = prefix
	if len(raw) > 0 && raw[0] == '{' {
		var ok bool
		if o.m, ok = jsonscan.Object(raw); !ok {
			err = json.Unmarshal(raw, &o.m)
		}
	} else {
		err = json.Unmarshal(raw, new(json.RawMessage)) // valid JSON of another kind?
	}
	switch {
	case err != nil: // only a request body can be invalid JSON
		return object{}, &ValidationError{Field: own, Rule: "valid JSON",
			Message: "request body is not valid JSON: " + err.Error()}
	case o.m != nil:
		return o, nil
	case own != "":
		return object{}, wrongKind(cand{key: own, raw: raw}, "a JSON object")
	}
	return object{}, &ValidationError{Rule: "a JSON object", Received: kindOf(raw),
		Message: "request body must be a JSON object (received " + kindOf(raw) + ")"}
}

// child returns the object under key; absent or null is the zero object.
func (o object) child(key string) (object, error) {
	c := o.cand(key)
	if c.raw == nil {
		return object{prefix: c.path() + "."}, nil
	}
	return decodeObject(c.raw, c.path()+".")
}

// cand returns the candidate for key: raw is nil when the key is absent or
// null (ojs-json-format.md 14.2: null means absent).
func (o object) cand(key string) cand {
	raw := o.m[key]
	if string(raw) == "null" {
		raw = nil
	}
	return cand{prefix: o.prefix, key: key, raw: raw}
}

// hasAny reports whether o has any of keys.
func (o object) hasAny(keys []string) bool {
	for _, k := range keys {
		if _, ok := o.m[k]; ok {
			return true
		}
	}
	return false
}

// cand is one place a setting may be given.
type cand struct {
	prefix, key string
	raw         json.RawMessage // nil: not given
}

func (c cand) path() string { return c.prefix + c.key }

// resolver collects the first error of a run of set calls.
type resolver struct{ err error }

// set resolves one setting given in any of cands (spec/README.md decision
// 2): the given ones are parsed; if they disagree (eq) the result is a
// conflict naming both fields, else *dst is set to the first one's value. A
// parser may answer ok=false for a value that means "not set". set returns
// the candidate used, or nil.
func set[T any](r *resolver, dst *T, parse func(cand) (T, bool, error), eq func(T, T) bool, cands ...cand) *cand {
	if r.err != nil {
		return nil
	}
	var from *cand
	var v T
	for i := range cands {
		c := &cands[i]
		if c.raw == nil {
			continue
		}
		x, ok, err := parse(*c)
		if err != nil {
			r.err = err
			return nil
		}
		if !ok {
			continue
		}
		if from == nil {
			from, v = c, x
			continue
		}
		if !eq(v, x) {
			r.err = conflict(*from, *c)
			return nil
		}
	}
	if from != nil {
		*dst = v
	}
	return from
}

func same[T comparable](a, b T) bool { return a == b }

// conflict is the error for one setting given twice with different values.
func conflict(a, b cand) error {
	return &ValidationError{
		Field: b.path(),
		Rule:  "the same value as '" + a.path() + "'",
		Message: fmt.Sprintf("fields '%s' (%s) and '%s' (%s) set the same thing to different values; send one of them",
			a.path(), shortRaw(a.raw), b.path(), shortRaw(b.raw)),
	}
}

func required(c cand) error {
	return &ValidationError{Field: c.path(), Rule: "required",
		Message: fmt.Sprintf("field '%s' is required", c.path())}
}

// wrongKind is the error for a value of the wrong JSON type.
func wrongKind(c cand, rule string) error {
	return &ValidationError{Field: c.path(), Rule: rule, Received: kindOf(c.raw)}
}

// invalid is the error for a value of the right type that breaks the rule.
func invalid(c cand, rule string) error {
	return &ValidationError{Field: c.path(), Rule: rule, Received: shortRaw(c.raw)}
}

// intValue reads an integer in [lo, hi]. Like JSON Schema's "integer", 3.0
// and 3e0 are the integer 3; 1.5 and "3" are rejected.
func intValue(c cand, lo, hi int64, rule string) (int64, error) {
	if !isNumber(c.raw) {
		return 0, wrongKind(c, rule)
	}
	n, err := strconv.ParseInt(string(c.raw), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(c.raw), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, invalid(c, rule)
		}
		n = int64(f)
	}
	if n < lo || n > hi {
		return 0, invalid(c, rule)
	}
	return n, nil
}

// maxDuration is the longest timeout or interval accepted: the largest
// time.Duration in whole seconds, so that a millisecond value rounded up to
// seconds is still accepted when it reads back.
const maxDuration = math.MaxInt64 / time.Second * time.Second

// durationInt reads a non-negative integer count of unit, at most maxDuration.
func durationInt(c cand, unit time.Duration) (time.Duration, error) {
	rule := "an integer number of seconds >= 0"
	if unit == time.Millisecond {
		rule = "an integer number of milliseconds >= 0"
	}
	n, err := intValue(c, 0, int64(maxDuration/unit), rule)
	return time.Duration(n) * unit, err
}

// isoValue reads an ISO 8601 duration string.
func isoValue(c cand, rule string) (time.Duration, error) {
	s, ok := stringValue(c.raw)
	if !ok {
		return 0, wrongKind(c, rule)
	}
	d, err := ParseISODuration(s)
	if err != nil || d > maxDuration {
		return 0, invalid(c, rule)
	}
	return d, nil
}

// stringsValue reads an array of strings.
func stringsValue(c cand, rule string, nonEmpty bool) ([]string, error) {
	var out []string
	if c.raw[0] != '[' || json.Unmarshal(c.raw, &out) != nil {
		return nil, wrongKind(c, rule)
	}
	if nonEmpty && slices.Contains(out, "") {
		return nil, invalid(c, rule)
	}
	return out, nil
}

// stringValue decodes a JSON string; ok is false for any other JSON value.
func stringValue(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	simple := true
	for _, b := range inner {
		if b == '\\' || b >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9')
}

// kindOf names the JSON type of raw.
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// shortRaw shows a received value in an error: the JSON text when short,
// else its type.
func shortRaw(raw []byte) string {
	if len(raw) > 0 && len(raw) <= 48 {
		return string(raw)
	}
	return kindOf(raw)
}

// shorten quotes s for an error, cut to a readable length.
func shorten(s string) string {
	if len(s) > 48 {
		return strconv.Quote(s[:45]) + "..."
	}
	return strconv.Quote(s)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// ceilDiv is d/unit rounded up, without overflow.
func ceilDiv(d, unit time.Duration) time.Duration {
	q := d / unit
	if d%unit != 0 {
		q++
	}
	return q
}

// ParsePriority validates a priority given outside an envelope (PATCH):
// an integer 0..MaxPriority. field names it in errors.
func ParsePriority(raw json.RawMessage, field string) (int, error) {
	n, err := intValue(cand{key: field, raw: raw}, 0, MaxPriority, priorityRule)
	return int(n), err
}
