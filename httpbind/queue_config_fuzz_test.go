package httpbind

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// FuzzQueueConfigAndOverride feeds arbitrary bodies to the decoders of
// PUT /ojs/v1/queues/{name}/config (ojs-backpressure.md 3, every accepted
// shape) and PUT /ojs/v1/rate-limits/{key} (RL-R004): an error is a
// ValidationError naming a field or a binding error (a 4xx); an accepted
// queue bound passes Validate, and an accepted override sets a limit
// within range.
func FuzzQueueConfigAndOverride(f *testing.F) {
	for _, s := range []string{
		`{"backpressure":{"max_depth":1000,"strategy":"reject"}}`,
		`{"capacity":{"max_depth":10,"on_overflow":"drop_oldest"}}`,
		`{"max_size":5,"overflow_policy":"drop_newest","max_size_bytes":1048576}`,
		`{"backpressure":null}`, `{"max_size":1e400}`, `{"max_size":18446744073709551616}`, `{"max_size":-1}`,
		`{"backpressure":{},"capacity":{}}`, `{"concurrency":2,"expires_at":"2026-12-01T00:00:00Z"}`,
		`{"rate":{"limit":10,"period":"PT1M"},"throttle":{"limit":1,"period":"PT1S"}}`,
		`{"concurrency":0}`, `{"expires_at":"+PT5S","concurrency":1}`, `{}`, `[]`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) {
			var ve *ojs.ValidationError
			var be *bindingError
			switch {
			case errors.As(err, &ve):
				// An empty field is a key "" the client sent, quoted ''.
				if ve.Field == "" && !strings.Contains(ve.Error(), "''") {
					t.Fatalf("%s %q: ValidationError names no field: %v", what, body, err)
				}
			case errors.As(err, &be):
				if be.Status < 400 || be.Status > 499 {
					t.Fatalf("%s %q: status %d", what, body, be.Status)
				}
			default:
				t.Fatalf("%s %q: error %T %v", what, body, err, err)
			}
		}
		if o, err := parseObject(body); err != nil {
			check("parseObject", err)
		} else if bp, err := decodeBackpressure(o); err != nil {
			check("decodeBackpressure", err)
		} else if bp != nil {
			if err := bp.Validate(""); err != nil {
				t.Fatalf("%q: accepted a bound that does not validate: %+v: %v", body, bp, err)
			}
		}
		req := httptest.NewRequest(http.MethodPut, "/ojs/v1/rate-limits/k", bytes.NewReader(body))
		ov, err := decodeOverride(req)
		if err != nil {
			check("decodeOverride", err)
			return
		}
		if ov.Limits.Empty() {
			t.Fatalf("%q: accepted an override without limits", body)
		}
		if c := ov.Limits.Concurrency; c != nil && (*c < 0 || *c > ojs.MaxRateLimit) {
			t.Fatalf("%q: concurrency %d", body, *c)
		}
		if ov.ExpiresAt != nil && ov.ExpiresAt.IsZero() {
			t.Fatalf("%q: zero expires_at", body)
		}
	})
}
