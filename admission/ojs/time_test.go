package ojs

import (
	"encoding/json"
	"testing"
	"time"
)

// json-format 5.1-5.3 and http-binding 6.3: any RFC 3339 offset is read,
// UTC with milliseconds is written.
func TestTimeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, out string
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
		if err != nil || string(b) != tt.out {
			t.Errorf("Marshal(Unmarshal(%s)) = %s, %v; want %s", tt.in, b, err, tt.out)
		}
		if s := v.String(); `"`+s+`"` != tt.out {
			t.Errorf("String() = %s, want %s", s, tt.out)
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
