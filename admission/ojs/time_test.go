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

// The fast TimeFormat writer and reader (issue 17: every record write and
// read formats and parses several timestamps) agree with the time
// package's layout-driven ones: same bytes written for every instant,
// same instant read for every text in TimeFormat, and text that only
// looks like TimeFormat (February 30, hour 24) is left to time.Parse.
func TestOwnTimeFormatMatchesTimePackage(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2024, 2, 29, 12, 30, 45, 7_000_000, time.UTC),
		time.Date(2026, 11, 25, 12, 0, 0, 999_500_000, time.FixedZone("x", -7*3600)),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
	}
	const first, last = -62135596800000, 253402300799999 // unix ms of 0001-01-01 and 9999-12-31T23:59:59.999
	for i := range int64(5000) {
		// A spread over 0001..9999 with every millisecond digit, and
		// sub-millisecond parts that formatting truncates.
		times = append(times, time.UnixMilli(first+i*((last-first)/5000)+i%1000).Add(time.Duration(i)*time.Microsecond%time.Millisecond))
		times = append(times, time.Date(int(1+i*2%9999), time.Month(1+i%12), int(1+i%31), int(i%24), int(i%60), int(i*7%60), int(i*13%1000)*int(time.Millisecond), time.UTC))
	}
	for _, tm := range times {
		want := tm.UTC().AppendFormat(nil, TimeFormat)
		if got := appendTimeFormat(nil, tm); string(got) != string(want) {
			t.Fatalf("appendTimeFormat(%v) = %s, want %s", tm, got, want)
		}
		if tm.UTC().Year() < 0 || tm.UTC().Year() > 9999 {
			continue
		}
		got, ok := readOwnTime(string(want))
		if !ok || !got.Equal(tm.UTC().Truncate(time.Millisecond)) || got.Location() != time.UTC {
			t.Fatalf("readOwnTime(%s) = %v, %v; want %v", want, got, ok, tm.UTC().Truncate(time.Millisecond))
		}
	}
	for _, s := range []string{
		"2026-02-30T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-00-01T00:00:00.000Z", "2026-01-00T00:00:00.000Z",
		"2026-01-01T24:00:00.000Z", "2026-01-01T00:60:00.000Z", "2026-01-01T00:00:60.000Z", "2026-01-01T00:00:00.00xZ",
		"2026-01-01T00:00:00.000+", "2026-01-01 00:00:00.000Z", "+026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.0000",
	} {
		if v, ok := readOwnTime(s); ok {
			t.Errorf("readOwnTime(%q) = %v, want it left to time.Parse", s, v)
		}
	}
}

// FuzzOwnTimeFormat: whatever readOwnTime accepts, time.Parse reads as the
// same instant and TimeFormat writes back as the same text.
func FuzzOwnTimeFormat(f *testing.F) {
	for _, s := range []string{"2026-11-25T12:00:00.123Z", "2026-02-29T00:00:00.000Z", "0000-01-01T00:00:00.000Z",
		"2026-02-30T00:00:00.000Z", "9999-12-31T23:59:59.999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := readOwnTime(s)
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !want.Equal(got) {
			t.Fatalf("readOwnTime(%q) = %v; time.Parse = %v, %v", s, got, want, err)
		}
		if out := string(appendTimeFormat(nil, got)); out != s {
			t.Fatalf("readOwnTime(%q) writes back as %q", s, out)
		}
	})
}
