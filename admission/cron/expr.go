package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed standard 5-field cron expression: minute, hour,
// day of month, month, day of week (L2-CRON-001).
type Schedule struct {
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record a field written as "*" (or "*/n"):
	// when both day fields are restricted, a day matches either of them
	// (the classic cron rule); otherwise both must match.
	domStar, dowStar bool
}

// shorthands are the predefined schedules of classic cron.
var shorthands = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
}

var fields = [5]fieldSpec{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	// 7 is Sunday too; it is folded onto 0 after parsing.
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// Parse reads a standard 5-field expression or one of the shorthands
// @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.
// Each field is "*", a value, a range "a-b", a step "*/n", "a-b/n" or
// "a/n", or a comma-separated list of those; months and days of week
// also take their three-letter English names. The error says which field
// is wrong and why.
func Parse(expr string) (*Schedule, error) {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "@") {
		full, ok := shorthands[strings.ToLower(e)]
		if !ok {
			return nil, fmt.Errorf("unknown shorthand %q (want one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)", e)
		}
		e = full
	}
	parts := strings.Fields(e)
	if len(parts) != 5 {
		return nil, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week), got %d", len(parts))
	}
	var s Schedule
	dst := [5]*uint64{&s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	for i, p := range parts {
		set, err := parseField(p, fields[i])
		if err != nil {
			return nil, fmt.Errorf("%s field %q: %w", fields[i].name, p, err)
		}
		*dst[i] = set
	}
	if s.dow&(1<<7) != 0 {
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = strings.HasPrefix(parts[2], "*")
	s.dowStar = strings.HasPrefix(parts[4], "*")
	return &s, nil
}

func parseField(f string, spec fieldSpec) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(f, ",") {
		lo, hi, step, err := parseItem(item, spec)
		if err != nil {
			return 0, err
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func parseItem(item string, spec fieldSpec) (lo, hi, step int, err error) {
	if item == "" {
		return 0, 0, 0, fmt.Errorf("empty list item")
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step = 1
	if hasStep {
		step, err = strconv.Atoi(stepText)
		if err != nil || step < 1 || step > spec.max {
			return 0, 0, 0, fmt.Errorf("step %q must be an integer from 1 to %d", stepText, spec.max)
		}
	}
	switch {
	case rng == "*":
		return spec.min, spec.max, step, nil
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		if lo, err = value(a, spec); err != nil {
			return 0, 0, 0, err
		}
		if hi, err = value(b, spec); err != nil {
			return 0, 0, 0, err
		}
		if lo > hi {
			return 0, 0, 0, fmt.Errorf("range %q runs backwards", rng)
		}
		return lo, hi, step, nil
	default:
		if lo, err = value(rng, spec); err != nil {
			return 0, 0, 0, err
		}
		if hasStep {
			return lo, spec.max, step, nil // "a/n": from a to the end
		}
		return lo, lo, 1, nil
	}
}

func value(s string, spec fieldSpec) (int, error) {
	for i, n := range spec.names {
		if strings.EqualFold(s, n) {
			return spec.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < spec.min || v > spec.max {
		return 0, fmt.Errorf("value %q must be from %d to %d", s, spec.min, spec.max)
	}
	return v, nil
}

// horizon bounds the search for the next tick: an expression such as
// "0 0 30 2 *" never matches, and one such as "0 0 29 2 1" matches only
// once in up to 28 years.
const horizon = 30

// Next returns the first instant strictly after t at which the schedule
// matches the wall clock of loc, or the zero time if there is none within
// 30 years.
//
// The search walks the wall clock (civil time) of loc, so "0 9 * * *" in
// America/New_York is 09:00 local on both sides of a daylight saving
// change (L2-CRON-002). A wall time that does not exist on a spring-forward
// day (02:30 in New York) fires once, at the same offset past the change
// (03:30); a wall time that occurs twice on a fall-back day fires once, at
// its first occurrence, unless t is already past it, in which case the
// second occurrence is used.
func (s *Schedule) Next(t time.Time, loc *time.Location) time.Time {
	wall := t.In(loc)
	// Civil arithmetic in UTC, which has no transitions.
	c := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), 0, 0, time.UTC).Add(time.Minute)
	end := c.AddDate(horizon, 0, 0)
	for c.Before(end) {
		switch {
		case s.month&(1<<uint(c.Month())) == 0:
			c = time.Date(c.Year(), c.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, time.UTC)
		case s.hour&(1<<uint(c.Hour())) == 0:
			c = c.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<uint(c.Minute())) == 0:
			c = c.Add(time.Duration(s.minutesToNext(c.Minute())) * time.Minute)
		default:
			if at, ok := instant(c, loc, t); ok {
				return at
			}
			c = c.Add(time.Minute)
		}
	}
	return time.Time{}
}

// minutesToNext is how far the next matching minute of the hour is from
// m (or to the next hour when none is left).
func (s *Schedule) minutesToNext(m int) int {
	rest := s.minute >> uint(m+1) << uint(m+1)
	if rest == 0 {
		return 60 - m
	}
	return bits.TrailingZeros64(rest) - m
}

func (s *Schedule) dayMatches(c time.Time) bool {
	dom := s.dom&(1<<uint(c.Day())) != 0
	dow := s.dow&(1<<uint(c.Weekday())) != 0
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// instant turns the civil time c (carried in UTC) into the earliest
// instant of loc after t that shows c on the wall clock. A civil time in
// a spring-forward gap has no such instant: it maps to the instant as far
// past the change as c was into the gap.
func instant(c time.Time, loc *time.Location, t time.Time) (time.Time, bool) {
	t0 := time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), 0, 0, loc)
	var best time.Time
	seen := false
	for _, probe := range []time.Time{t0.Add(-3 * time.Hour), t0, t0.Add(3 * time.Hour)} {
		_, off := probe.Zone()
		at := c.Add(-time.Duration(off) * time.Second).In(loc)
		w := at
		if w.Year() != c.Year() || w.Month() != c.Month() || w.Day() != c.Day() || w.Hour() != c.Hour() || w.Minute() != c.Minute() {
			continue
		}
		seen = true
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !seen {
		// In a gap: read c with the offset in force before the change,
		// which lands as far past the change as c was into the gap.
		_, off := t0.Add(-3 * time.Hour).Zone()
		if at := c.Add(-time.Duration(off) * time.Second).In(loc); at.After(t) {
			return at, true
		}
	}
	return best, !best.IsZero()
}
