package httpbind

import (
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs/wire"
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
	q, err := wire.ParseEventQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.b.RecentEvents(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wire.NewEventsReply(evs))
}

var parseEventQuery = wire.ParseEventQuery

const eventsMaxLimit = wire.EventsMaxLimit
