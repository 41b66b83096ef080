package httpbind

import (
	"errors"
	"net/url"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// FuzzEventQuery: any query string of GET /ojs/v1/events either parses or
// is a 400 naming the parameter (or the 422 for the unsupported "after");
// a parsed query has a limit within [1, eventsMaxLimit] and only valid
// queue names (ojs-core.md 4.2) in its queue filter.
func FuzzEventQuery(f *testing.F) {
	for _, s := range []string{
		"types=job.completed,job.failed&limit=50", "type=job.*&queues=email,default&since=2026-02-12T10:30:00Z",
		"job_types=email.send&limit=100000", "limit=0", "limit=-1", "limit=99999999999999999999",
		"queues=%3E", "queues=$JS.API.%3E", "queues=a%20b", "queues=..", "type=*", "after=x", "since=+PT5S", "%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseEventQuery(v)
		if err != nil {
			var ve *ojs.ValidationError
			var be *bindingError
			if !errors.As(err, &ve) && !errors.As(err, &be) {
				t.Fatalf("%q: error %T %v", raw, err, err)
			}
			if ve != nil && ve.Field == "" {
				t.Fatalf("%q: error names no parameter: %v", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > eventsMaxLimit {
			t.Fatalf("%q: limit %d", raw, q.Limit)
		}
		for _, name := range q.Queues {
			if checkQueueName("queues", name) != nil {
				t.Fatalf("%q: accepted queue %q", raw, name)
			}
		}
	})
}
