package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
)

// Every job publishes several events, so the envelope and the job event
// data have a hand-written encoder: encoding/json's reflection over the
// envelope and its data was three quarters of an event's cost (issue 17).
// The output is, byte for byte, what json.Marshal writes for the
// envelope struct {SpecVersion, ID, Type, Source, Time, Subject
// (omitempty), DataContentType, Data} with the json tags of its
// fields and of jobData and errorData: same field order, same omitempty,
// strings escaped as encoding/json escapes them (HTML-safe, invalid UTF-8
// replaced, U+2028 and U+2029 escaped), raw JSON validated, compacted and
// HTML-escaped as encoding/json does for a json.RawMessage. Other data
// (Publish's, and PublishJob's with extra fields) still goes through
// encoding/json. A field added to jobData or errorData must be added here
// too: TestEncodeMatchesReflection and FuzzEventEncoding fail until it is.

// appendEnvelope appends the JSON envelope of an event. Its data is
// jd when not nil, else data encoded by encoding/json.
func appendEnvelope(b []byte, id *uuidv7.UUID, eventType, source, subject string, at time.Time, jd *jobData, data any) ([]byte, error) {
	b = append(b, `{"specversion":`...)
	b = ojs.AppendString(b, SpecVersion)
	b = append(b, `,"id":"`+IDPrefix...)
	b = id.Append(b)
	b = append(b, `","type":`...)
	b = ojs.AppendString(b, eventType)
	b = append(b, `,"source":`...)
	b = ojs.AppendString(b, source)
	b = append(b, `,"time":`...)
	b = ojs.AppendTime(b, &ojs.Time{Time: at})
	if subject != "" {
		b = append(b, `,"subject":`...)
		b = ojs.AppendString(b, subject)
	}
	b = append(b, `,"datacontenttype":`...)
	b = ojs.AppendString(b, ContentType)
	b = append(b, `,"data":`...)
	if jd != nil {
		var err error
		if b, err = jd.appendJSON(b); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	v, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	b = append(b, v...)
	return append(b, '}'), nil
}

// appendJSON appends d as json.Marshal writes it.
func (d *jobData) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"job_type":`...)
	b = ojs.AppendString(b, d.JobType)
	b = append(b, `,"queue":`...)
	b = ojs.AppendString(b, d.Queue)
	if d.Priority != nil {
		b = strconv.AppendInt(append(b, `,"priority":`...), int64(*d.Priority), 10)
	}
	if d.WorkerID != nil {
		b = ojs.AppendString(append(b, `,"worker_id":`...), *d.WorkerID)
	}
	b = appendIntPtr(b, `,"attempt":`, d.Attempt)
	b = appendIntPtr(b, `,"max_attempts":`, d.MaxAttempts)
	b = appendIntPtr(b, `,"total_attempts":`, d.TotalAttempts)
	if d.DurationMs != nil {
		b = strconv.AppendInt(append(b, `,"duration_ms":`...), *d.DurationMs, 10)
	}
	if len(d.Result) > 0 {
		var err error
		if b, err = appendRaw(append(b, `,"result":`...), d.Result); err != nil {
			return nil, err
		}
	}
	if d.ResultOmitted {
		b = append(b, `,"result_omitted":true`...)
	}
	if d.ResultBytes != 0 {
		b = strconv.AppendInt(append(b, `,"result_bytes":`...), int64(d.ResultBytes), 10)
	}
	if d.Error != nil {
		b = d.Error.appendJSON(append(b, `,"error":`...))
	}
	if d.LastError != nil {
		b = d.LastError.appendJSON(append(b, `,"last_error":`...))
	}
	b = appendTimePtr(b, `,"next_retry_at":`, d.NextRetryAt)
	b = appendTimePtr(b, `,"scheduled_at":`, d.ScheduledAt)
	b = appendTimePtr(b, `,"visible_until":`, d.VisibleUntil)
	b = appendTimePtr(b, `,"created_at":`, d.CreatedAt)
	b = appendTimePtr(b, `,"expired_at":`, d.ExpiredAt)
	if d.TTLMs != nil {
		b = strconv.AppendInt(append(b, `,"ttl_ms":`...), *d.TTLMs, 10)
	}
	if d.TraceID != "" {
		b = ojs.AppendString(append(b, `,"trace_id":`...), d.TraceID)
	}
	if d.DataTruncated {
		b = append(b, `,"data_truncated":true`...)
	}
	if d.EventBytes != 0 {
		b = strconv.AppendInt(append(b, `,"event_bytes":`...), int64(d.EventBytes), 10)
	}
	return append(b, '}'), nil
}

// appendJSON appends e as json.Marshal writes it.
func (e *errorData) appendJSON(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = ojs.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = ojs.AppendString(b, e.Message)
	if e.Retryable != nil {
		b = strconv.AppendBool(append(b, `,"retryable":`...), *e.Retryable)
	}
	if e.StackTrace != "" {
		b = ojs.AppendString(append(b, `,"stack_trace":`...), e.StackTrace)
	}
	return append(b, '}')
}

func appendIntPtr(b []byte, key string, v *int) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(*v), 10)
}

// appendTimePtr appends key and t as ojs.Time's MarshalJSON writes it
// (ojs.AppendTime).
func appendTimePtr(b []byte, key string, t *ojs.Time) []byte {
	if t == nil {
		return b
	}
	return ojs.AppendTime(append(b, key...), t)
}

// errInvalidRaw is the error of a raw JSON value that is not valid JSON.
var errInvalidRaw = errors.New("events: invalid JSON in raw message")

// appendRaw appends the raw JSON value raw as encoding/json writes a
// json.RawMessage: validated, compacted, and with <, >, &, U+2028 and
// U+2029 escaped (encoding/json escapes them in raw messages too, unlike
// json.Compact).
func appendRaw(b, raw []byte) ([]byte, error) {
	if !rawNeedsRewrite(raw) {
		if !json.Valid(raw) {
			return nil, errInvalidRaw
		}
		return append(b, raw...), nil
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(b)
	json.HTMLEscape(out, c.Bytes())
	return out.Bytes(), nil
}

// rawNeedsRewrite reports whether raw may hold whitespace that compacting
// removes or characters that encoding/json escapes.
func rawNeedsRewrite(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2: // 0xE2: first byte of U+2028 and U+2029
			return true
		}
	}
	return false
}
