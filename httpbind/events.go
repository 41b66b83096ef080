package httpbind

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Limits of GET /ojs/v1/events (ojs-events.md 6.4).
const (
	eventsDefaultLimit = 100
	eventsMaxLimit     = 1000
)

// events is GET /ojs/v1/events, the optional polling endpoint of
// ojs-events.md 6.4: ?types=job.completed,job.failed (or ?type=, repeated
// or comma-separated), ?queues=a,b, ?job_types=x,y, ?limit= (default 100,
// at most 1000; larger is lowered), ?since=<RFC 3339> -> {"events":[...]},
// newest first. Filters are lists whose items are alternatives; filters
// combine (ojs.EventQuery.Match). A type may be a prefix, "job.*", or "*"
// (prefix matching as ojs-events.md 6.1 defines for filters).
//
// The cursor (after) is not supported by Backend: it answers 422
// unsupported rather than being ignored, which would return events the
// client already has.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.b.RecentEvents(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if evs == nil {
		evs = []ojs.Event{}
	}
	s.writeJSON(w, r, http.StatusOK, struct {
		Events []ojs.Event `json:"events"`
	}{evs})
}

func parseEventQuery(v url.Values) (ojs.EventQuery, error) {
	q := ojs.EventQuery{Limit: eventsDefaultLimit}
	if v.Has("after") {
		return q, errUnsupported("query parameter 'after' of GET /ojs/v1/events is not supported",
			map[string]any{"parameter": "after"})
	}
	var err error
	if q.Queues, err = eventList(v, "queues", checkQueueName); err != nil {
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
				return q, invalid("type", "an event type such as \"job.completed\", or a prefix such as \"job.*\"", strconv.Quote(short(t)))
			}
			q.Types = append(q.Types, t)
		}
	}
	q.Types = dedupe(q.Types)
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, invalid("limit", fmt.Sprintf("an integer between 1 and %d", eventsMaxLimit), strconv.Quote(short(s)))
		}
		q.Limit = min(n, eventsMaxLimit)
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, invalid("since", "an RFC 3339 timestamp such as \"2026-02-12T10:30:00Z\"", strconv.Quote(short(s)))
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
	return dedupe(out), nil
}

// checkJobType accepts a job type in a filter: dotted segments of
// lowercase letters, digits, '_' and '-', at most 255 bytes (a superset of
// the type pattern of ojs-core.md 5.1; a type outside it matches nothing).
func checkJobType(field, t string) error {
	if len(t) > 255 || !validEventType(t) {
		return invalid(field, `job types such as "email.send"`, strconv.Quote(short(t)))
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
