package ojs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Job records are encoded on every transition and every response, so Job
// has a hand-written encoder: encoding/json's reflection, plus the
// validate-and-compact pass it runs over every MarshalJSON result, was a
// tenth of jetgate's CPU per job (bench/). The output is what encoding/json
// writes for the struct tags, field for field; raw JSON fields (args,
// meta, result...) are validated and compacted but, unlike encoding/json,
// not HTML-escaped: a client's "<b>" in args comes back as it was sent
// (the same JSON value either way). Errors (rare, on failed attempts only) go
// through encoding/json, and so do rate limit policies (small, and only on
// the jobs that have one). A field added to Job must be added here too:
// TestAppendJSONMatchesReflection fails until it is.

// AppendJSON appends j's JSON encoding to b: the envelope, then Internal
// as x_jetgate, then Extra.
func (j *Job) AppendJSON(b []byte) ([]byte, error) { return j.appendJSON(b, true) }

// AppendPublicJSON appends the JSON encoding of j.Public() to b (j without
// its server bookkeeping), without copying j: the jobs of a response.
func (j *Job) AppendPublicJSON(b []byte) ([]byte, error) { return j.appendJSON(b, false) }

func (j *Job) appendJSON(b []byte, internal bool) ([]byte, error) {
	var err error
	b = append(b, `{"specversion":`...)
	b = appendString(b, j.SpecVersion)
	b = append(b, `,"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, j.Type)
	b = append(b, `,"queue":`...)
	b = appendString(b, j.Queue)
	b = append(b, `,"args":`...)
	args := j.Args
	if args == nil {
		args = json.RawMessage("[]")
	}
	if b, err = appendRaw(b, args); err != nil {
		return nil, err
	}
	if len(j.Meta) > 0 {
		b = append(b, `,"meta":`...)
		if b, err = appendRaw(b, j.Meta); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	if len(j.Tags) > 0 {
		b = append(b, `,"tags":`...)
		b = appendStrings(b, j.Tags)
	}
	if j.Schema != "" {
		b = append(b, `,"schema":`...)
		b = appendString(b, j.Schema)
	}
	if len(j.Unique) > 0 {
		b = append(b, `,"unique":`...)
		if b, err = appendRaw(b, j.Unique); err != nil {
			return nil, err
		}
	}
	b = appendIntField(b, `,"timeout":`, int64(j.Timeout))
	b = appendIntField(b, `,"timeout_ms":`, j.TimeoutMs)
	b = appendIntField(b, `,"total_timeout":`, int64(j.TotalTimeout))
	b = appendIntField(b, `,"total_timeout_ms":`, j.TotalTimeoutMs)
	b = appendIntField(b, `,"enqueue_ttl":`, int64(j.EnqueueTTL))
	b = appendIntField(b, `,"enqueue_ttl_ms":`, j.EnqueueTTLMs)
	if j.GracePeriod != nil {
		b = strconv.AppendInt(append(b, `,"grace_period":`...), int64(*j.GracePeriod), 10)
	}
	if j.GracePeriodMs != nil {
		b = strconv.AppendInt(append(b, `,"grace_period_ms":`...), *j.GracePeriodMs, 10)
	}
	b = appendIntField(b, `,"heartbeat_timeout":`, int64(j.HeartbeatTimeout))
	b = appendIntField(b, `,"heartbeat_timeout_ms":`, j.HeartbeatTimeoutMs)
	b = appendTimeField(b, `,"scheduled_at":`, j.ScheduledAt)
	b = appendTimeField(b, `,"expires_at":`, j.ExpiresAt)
	if j.Retry != nil {
		b = append(b, `,"retry":`...)
		b = j.Retry.appendJSON(b)
	}
	if j.RateLimit != nil {
		rl, err := json.Marshal(j.RateLimit)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"rate_limit":`...), rl...)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, string(j.State))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = appendTimeField(b, `,"created_at":`, j.CreatedAt)
	b = appendTimeField(b, `,"enqueued_at":`, j.EnqueuedAt)
	b = appendTimeField(b, `,"started_at":`, j.StartedAt)
	b = appendTimeField(b, `,"completed_at":`, j.CompletedAt)
	b = appendTimeField(b, `,"cancelled_at":`, j.CancelledAt)
	b = appendTimeField(b, `,"discarded_at":`, j.DiscardedAt)
	b = appendTimeField(b, `,"activated_at":`, j.ActivatedAt)
	b = appendTimeField(b, `,"next_attempt_at":`, j.NextAttemptAt)
	if j.RetryDelayMs != nil {
		b = strconv.AppendInt(append(b, `,"retry_delay_ms":`...), *j.RetryDelayMs, 10)
	}
	if j.WorkerID != "" {
		b = append(b, `,"worker_id":`...)
		b = appendString(b, j.WorkerID)
	}
	if b, err = j.appendErrors(b); err != nil {
		return nil, err
	}
	if len(j.Result) > 0 {
		b = append(b, `,"result":`...)
		if b, err = appendRaw(b, j.Result); err != nil {
			return nil, err
		}
	}
	if j.Progress != nil {
		b = appendFloat(append(b, `,"progress":`...), *j.Progress)
	}
	if len(j.ProgressData) > 0 {
		b = append(b, `,"progress_data":`...)
		if b, err = appendRaw(b, j.ProgressData); err != nil {
			return nil, err
		}
	}
	if j.ProgressMessage != "" {
		b = appendString(append(b, `,"progress_message":`...), j.ProgressMessage)
	}
	b = appendTimeField(b, `,"progress_updated_at":`, j.ProgressUpdatedAt)
	if len(j.LastCheckpoint) > 0 {
		b = append(b, `,"last_checkpoint":`...)
		if b, err = appendRaw(b, j.LastCheckpoint); err != nil {
			return nil, err
		}
	}
	if internal && !j.Internal.IsZero() {
		b = append(b, `,"x_jetgate":`...)
		b = j.Internal.appendJSON(b)
	}
	if b, err = j.appendExtra(b); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func (j *Job) appendErrors(b []byte) ([]byte, error) {
	if j.Error != nil {
		e, err := json.Marshal(j.Error)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"error":`...), e...)
	}
	if len(j.Errors) > 0 {
		e, err := json.Marshal(j.Errors)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"errors":`...), e...)
	}
	return b, nil
}

// appendExtra appends the unknown fields, in key order as encoding/json
// writes a map.
func (j *Job) appendExtra(b []byte) ([]byte, error) {
	if len(j.Extra) == 0 {
		return b, nil
	}
	keys := make([]string, 0, len(j.Extra))
	for k := range j.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		v := j.Extra[k]
		if v == nil {
			b = append(b, "null"...)
			continue
		}
		if b, err = appendRaw(b, v); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (p *RetryPolicy) appendJSON(b []byte) []byte {
	b = append(b, `{"max_attempts":`...)
	b = strconv.AppendInt(b, int64(p.MaxAttempts), 10)
	b = append(b, `,"initial_interval":`...)
	b = appendString(b, FormatISODuration(p.InitialInterval.D()))
	b = append(b, `,"backoff_coefficient":`...)
	b = appendFloat(b, p.BackoffCoefficient)
	b = append(b, `,"max_interval":`...)
	b = appendString(b, FormatISODuration(p.MaxInterval.D()))
	b = append(b, `,"jitter":`...)
	b = strconv.AppendBool(b, p.Jitter)
	b = append(b, `,"non_retryable_errors":`...)
	if p.NonRetryableErrors == nil {
		b = append(b, "null"...)
	} else {
		b = appendStrings(b, p.NonRetryableErrors)
	}
	if p.Backoff != "" {
		b = append(b, `,"backoff_type":`...)
		b = appendString(b, p.Backoff)
	}
	if p.OnExhaustion != "" {
		b = append(b, `,"on_exhaustion":`...)
		b = appendString(b, p.OnExhaustion)
	}
	return append(b, '}')
}

func (in *Internal) appendJSON(b []byte) []byte {
	b = append(b, '{')
	n := len(b)
	sep := func(b []byte) []byte {
		if len(b) > n {
			b = append(b, ',')
		}
		return b
	}
	if in.Token != "" {
		b = appendString(append(sep(b), `"token":`...), in.Token)
	}
	if in.LeaseUntil != nil {
		b = appendTime(append(sep(b), `"lease_until":`...), in.LeaseUntil)
	}
	if in.BeatMs != 0 {
		b = strconv.AppendInt(append(sep(b), `"beat_ms":`...), in.BeatMs, 10)
	}
	if in.HeldAck != "" {
		b = appendString(append(sep(b), `"held_ack":`...), in.HeldAck)
	}
	if in.HeldToken != "" {
		b = appendString(append(sep(b), `"held_token":`...), in.HeldToken)
	}
	if len(in.Limits) > 0 {
		b = appendStrings(append(sep(b), `"limits":`...), in.Limits)
	}
	if in.DepthSeq != 0 {
		b = strconv.AppendUint(append(sep(b), `"depth_seq":`...), in.DepthSeq, 10)
	}
	if in.OverSeq != 0 {
		b = strconv.AppendUint(append(sep(b), `"over_seq":`...), in.OverSeq, 10)
	}
	if in.Origin != "" {
		b = appendString(append(sep(b), `"origin":`...), in.Origin)
	}
	return append(b, '}')
}

func appendIntField(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

func appendTimeField(b []byte, key string, t *Time) []byte {
	if t == nil {
		return b
	}
	return appendTime(append(b, key...), t)
}

func appendTime(b []byte, t *Time) []byte {
	if t.text != "" {
		return appendString(b, t.text) // the client's text (time.go)
	}
	b = append(b, '"')
	b = appendTimeFormat(b, t.Time)
	return append(b, '"')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendRaw appends a raw JSON value, compacted; invalid JSON is an error,
// as with encoding/json.
func appendRaw(b, raw []byte) ([]byte, error) {
	if !needsCompact(raw) {
		if !json.Valid(raw) {
			return nil, &json.MarshalerError{Type: rawMessageType, Err: errInvalidRaw}
		}
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, &json.MarshalerError{Type: rawMessageType, Err: err}
	}
	return buf.Bytes(), nil
}

// needsCompact reports whether raw may hold whitespace between tokens (or
// around the value) that compacting would remove.
func needsCompact(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			return true
		}
	}
	return false
}

// appendFloat formats f as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0') // encoding/json refuses these; never stored
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	errInvalidRaw  = errors.New("invalid JSON in raw message")
)

// AppendString appends s as a JSON string, escaped as encoding/json does
// by default (HTML-safe, invalid UTF-8 replaced, U+2028 and U+2029
// escaped): the escaper of every hand-written encoder (this package's, and
// the event encoder of jetstream/events).
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// AppendTime appends t as Time's MarshalJSON writes it (the text it was
// read from, or TimeFormat), without allocating: the event encoder's
// timestamps.
func AppendTime(b []byte, t *Time) []byte { return appendTime(b, t) }

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// EncodedSize tells whether j's record (AppendJSON) fits in limit bytes,
// and how large it is, without encoding it when a bound computed from the
// lengths of its fields fits: the enqueue path checks every job
// (PayloadLimits.CheckJob), and almost every job is far smaller than its
// limit. size is then the bound, not the exact size; over the limit it is
// exact.
func (j *Job) EncodedSize(limit int) (size int, fits bool, err error) {
	if b := j.sizeBound(); b <= limit {
		return b, true, nil
	}
	buf := GetBuffer()
	defer PutBuffer(buf)
	out, err := j.AppendJSON((*buf)[:0])
	if err != nil {
		return 0, false, err
	}
	*buf = out
	return len(out), len(out) <= limit, nil
}

// Bounds of sizeBound. A string may grow six times when written (each
// byte of "<" becomes \u003c); raw JSON only shrinks (it is compacted),
// except where encoding/json writes it (error details and backtraces),
// which escapes HTML too.
const (
	// boundFixed covers every key, bracket and comma of a record, its
	// numbers and its timestamps in jetgate's format: measured at 1.7 KiB
	// with every field set (TestSizeBoundHolds).
	boundFixed = 2048
	// boundPerItem covers the quotes, comma and key of one string or raw
	// value in a list or map.
	boundPerItem = 48
	// boundPerError covers the keys, numbers and times of one error.
	boundPerError = 512
)

// sizeBound is at least len(j.AppendJSON(nil)) (TestSizeBoundHolds), at
// the cost of summing the lengths of its variable fields.
func (j *Job) sizeBound() int {
	n := boundFixed + len(j.Args) + len(j.Meta) + len(j.Unique) + len(j.Result) + len(j.ProgressData) + len(j.LastCheckpoint)
	str := func(s string) { n += 6*len(s) + boundPerItem }
	for _, s := range []string{j.SpecVersion, j.ID, j.Type, j.Queue, j.Schema, string(j.State), j.WorkerID, j.ProgressMessage,
		j.Internal.Token, j.Internal.HeldAck, j.Internal.HeldToken, j.Internal.Origin} {
		str(s)
	}
	for _, list := range [][]string{j.Tags, j.Internal.Limits} {
		for _, s := range list {
			str(s)
		}
	}
	for _, t := range []*Time{j.ScheduledAt, j.ExpiresAt} {
		if t != nil {
			str(t.text)
		}
	}
	if r := j.Retry; r != nil {
		str(r.Backoff)
		str(r.OnExhaustion)
		for _, s := range r.NonRetryableErrors {
			str(s)
		}
	}
	if rl := j.RateLimit; rl != nil {
		str(rl.Key)
		str(rl.OnLimit)
		n += 4 * boundPerItem // limits and periods
	}
	errBound := func(e *JobError) {
		n += boundPerError + 6*(len(e.Code)+len(e.Type)+len(e.Message)+len(e.Details)+len(e.Backtrace)+len(e.TimeoutKind))
		for _, t := range []*Time{e.At, e.RateLimitUntil} {
			if t != nil {
				str(t.text)
			}
		}
	}
	if j.Error != nil {
		errBound(j.Error)
	}
	for i := range j.Errors {
		errBound(&j.Errors[i])
	}
	for k, v := range j.Extra {
		str(k)
		n += len(v)
	}
	return n
}
