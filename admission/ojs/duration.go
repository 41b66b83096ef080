package ojs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
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

// ParseISODuration parses the ISO 8601 durations jobs use:
// P[nW][nD][T[nH][nM][nS]], components in that order, each at most once,
// with a decimal fraction ("." or ",") allowed on the last one only
// ("PT0.5S", "PT1.5H"). Years and months are rejected: their length is
// ambiguous (ojs-retry.md 4.2 does not recommend them). The result is
// exact to the nanosecond (finer fractions are truncated) and at most
// math.MaxInt64 nanoseconds; negative durations do not exist in ISO 8601.
func ParseISODuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("invalid ISO 8601 duration %q (expected e.g. \"PT30S\", \"PT5M\", \"P1D\")", s)
	}
	if len(s) < 3 || s[0] != 'P' {
		return bad()
	}
	rest := s[1:]
	var total int64
	inTime, seen, frac := false, false, false
	last := -1 // index in isoUnits of the last component read
	for len(rest) > 0 {
		if rest[0] == 'T' {
			if inTime || len(rest) == 1 {
				return bad()
			}
			inTime, rest = true, rest[1:]
			continue
		}
		if frac { // a fraction was not on the last component
			return bad()
		}
		n, f, scale, unit, tail, ok := isoComponent(rest)
		if !ok {
			return bad()
		}
		idx := isoUnitIndex(unit, inTime)
		if idx <= last {
			return bad()
		}
		v, ok := isoNanos(n, f, scale, isoUnits[idx])
		if !ok || v > math.MaxInt64-total {
			return bad()
		}
		total += v
		last, seen, frac, rest = idx, true, scale > 1, tail
	}
	if !seen {
		return bad()
	}
	return time.Duration(total), nil
}

// isoUnits are the components ParseISODuration accepts, in order: W D H M S.
var isoUnits = [...]uint64{
	uint64(7 * 24 * time.Hour), uint64(24 * time.Hour), uint64(time.Hour), uint64(time.Minute), uint64(time.Second),
}

// isoUnitIndex returns the index of unit in isoUnits, or -1.
func isoUnitIndex(unit byte, inTime bool) int {
	switch {
	case !inTime && unit == 'W':
		return 0
	case !inTime && unit == 'D':
		return 1
	case inTime && unit == 'H':
		return 2
	case inTime && unit == 'M':
		return 3
	case inTime && unit == 'S':
		return 4
	}
	return -1
}

// isoComponent splits "12.5S..." into the integer 12, the fraction 5 over
// scale 10, the unit 'S' and the rest. Fraction digits past 18 are dropped.
func isoComponent(s string) (n, f, scale uint64, unit byte, rest string, ok bool) {
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if n > (math.MaxUint64-9)/10 {
			return 0, 0, 0, 0, "", false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	if i == 0 {
		return 0, 0, 0, 0, "", false
	}
	scale = 1
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		i++
		start := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if i-start < 18 {
				f, scale = f*10+uint64(s[i]-'0'), scale*10
			}
		}
		if i == start {
			return 0, 0, 0, 0, "", false
		}
	}
	if i == len(s) {
		return 0, 0, 0, 0, "", false
	}
	return n, f, scale, s[i], s[i+1:], true
}

// isoNanos is (n + f/scale) units in nanoseconds, if it fits an int64.
func isoNanos(n, f, scale, unit uint64) (int64, bool) {
	hi, whole := bits.Mul64(n, unit)
	if hi != 0 || whole > math.MaxInt64 {
		return 0, false
	}
	// f < scale, so the quotient is < unit and cannot overflow.
	hi, lo := bits.Mul64(f, unit)
	part, _ := bits.Div64(hi, lo, scale)
	v := whole + part
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// FormatISODuration writes d as an ISO 8601 duration ("PT1.5S", "PT5M",
// "PT26H"), exactly: ParseISODuration(FormatISODuration(d)) == d for d >= 0.
// Negative durations are written as "PT0S".
func FormatISODuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	b := make([]byte, 0, 24)
	b = append(b, "PT"...)
	if h := d / time.Hour; h > 0 {
		b = strconv.AppendInt(b, int64(h), 10)
		b = append(b, 'H')
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b = strconv.AppendInt(b, int64(m), 10)
		b = append(b, 'M')
		d -= m * time.Minute
	}
	if d > 0 {
		b = strconv.AppendInt(b, int64(d/time.Second), 10)
		if ns := int64(d % time.Second); ns > 0 {
			frac := strconv.AppendInt(nil, ns+1e9, 10)[1:] // nine digits, zero-padded
			b = append(b, '.')
			b = append(b, bytes.TrimRight(frac, "0")...)
		}
		b = append(b, 'S')
	}
	return string(b)
}
