package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// MaxCursorLen bounds the opaque cursor a client sends back.
const MaxCursorLen = 1024

// ParsePage reads limit, offset and cursor (ojs-http-binding.md 17.1).
// limit defaults to def; a limit above hi is lowered to hi rather than
// refused (the response's pagination.limit shows the page size used), a
// limit below 1 or a negative offset answers 400.
func ParsePage(q url.Values, def, hi int) (ojs.PageRequest, error) {
	p := ojs.PageRequest{Limit: def, Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, Invalid("limit", fmt.Sprintf("an integer between 1 and %d", hi), strconv.Quote(Short(v)))
		}
		p.Limit = min(n, hi)
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<31-1 {
			return p, Invalid("offset", "an integer >= 0", strconv.Quote(Short(v)))
		}
		p.Offset = n
	}
	if len(p.Cursor) > MaxCursorLen {
		return p, Invalid("cursor", "a cursor returned as pagination.next_cursor", Short(p.Cursor))
	}
	return p, nil
}

// pageCursor is the content of the cursors httpbind itself hands out, for
// lists it pages in memory. Clients must treat them as opaque (17.1).
type pageCursor struct {
	Off int `json:"off"`
}

func EncodeCursor(offset int) string {
	b, _ := json.Marshal(pageCursor{Off: offset})
	return base64.RawURLEncoding.EncodeToString(b)
}

func DecodeCursor(c string) (int, error) {
	var pc pageCursor
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(b, &pc)
	}
	if err != nil || pc.Off < 0 {
		return 0, Invalid("cursor", "a cursor returned as pagination.next_cursor", strconv.Quote(Short(c)))
	}
	return pc.Off, nil
}

// Limits of GET /ojs/v1/events (ojs-events.md 6.4).
const (
	EventsDefaultLimit = 100
	EventsMaxLimit     = 1000
)

// ParseEventQuery reads the query of GET /ojs/v1/events (ojs-events.md
// 6.4); the cursor "after" answers 422 unsupported.
func ParseEventQuery(v url.Values) (ojs.EventQuery, error) {
	q := ojs.EventQuery{Limit: EventsDefaultLimit}
	if v.Has("after") {
		return q, ErrUnsupported("query parameter 'after' of GET /ojs/v1/events is not supported",
			map[string]any{"parameter": "after"})
	}
	var err error
	if q.Queues, err = eventList(v, "queues", CheckQueueName); err != nil {
		return q, err
	}
	if q.JobTypes, err = eventList(v, "job_types", checkJobType); err != nil {
		return q, err
	}
	for _, raw := range append(v["type"], v["types"]...) {
		for t := range strings.SplitSeq(raw, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if t != "*" && !validEventType(strings.TrimSuffix(t, ".*")) {
				return q, Invalid("type", "an event type such as \"job.completed\", or a prefix such as \"job.*\"", strconv.Quote(Short(t)))
			}
			q.Types = append(q.Types, t)
		}
	}
	q.Types = Dedupe(q.Types)
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, Invalid("limit", fmt.Sprintf("an integer between 1 and %d", EventsMaxLimit), strconv.Quote(Short(s)))
		}
		q.Limit = min(n, EventsMaxLimit)
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, Invalid("since", "an RFC 3339 timestamp such as \"2026-02-12T10:30:00Z\"", strconv.Quote(Short(s)))
		}
		q.Since = t.UTC()
	}
	return q, nil
}

// eventList reads a comma-separated list parameter (it may be repeated),
// checking each item with check.
func eventList(v url.Values, name string, check func(field, item string) error) ([]string, error) {
	var out []string
	for _, raw := range v[name] {
		for item := range strings.SplitSeq(raw, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			if err := check(name, item); err != nil {
				return nil, err
			}
			out = append(out, item)
		}
	}
	return Dedupe(out), nil
}

// checkJobType accepts a job type in a filter: dotted segments of
// lowercase letters, digits, '_' and '-', at most 255 bytes (a superset of
// the type pattern of ojs-core.md 5.1; a type outside it matches nothing).
func checkJobType(field, t string) error {
	if len(t) > 255 || !validEventType(t) {
		return Invalid(field, `job types such as "email.send"`, strconv.Quote(Short(t)))
	}
	return nil
}

// validEventType accepts dot-separated lowercase names ("job.completed",
// "queue.pressure_warning", "rate_limit.exceeded").
func validEventType(t string) bool {
	if len(t) > 128 {
		return false
	}
	for seg := range strings.SplitSeq(t, ".") {
		if seg == "" {
			return false
		}
		for i := range len(seg) {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}
