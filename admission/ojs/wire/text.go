package wire

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/internal/jsonscan"
)

// CheckBody refuses a request body that encoding/json would read without a
// word but not as sent (issue 31): a string that is not UTF-8 text (bytes
// that are not UTF-8, or a \u escape of half a surrogate pair), which it
// would replace with U+FFFD, and a key given twice in one object, of which
// it would keep the last while other readers keep the first. Both are 400
// invalid_payload naming the field, at any depth ("args[2]",
// "meta.note", "jobs[0].options.queue"). RFC 8259 8.1 requires UTF-8;
// ojs-json-format.md 13.6 forbids producers to repeat a key, and jetgate
// refuses rather than guess (docs/decisions.md).
//
// Both bindings call it on every request body before any decoder; a body
// that is not JSON passes, and its decoder reports the syntax error.
func CheckBody(b []byte) error {
	p := jsonscan.Check(b)
	if p == nil {
		return nil
	}
	field := cmp.Or(p.Path, "body")
	ve := &ojs.ValidationError{Field: field}
	switch {
	case p.Duplicate:
		ve.Rule = "a key given once in its object"
		ve.Message = fmt.Sprintf("field '%s' is given twice in one object; send each key once "+
			"(JSON readers differ on which of the two counts)", field)
	case p.InKey:
		ve.Rule = "an object whose keys are valid UTF-8 text"
		ve.Message = fmt.Sprintf("a key of '%s' is not valid UTF-8 text (bytes that are not UTF-8, "+
			`or a \u escape of half a surrogate pair); send keys and strings as UTF-8`, field)
	default:
		ve.Rule = "valid UTF-8 text"
		ve.Message = fmt.Sprintf("field '%s' holds a string that is not valid UTF-8 text (bytes that are not UTF-8, "+
			`or a \u escape of half a surrogate pair); send strings as UTF-8`, field)
	}
	return InEnvelope(ve)
}

// ScheduleTime reads a client's RFC 3339 time that jetgate acts on later
// (a nack's rate_limit_until, an override's expires_at): one past
// ojs.LatestTime, the latest time JetStream can schedule, is refused
// naming the field and that time (issue 31), rather than wrapping around.
func ScheduleTime(field string, raw json.RawMessage) (*ojs.Time, error) {
	var t ojs.Time
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, Invalid(field, "an RFC 3339 time", Describe(raw))
	}
	if t.After(ojs.LatestTime) {
		return nil, ojs.TimeTooLate(field, Describe(raw))
	}
	return &t, nil
}
