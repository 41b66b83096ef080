package ojs

import (
	"errors"
	"strings"
	"testing"
)

// A progress update may carry a message beside progress and data (what the
// SDKs send; issue 16); progress is clamped to [0, 1], never refused
// (ojs-progress.md PRG-002), even past float64's range.
func TestParseProgressUpdateMessageAndClamping(t *testing.T) {
	t.Parallel()
	u, err := ParseProgressUpdate([]byte(`{"progress":0.25,"message":"sending batch 3 of 7","data":{"batch":3}}`))
	if err != nil || u.Progress == nil || *u.Progress != 0.25 || u.Message == nil || *u.Message != "sending batch 3 of 7" ||
		string(u.Data) != `{"batch":3}` {
		t.Fatalf("ParseProgressUpdate = %+v, %v", u, err)
	}
	if u, err := ParseProgressUpdate([]byte(`{"message":"warming up"}`)); err != nil || u.Message == nil || u.Progress != nil {
		t.Fatalf("message alone = %+v, %v; want accepted", u, err)
	}
	for body, want := range map[string]float64{
		`{"progress":1.5}`: 1, `{"progress":-0.5}`: 0, `{"progress":42}`: 1, `{"progress":1e400}`: 1,
		`{"progress":-1e400}`: 0, `{"progress":0}`: 0, `{"progress":1}`: 1,
	} {
		u, err := ParseProgressUpdate([]byte(body))
		if err != nil || u.Progress == nil || *u.Progress != want {
			t.Errorf("%s = %+v, %v; want progress %v", body, u, err, want)
		}
	}
	runErrCases(t, func(b []byte) error { _, err := ParseProgressUpdate(b); return err }, []errCase{
		{"message number", `{"progress":0.5,"message":5}`, "message", []string{"a string", "received number"}},
		{"progress string", `{"progress":"50%"}`, "progress", []string{"number"}},
		{"nothing", `{"checkpoint":{}}`, "progress", []string{"'message'"}},
		{"unknown field", `{"progress":0.5,"percent":50}`, "percent", []string{"message"}},
	})
}

// Issue 31: a progress field over its limit is a 413 naming the field,
// the limit and the size, not a 400.
func TestParseProgressUpdateTooLarge(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]TooLargeError{
		`{"message":"` + strings.Repeat("x", MaxProgressMessageBytes+1) + `"}`:   {Field: "message", Limit: 4096, Size: 4097},
		`{"data":{"d":"` + strings.Repeat("x", MaxProgressDataBytes) + `"}}`:     {Field: "data", Limit: 16384, Size: 16392},
		`{"progress":1,"checkpoint":{"c":"` + strings.Repeat("x", 1<<14) + `"}}`: {Field: "checkpoint", Limit: 16384, Size: 16392},
	} {
		_, err := ParseProgressUpdate([]byte(body))
		var te *TooLargeError
		if !errors.As(err, &te) || te.Field != want.Field || te.Limit != want.Limit || te.Size != want.Size || te.Hint == "" {
			t.Errorf("%.40s...: %v, want 413 naming %s, %d and %d", body, err, want.Field, want.Limit, want.Size)
		}
	}
}

// The message is kept on the record and shown by GET .../progress; a job
// without one shows message null (like progress and data, 7.1).
func TestProgressOfMessage(t *testing.T) {
	t.Parallel()
	j := &Job{ID: "x", State: StateActive, ProgressMessage: "half way"}
	rec, err := j.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := back.UnmarshalJSON(rec); err != nil {
		t.Fatal(err)
	}
	if st := ProgressOf(&back); st.Message == nil || *st.Message != "half way" {
		t.Fatalf("ProgressOf(round-tripped record %s).Message = %v", rec, st.Message)
	}
	if st := ProgressOf(&Job{ID: "y"}); st.Message != nil {
		t.Fatalf("message of a job without one = %q, want nil", *st.Message)
	}
}
