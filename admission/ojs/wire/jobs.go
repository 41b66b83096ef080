package wire

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
)

// DecodeJob reads the job envelope of an enqueue (PUSH): its validation
// errors answer invalid_payload.
func DecodeJob(b []byte) (*ojs.Job, error) {
	j, err := ojs.ParseJob(b)
	return j, InEnvelope(err)
}

// DecodeBatch reads the {"jobs":[...]} of a batch enqueue.
func DecodeBatch(b []byte) ([]*ojs.Job, error) {
	jobs, err := ojs.ParseBatch(b)
	return jobs, InEnvelope(err)
}

// JobID checks a job id named by the request (a path segment or an "id"
// field). Job ids are UUIDv7 (ojs-core.md 5.1) and every stored job was
// validated on enqueue, so anything else cannot name a job: it answers
// 404 as resource, without reaching the backend.
func JobID(id, resource string) (string, error) {
	if ojs.ValidID(id) != nil {
		return "", &ojs.NotFoundError{Resource: resource, ID: Short(id)}
	}
	return id, nil
}

// Patch is a decoded PATCH of a job (ojs-priority.md 8.1, ojs-timeouts.md
// 12.3): a priority, timeouts, or both.
type Patch struct {
	Priority *int
	// Timeouts is nil when only the priority changes.
	Timeouts *ojs.TimeoutPatch
}

// DecodePatch reads the body of PATCH /ojs/v1/jobs/{id}. timeouts says
// whether the backend can change timeouts; without it only "priority" is
// accepted. Unknown fields answer 400 naming them.
func DecodePatch(b []byte, timeouts bool) (Patch, error) {
	var p Patch
	o, err := ParseObject(b)
	if err != nil {
		return p, err
	}
	fields := []string{"priority"}
	if timeouts {
		fields = append(fields, ojs.TimeoutFields...)
	}
	if err := OnlyFields(o, fields...); err != nil {
		return p, err
	}
	if raw, ok := o.Get("priority"); ok {
		prio, err := ojs.ParsePriority(raw, "priority")
		if err != nil {
			return p, err
		}
		p.Priority = &prio
	}
	if len(o) == 0 || (p.Priority == nil && len(o) == 1 && o["priority"] != nil) {
		return p, Invalid("priority", "a field to change: "+strings.Join(fields, ", "), "nothing")
	}
	if !timeouts || (p.Priority != nil && len(o) == 1) {
		return p, nil
	}
	p.Timeouts, err = ojs.ParseTimeoutPatch(b)
	return p, err
}

// PublicJobs renders jobs for a response: never null, no bookkeeping.
func PublicJobs(jobs []*ojs.Job) []*ojs.Job {
	out := make([]*ojs.Job, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			out = append(out, j.Public())
		}
	}
	return out
}

// WithField returns the public form of j with one more top-level field,
// without touching j (its Extra map is copied, not shared).
func WithField(j *ojs.Job, key string, v any) *ojs.Job {
	p := j.Public()
	b, err := json.Marshal(v)
	if err != nil {
		return p
	}
	extra := make(map[string]json.RawMessage, len(p.Extra)+1)
	maps.Copy(extra, p.Extra)
	extra[key] = b
	p.Extra = extra
	return p
}
