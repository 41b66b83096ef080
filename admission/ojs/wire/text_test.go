package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Issue 31 item 4: a time a client gives that jetgate acts on later (a
// nack's rate_limit_until, an override's expires_at) past the latest time
// JetStream can schedule is 400 naming the field and that time; up to it
// it is read as given.
func TestIssue31FarTimesInWorkerAndAdminBodies(t *testing.T) {
	t.Parallel()
	id := ojs.NewID()
	nack := func(at string) error {
		_, err := wire.DecodeNack([]byte(`{"job_id":"` + id + `","error":{"message":"x","rate_limit_until":"` + at + `"}}`))
		return err
	}
	override := func(at string) error {
		_, err := wire.DecodeOverride([]byte(`{"concurrency":1,"expires_at":"` + at + `"}`))
		return err
	}
	for name, dec := range map[string]func(string) error{"error.rate_limit_until": nack, "expires_at": override} {
		for _, at := range []string{"2300-01-01T00:00:00Z", "2262-04-11T23:47:16.855Z", "9999-12-31T23:59:59+01:00"} {
			err := dec(at)
			var ve *ojs.ValidationError
			if !errors.As(err, &ve) || ve.Field != name || !strings.Contains(ve.Error(), ojs.LatestTimeText) {
				t.Errorf("%s %s: %v, want a 400 naming %s and %s", name, at, err, name, ojs.LatestTimeText)
			}
			if e := wire.Classify(err); e.Status != 400 {
				t.Errorf("%s %s: status %d", name, at, e.Status)
			}
		}
		for _, at := range []string{"2262-04-11T23:47:16.854Z", "2027-01-01T00:00:00+02:00"} {
			if err := dec(at); err != nil {
				t.Errorf("%s %s: %v", name, at, err)
			}
		}
	}
}
