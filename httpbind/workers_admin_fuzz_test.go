package httpbind

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// FuzzWorkerBodies feeds arbitrary bodies to the decoders of a heartbeat's
// worker fields (ojs-worker-protocol.md 4.2) and of PUT
// /ojs/v1/admin/pools/{pool} (ojs-fair-scheduling.md 10.1): they never
// panic, refuse with a ValidationError (a 400 naming a field), and what
// they accept is valid.
func FuzzWorkerBodies(f *testing.F) {
	for _, seed := range []string{
		`{"worker_id":"w","state":"quiet","active_jobs":3,"active_job_ids":[],"hostname":"h","pid":1,"queues":["a"],"concurrency":4,"labels":["x"],"started_at":"2026-01-01T00:00:00Z","metadata":{"k":"v"},"pool":"p"}`,
		`{"state":"drain","active_jobs":[]}`, `{"state":"sleeping"}`, `{"pid":-1}`, `{"metadata":[1]}`,
		`{"queues":["a","b"],"strategy":"weighted","weights":{"a":9},"concurrency":20}`,
		`{"queues":[{"name":"a","weight":2}]}`, `{"queues":["a"],"concurrency":0}`, `{"queues":["a"],"name":"b"}`,
		`{}`, `[]`, `null`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		o, err := parseObject([]byte(body))
		if err != nil {
			return
		}
		if in, err := decodeWorkerInfo(o); err != nil {
			if !errors.As(err, new(*ojs.ValidationError)) {
				t.Fatalf("worker %q: %v is not a validation error", body, err)
			}
		} else if in.State != "" && !ojs.ValidWorkerState(in.State) || in.ActiveJobs < -1 || in.PID < 0 {
			t.Fatalf("worker %q accepted as %+v", body, in)
		}
		if g, err := decodePool("p", o); err != nil {
			if !errors.As(err, new(*ojs.ValidationError)) {
				t.Fatalf("pool %q: %v is not a validation error", body, err)
			}
		} else if err := g.Validate(); err != nil || g.Concurrency < 0 {
			t.Fatalf("pool %q accepted but invalid: %v", body, err)
		}
	})
}
