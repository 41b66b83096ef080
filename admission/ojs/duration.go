package ojs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that travels as an ISO 8601 duration string
// ("PT1S", "PT5M", "P1DT2H", "PT0.5S").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as an ISO 8601 duration.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatISODuration(time.Duration(d)))
}

// UnmarshalJSON reads an ISO 8601 duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be an ISO 8601 string such as \"PT30S\"")
	}
	v, err := ParseISODuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseISODuration parses the ISO 8601 durations jobs use: P[nD]T[nH][nM][n[.f]S],
// plus weeks (PnW). Years and months are rejected: their length is ambiguous.
func ParseISODuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("invalid ISO 8601 duration %q (expected e.g. \"PT30S\", \"PT5M\", \"P1D\")", s)
	}
	if len(s) < 3 || s[0] != 'P' {
		return bad()
	}
	rest := s[1:]
	var total float64
	inTime := false
	seen := false
	for len(rest) > 0 {
		if rest[0] == 'T' {
			if inTime {
				return bad()
			}
			inTime = true
			rest = rest[1:]
			if len(rest) == 0 {
				return bad()
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.' || rest[i] == ',') {
			i++
		}
		if i == 0 || i == len(rest) {
			return bad()
		}
		n, err := strconv.ParseFloat(strings.ReplaceAll(rest[:i], ",", "."), 64)
		if err != nil || n < 0 {
			return bad()
		}
		unit := rest[i]
		rest = rest[i+1:]
		var mult time.Duration
		switch {
		case !inTime && unit == 'W':
			mult = 7 * 24 * time.Hour
		case !inTime && unit == 'D':
			mult = 24 * time.Hour
		case inTime && unit == 'H':
			mult = time.Hour
		case inTime && unit == 'M':
			mult = time.Minute
		case inTime && unit == 'S':
			mult = time.Second
		default:
			return bad()
		}
		total += n * float64(mult)
		seen = true
	}
	if !seen || total > float64(1<<62) {
		return bad()
	}
	return time.Duration(total), nil
}

// FormatISODuration writes d as an ISO 8601 duration ("PT1.5S", "PT5M").
func FormatISODuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteString("PT")
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dH", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dM", m)
		d -= m * time.Minute
	}
	if d > 0 {
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
		b.WriteString("S")
	}
	return b.String()
}
