package httpbind

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// FuzzPriorityAdminBodies feeds arbitrary bodies to the decoders of PUT
// .../aging and PUT .../worker-groups/{group} (ojs-priority.md 8.2, 7.3):
// they never panic, refuse with a ValidationError (a 400 naming a field),
// and what they accept is valid and, for aging, survives the stored form.
func FuzzPriorityAdminBodies(f *testing.F) {
	for _, seed := range []string{
		`{"interval_ms":30000,"step":2,"min_priority":1}`,
		`{"interval":"PT1M"}`,
		`{"interval":"PT1S","interval_ms":1000}`,
		`{"interval_ms":0}`, `{"step":-1}`, `{"interval":"P31D"}`,
		`{"strategy":"weighted","queues":[{"name":"a","weight":5},"b"],"weights":{"b":0}}`,
		`{"strategy":"strict","queues":["a","a"]}`,
		`{"strategy":"weighted","queues":["a"],"weights":{"a":0}}`,
		`{}`, `[]`, `null`, `{"queues":null}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		o, err := parseObject([]byte(body))
		if err != nil {
			return
		}
		if a, err := decodeAging(o); err != nil {
			if !errors.As(err, new(*ojs.ValidationError)) {
				t.Fatalf("aging %q: %v is not a validation error", body, err)
			}
		} else {
			if err := a.Validate(""); err != nil {
				t.Fatalf("aging %q accepted but invalid: %v", body, err)
			}
			b, _ := json.Marshal(a)
			var back ojs.Aging
			if err := json.Unmarshal(b, &back); err != nil || back != *a {
				t.Fatalf("aging %q: stored form %s reads back as %+v, %v", body, b, back, err)
			}
		}
		if g, err := decodeGroup("g", o); err != nil {
			if !errors.As(err, new(*ojs.ValidationError)) {
				t.Fatalf("group %q: %v is not a validation error", body, err)
			}
		} else if err := g.Validate(); err != nil {
			t.Fatalf("group %q accepted but invalid: %v", body, err)
		}
	})
}
