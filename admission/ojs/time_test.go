package ojs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// json-format 5.1-5.3: any RFC 3339 offset is read; the instant is kept in
// UTC, truncated to milliseconds. A timestamp read from JSON (a client's)
// is written back exactly as it was given (issue 16: echo what the client
// sent); String is always UTC with milliseconds (http-binding 6.3).
func TestTimeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, utc string
	}{
		{`"2025-06-01T09:00:00Z"`, `"2025-06-01T09:00:00.000Z"`},
		{`"2025-06-01T09:00:00.123Z"`, `"2025-06-01T09:00:00.123Z"`},
		{`"2025-06-01T09:00:00.123456Z"`, `"2025-06-01T09:00:00.123Z"`},
		{`"2025-06-01T11:00:00+02:00"`, `"2025-06-01T09:00:00.000Z"`},
		{`"2025-06-01T04:30:00-04:30"`, `"2025-06-01T09:00:00.000Z"`},
		{`"2025-06-01T00:30:00+01:00"`, `"2025-05-31T23:30:00.000Z"`},
		{`"2025-06-01T09:00:00+00:00"`, `"2025-06-01T09:00:00.000Z"`},
	}
	for _, tt := range tests {
		var v Time
		if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if v.Location() != time.UTC {
			t.Errorf("Unmarshal(%s) kept zone %v", tt.in, v.Location())
		}
		b, err := json.Marshal(v)
		if err != nil || string(b) != tt.in {
			t.Errorf("Marshal(Unmarshal(%s)) = %s, %v; want the text as given", tt.in, b, err)
		}
		if s := v.String(); `"`+s+`"` != tt.utc {
			t.Errorf("String() = %s, want %s", s, tt.utc)
		}
		if got := NewTime(v.Time); !got.Equal(v.Time) || `"`+got.Text()+`"` != tt.utc {
			t.Errorf("NewTime(%s).Text() = %s, want %s (jetgate's own format)", tt.in, got.Text(), tt.utc)
		}
	}
}

// json-format 5.3 rule 1: timestamps without a zone are rejected.
func TestTimeJSONRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`"2025-06-01T09:00:00"`, `"2025-06-01"`, `"09:00:00Z"`, `"2025-06-01 09:00:00Z"`, `1748768400`,
		`"yesterday"`, `""`, `null`, `"2025-06-01T09:00:00+2:00"`,
	} {
		var v Time
		if err := json.Unmarshal([]byte(in), &v); err == nil && in != `null` {
			t.Errorf("Unmarshal(%s) = %v, want an error", in, v)
		}
	}
}

func TestNewTime(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("x", 2*3600)
	in := time.Date(2026, 3, 1, 11, 0, 0, 0, loc)
	v := NewTime(in)
	if v.Location() != time.UTC || !v.Equal(in) {
		t.Errorf("NewTime(%v) = %v", in, v)
	}
	// In a struct, pointer and omitempty.
	b, err := json.Marshal(struct {
		A *Time `json:"a,omitempty"`
		B *Time `json:"b,omitempty"`
	}{A: v})
	if err != nil || string(b) != `{"a":"2026-03-01T09:00:00.000Z"}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}

// Issue 16: scheduled_at, delay_until and expires_at the client gives are
// echoed exactly as given in every later rendering of the job, also after
// the record's round trip through the store (AppendJSON, then
// Job.UnmarshalJSON in another process); the relative form "+PT5S" is now
// + 5 s and is echoed as the absolute time it resolved to, in jetgate's
// format; a time in the past is accepted.
func TestParseJobTimestampsEchoedAsGiven(t *testing.T) {
	t.Parallel()
	before := time.Now().Truncate(time.Millisecond)
	j := mustParse(t, `{"type":"a","args":[],"scheduled_at":"2026-01-02T03:04:05+02:00","expires_at":"2099-12-31T23:59:59Z"}`)
	rel := mustParse(t, `{"type":"a","args":[],"options":{"delay_until":"+PT5S","expires_at":"+P1DT0.5S"}}`)
	after := time.Now()
	past := mustParse(t, `{"type":"a","args":[],"scheduled_at":"2001-02-03T04:05:06.7+01:00"}`)

	if !j.ScheduledAt.Equal(time.Date(2026, 1, 2, 1, 4, 5, 0, time.UTC)) {
		t.Errorf("scheduled_at instant = %v", j.ScheduledAt)
	}
	if got := rel.ScheduledAt.Time; got.Before(before.Add(5*time.Second)) || got.After(after.Add(5*time.Second)) {
		t.Errorf("+PT5S resolved to %v, want now + 5s (now in [%v, %v])", got, before, after)
	}
	if got := rel.ExpiresAt.Sub(rel.ScheduledAt.Time); got < 24*time.Hour-5*time.Second || got > 24*time.Hour {
		t.Errorf("+P1DT0.5S - +PT5S = %v, want about 1 day", got)
	}
	rec, err := j.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(rec, &back); err != nil {
		t.Fatal(err)
	}
	again, err := back.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	viaMarshal, _ := json.Marshal(back)
	for _, out := range [][]byte{rec, again, viaMarshal} {
		for _, want := range []string{`"scheduled_at":"2026-01-02T03:04:05+02:00"`, `"expires_at":"2099-12-31T23:59:59Z"`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rendering lacks %s: %s", want, out)
			}
		}
	}
	relOut, _ := json.Marshal(rel)
	for _, want := range []string{`"scheduled_at":"` + rel.ScheduledAt.UTC().Format(TimeFormat) + `"`,
		`"expires_at":"` + rel.ExpiresAt.UTC().Format(TimeFormat) + `"`} {
		if !strings.Contains(string(relOut), want) {
			t.Errorf("relative time not echoed as jetgate's absolute time %s: %s", want, relOut)
		}
	}
	if out, _ := json.Marshal(past); !strings.Contains(string(out), `"scheduled_at":"2001-02-03T04:05:06.7+01:00"`) {
		t.Errorf("past scheduled_at not accepted and echoed: %s", out)
	}
}
