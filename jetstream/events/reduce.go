package events

import (
	"encoding/json"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
)

// envFields holds the envelope fields of one event being emitted. Its
// data travels beside it, not in it: data of type any goes to
// encoding/json, and a struct holding both would make the job data of
// every event escape to the heap.
type envFields struct {
	id      uuidv7.UUID
	typ     string
	source  string
	subject string
	at      time.Time
}

// appendEvent appends the JSON envelope of an event whose data is data
// when not nil (PublishJob's with extra fields, Publish's), else jd.
func appendEvent(b []byte, e *envFields, jd *jobData, data any) ([]byte, error) {
	if data != nil {
		return appendEnvelope(b, &e.id, e.typ, e.source, e.subject, e.at, nil, data)
	}
	return appendEnvelope(b, &e.id, e.typ, e.source, e.subject, e.at, jd, nil)
}

// maxKeptString bounds the codes and trace id a truncated event keeps.
const maxKeptString = 256

// reduce returns the event encoded in at most limit bytes, or nil when
// even its smallest form does not fit. full is the size of its full
// encoding, which did not fit. Rather than losing a large event (a
// job.completed whose result is beyond NATS max_payload, or beyond the own
// ring's bound), it is sent or kept in a smaller form that says so:
//
//  1. without its result: "result_omitted": true, "result_bytes": N, the
//     rest as it was (job events with a result);
//  2. with only its small fields: job_type, queue, the numbers, times and
//     worker id of its type, error codes without messages or stack
//     traces, "data_truncated": true and "event_bytes": the full size
//     (job events); {"data_truncated": true, "event_bytes": N} for other
//     events.
//
// The envelope (id, type, source, time, subject) is the same in every
// form, so a reader sees one event whichever copy it gets. send counts
// the copies it publishes or keeps reduced in Stats.Reduced; this path
// allocates, it is rare.
func (p *Publisher) reduce(e envFields, jd *jobData, data any, full, limit int) []byte {
	try := func(jd *jobData, data any) []byte {
		b, err := appendEvent(nil, &e, jd, data)
		if err != nil || len(b) > limit {
			return nil
		}
		return b
	}
	if jd != nil && len(jd.Result) > 0 {
		if m, ok := data.(map[string]json.RawMessage); ok {
			m = maps.Clone(m)
			delete(m, "result")
			m["result_omitted"] = json.RawMessage("true")
			m["result_bytes"], _ = json.Marshal(len(jd.Result))
			if b := try(nil, m); b != nil {
				return b
			}
		} else if data == nil {
			d := *jd
			d.Result, d.ResultOmitted, d.ResultBytes = nil, true, len(jd.Result)
			if b := try(&d, nil); b != nil {
				return b
			}
		}
	}
	if jd == nil {
		return try(nil, map[string]any{"data_truncated": true, "event_bytes": full})
	}
	d := *jd
	d.JobType, d.Queue = cut(d.JobType), cut(d.Queue)
	d.TraceID = cut(d.TraceID)
	if d.WorkerID != nil {
		d.WorkerID = ptr(cut(*d.WorkerID))
	}
	if len(jd.Result) > 0 {
		d.Result, d.ResultOmitted, d.ResultBytes = nil, true, len(jd.Result)
	}
	d.Error, d.LastError = codeOnly(jd.Error), codeOnly(jd.LastError)
	d.DataTruncated, d.EventBytes = true, full
	return try(&d, nil)
}

// codeOnly returns e without its message and stack trace.
func codeOnly(e *errorData) *errorData {
	if e == nil {
		return nil
	}
	return &errorData{Code: cut(e.Code), Retryable: e.Retryable}
}

// cut shortens s to at most maxKeptString bytes, at a rune boundary.
func cut(s string) string {
	if len(s) <= maxKeptString {
		return s
	}
	n := maxKeptString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
