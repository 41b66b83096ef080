package wire_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// ojs-errors.md 4.1 / ojs-http-binding.md 16: one mapping of domain errors
// to status and code, for both bindings.
func TestClassifyMapsDomainErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
		code   string
		retry  bool
	}{
		{&ojs.ValidationError{Field: "queue", Rule: "a queue name"}, 400, ojs.CodeInvalidRequest, false},
		{wire.InEnvelope(&ojs.ValidationError{Field: "type", Rule: "required"}), 400, ojs.CodeInvalidPayload, false},
		{fmt.Errorf("get: %w", &ojs.NotFoundError{Resource: "job", ID: "x"}), 404, ojs.CodeNotFound, false},
		{&ojs.StateError{JobID: "x", Current: "completed", Expected: "active"}, 409, ojs.CodeConflict, false},
		{ojs.ErrConflict, 409, ojs.CodeConflict, true},
		{ojs.ErrQueuePaused, 422, ojs.CodeQueuePaused, true},
		{ojs.ErrShuttingDown, 503, ojs.CodeBackendError, true},
		{context.DeadlineExceeded, 503, ojs.CodeBackendError, true},
		{wire.ErrUnauthorized(), 401, ojs.CodeUnauthorized, false},
		{wire.ErrTooLarge(10, 11), 413, ojs.CodePayloadTooLarge, false},
		{wire.ErrTooLarge(10, 0), 413, ojs.CodePayloadTooLarge, false},
		{fmt.Errorf("ack: %w", &ojs.TooLargeError{Field: "result", Limit: 16, Size: 17, Hint: "h"}), 413, ojs.CodePayloadTooLarge, false},
		{errors.New("disk on fire"), 500, ojs.CodeBackendError, true},
	} {
		e := wire.Classify(tc.err)
		env := e.Envelope("req_1").Error
		if e.Status != tc.status || e.Code != tc.code || env.Retryable != tc.retry || env.Hint == "" || env.Details == nil {
			t.Errorf("%v: %d %s retryable=%v hint=%q, want %d %s %v", tc.err, e.Status, e.Code, env.Retryable, env.Hint, tc.status, tc.code, tc.retry)
		}
	}
}

// A classified Error is returned as a copy: changing its details never
// changes the error's.
func TestClassifyCopiesBindingErrors(t *testing.T) {
	t.Parallel()
	err := wire.ErrUnauthorized()
	e := wire.Classify(err)
	e.Details["x"] = 1
	e.Header.Set("X", "1")
	if again := wire.Classify(err); len(again.Details) != 0 || again.Header.Get("X") != "" {
		t.Fatalf("Classify shared the error's maps: %v %v", again.Details, again.Header)
	}
}

// Issue 19: wait_ms of a NATS fetch is 0..max, naming the field otherwise.
func TestDecodeFetchWait(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]time.Duration{`{}`: 0, `{"wait_ms":0}`: 0, `{"wait_ms":1500}`: 1500 * time.Millisecond, `{"wait_ms":30000}`: 30 * time.Second} {
		if got, err := wire.DecodeFetchWait([]byte(body), 30*time.Second); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", body, got, err, want)
		}
	}
	for _, body := range []string{`{"wait_ms":30001}`, `{"wait_ms":-1}`, `{"wait_ms":"1"}`, `{"wait_ms":1.5}`} {
		_, err := wire.DecodeFetchWait([]byte(body), 30*time.Second)
		var ve *ojs.ValidationError
		if !errors.As(err, &ve) || ve.Field != "wait_ms" {
			t.Errorf("%s: %v, want a validation error naming wait_ms", body, err)
		}
	}
}

// Issue 19: a batch list is 1..1000 items.
func FuzzDecodeBatchItems(f *testing.F) {
	for _, s := range []string{`{"acks":[{"job_id":"a"}]}`, `{"acks":[]}`, `{"acks":{}}`, `[]`, `{"acks":[1,2,3]}`, ``, `{"acks":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := wire.DecodeBatchItems(b, "acks")
		if err == nil && (len(items) == 0 || len(items) > wire.MaxBatchItems) {
			t.Fatalf("%q: accepted %d items", b, len(items))
		}
		if err != nil {
			if e := wire.Classify(err); e.Status != 400 {
				t.Fatalf("%q: %v answers %d, want 400", b, err, e.Status)
			}
		}
	})
}
