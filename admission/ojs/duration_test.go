package ojs

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// ojs-retry 4.1/4.2 (RET-02, RET-19).
func TestParseISODuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1S", time.Second},
		{"PT5S", 5 * time.Second},
		{"PT30S", 30 * time.Second},
		{"PT1M", time.Minute},
		{"PT5M", 5 * time.Minute},
		{"PT15M", 15 * time.Minute},
		{"PT1H", time.Hour},
		{"PT24H", 24 * time.Hour},
		{"P1D", 24 * time.Hour},
		{"P1W", 7 * 24 * time.Hour},
		{"P1DT2H", 26 * time.Hour},
		{"PT1H30M", 90 * time.Minute},
		{"PT1M30.25S", 90*time.Second + 250*time.Millisecond},
		{"PT0,5S", 500 * time.Millisecond},
		{"PT1.5H", 90 * time.Minute},
		{"PT0.5M", 30 * time.Second},
		{"P0.5D", 12 * time.Hour},
		{"PT0S", 0},
		{"PT0.000000001S", time.Nanosecond},
		{"PT0.0000000019S", time.Nanosecond}, // below a nanosecond is truncated
		{"PT0.1S", 100 * time.Millisecond},   // exact, no float rounding
		{"PT59.999999999S", 59*time.Second + 999999999},
		{"PT2562047H47M16.854775807S", math.MaxInt64},
		{"PT007S", 7 * time.Second},
	}
	for _, tt := range tests {
		got, err := ParseISODuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseISODuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseISODurationRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", "P", "PT", "1s", "300s", "30", "pt1s", "PT1s", "-PT1S", "P-1D", "PT+1S",
		"P1Y", "P1M", "P1Y2M", // ambiguous lengths
		"PT1D", "P1H", "P1S", // unit on the wrong side of T
		"P1DT", "PTT1S", "PT1ST", "P1D1D", "PT1S1M", "PT1M1H", "P1D1W", // order, repetition
		"PT1.5M30S", "P1.5DT1H", // fraction not on the last component
		"PT.5S", "PT1.S", "PT1..5S", "PTS", "PT1", "P1", "PT1X",
		"PT2562047H47M16.854775808S", "PT9999999999999999999H", "P99999999999999999999W", // overflow
		"PT 1S", "PT1S ", " PT1S",
	} {
		if d, err := ParseISODuration(in); err == nil {
			t.Errorf("ParseISODuration(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "ISO 8601") {
			t.Errorf("ParseISODuration(%q) error %q", in, err)
		}
	}
}

func TestFormatISODuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "PT0S"},
		{-time.Second, "PT0S"},
		{time.Nanosecond, "PT0.000000001S"},
		{500 * time.Millisecond, "PT0.5S"},
		{time.Second, "PT1S"},
		{90 * time.Second, "PT1M30S"},
		{5 * time.Minute, "PT5M"},
		{time.Hour, "PT1H"},
		{26*time.Hour + 1500*time.Millisecond, "PT26H1.5S"},
		{7 * 24 * time.Hour, "PT168H"},
		{math.MaxInt64, "PT2562047H47M16.854775807S"},
	}
	for _, tt := range tests {
		if got := FormatISODuration(tt.in); got != tt.want {
			t.Errorf("FormatISODuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in >= 0 {
			if back, err := ParseISODuration(tt.want); err != nil || back != tt.in {
				t.Errorf("ParseISODuration(%q) = %v, %v; want %v", tt.want, back, err, tt.in)
			}
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Duration(90 * time.Second))
	if err != nil || string(b) != `"PT1M30S"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"PT0.25S"`), &d); err != nil || d.D() != 250*time.Millisecond {
		t.Fatalf("Unmarshal = %v, %v", d, err)
	}
	for _, bad := range []string{`1000`, `"1s"`, `null`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil && bad != `null` {
			t.Errorf("Unmarshal(%s) = %v, want an error", bad, d)
		}
	}
}

func FuzzParseISODuration(f *testing.F) {
	for _, s := range []string{"PT1S", "PT0.5S", "P1DT2H3M4.5S", "P2W", "PT1,5H", "PT2562047H47M16.854775807S", "P1Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseISODuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseISODuration(%q) = %v < 0", s, d)
		}
		out := FormatISODuration(d)
		back, err := ParseISODuration(out)
		if err != nil || back != d {
			t.Fatalf("ParseISODuration(%q) = %v, formats as %q, parses back as %v, %v", s, d, out, back, err)
		}
	})
}
