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
// ojs-events.md 6.4: ?type=job.completed&type=job.failed (or
// ?types=a,b or ?type=a,b), ?limit= (default 100, at most 1000; larger is
// lowered), ?since=<RFC 3339> -> {"events":[...]}.
//
// The cursor (after) and the queues and job_types filters of 6.4 are not
// supported by Backend: they answer 422 unsupported rather than being
// ignored, which would return events the client asked to exclude.
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
	for _, p := range []string{"after", "queues", "job_types"} {
		if v.Has(p) {
			return q, errUnsupported(fmt.Sprintf("query parameter '%s' of GET /ojs/v1/events is not supported", p),
				map[string]any{"parameter": p})
		}
	}
	for _, raw := range append(v["type"], v["types"]...) {
		for t := range strings.SplitSeq(raw, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if !validEventType(t) {
				return q, invalid("type", "an event type such as \"job.completed\"", strconv.Quote(short(t)))
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
