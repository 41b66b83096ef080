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

// Issue 31 item 3: every size limit answers 413 payload_too_large, not
// retryable, naming the limit and the size (when known) and the part of
// the request, also inside a batch item.
func TestIssue31TooLargeNamesLimitAndSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err          error
		field        string
		limit, size  int64
		inMsg, noMsg string
	}{
		{wire.ErrTooLarge(1024, 2048), "", 1024, 2048, "request body is 2048 bytes, over the limit of 1024 bytes", ""},
		{wire.ErrTooLarge(1024, 0), "", 1024, 0, "request body exceeds the limit of 1024 bytes", "is 0"},
		{wire.PrefixField("acks[3].", &ojs.TooLargeError{Field: "result", What: "ack result as stored", Limit: 16384, Size: 20000}),
			"acks[3].result", 16384, 20000, "field 'acks[3].result' (ack result as stored) is 20000 bytes, over the limit of 16384", ""},
		{wire.PrefixField("jobs[2].", &ojs.TooLargeError{What: "job as stored", Limit: 983040, Size: 1000000}),
			"jobs[2]", 983040, 1000000, "field 'jobs[2]'", ""},
	} {
		e := wire.Classify(tc.err)
		env := e.Envelope("r").Error
		if e.Status != 413 || e.Code != ojs.CodePayloadTooLarge || env.Retryable || env.Hint == "" ||
			env.Details["limit_bytes"] != tc.limit || !strings.Contains(env.Message, tc.inMsg) ||
			tc.noMsg != "" && strings.Contains(env.Message, tc.noMsg) {
			t.Errorf("%v: %d %s %+v", tc.err, e.Status, e.Code, env)
		}
		if got, ok := env.Details["size_bytes"]; tc.size > 0 && got != tc.size || tc.size == 0 && ok {
			t.Errorf("%v: size_bytes %v, want %d", tc.err, got, tc.size)
		}
		if got := env.Details["field"]; tc.field != "" && got != tc.field || tc.field == "" && got != nil {
			t.Errorf("%v: field %v, want %q", tc.err, got, tc.field)
		}
	}
}
