package cron_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/cron"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// L2-CRON-001: standard 5-field expressions with values, ranges, steps,
// lists, names and the classic shorthands; each case lists the ticks that
// follow a start time, in UTC.
func TestNextStandardFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr, from string
		want       []string
	}{
		{"* * * * *", "2026-03-01 10:00", []string{"2026-03-01 10:01", "2026-03-01 10:02"}},
		{"*/15 * * * *", "2026-03-01 10:07", []string{"2026-03-01 10:15", "2026-03-01 10:30", "2026-03-01 10:45", "2026-03-01 11:00"}},
		{"5,10-12 3 * * *", "2026-03-01 00:00", []string{"2026-03-01 03:05", "2026-03-01 03:10", "2026-03-01 03:11", "2026-03-01 03:12", "2026-03-02 03:05"}},
		{"0 9-17/4 * * *", "2026-03-01 09:00", []string{"2026-03-01 13:00", "2026-03-01 17:00", "2026-03-02 09:00"}},
		{"30 8 * * mon-fri", "2026-03-06 09:00", []string{"2026-03-09 08:30", "2026-03-10 08:30"}}, // Fri -> Mon
		{"0 0 * * 7", "2026-03-01 00:00", []string{"2026-03-08 00:00"}},                            // 7 is Sunday
		{"0 0 1 JAN,jul *", "2026-03-01 00:00", []string{"2026-07-01 00:00", "2027-01-01 00:00"}},
		{"0 0 29 2 *", "2026-03-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00"}},
		{"0 0 31 * *", "2026-04-01 00:00", []string{"2026-05-31 00:00", "2026-07-31 00:00"}},
		// Both day fields restricted: either matches (the 13th or a Friday).
		{"0 0 13 * 5", "2026-03-01 00:00", []string{"2026-03-06 00:00", "2026-03-13 00:00", "2026-03-20 00:00"}},
		// Day of week restricted, day of month "*": only Fridays.
		{"0 0 * * 5", "2026-03-12 00:00", []string{"2026-03-13 00:00", "2026-03-20 00:00"}},
		{"10/20 * * * *", "2026-03-01 10:00", []string{"2026-03-01 10:10", "2026-03-01 10:30", "2026-03-01 10:50", "2026-03-01 11:10"}},
		{"@hourly", "2026-03-01 10:30", []string{"2026-03-01 11:00", "2026-03-01 12:00"}},
		{"@daily", "2026-03-01 10:30", []string{"2026-03-02 00:00"}},
		{"@midnight", "2026-03-01 10:30", []string{"2026-03-02 00:00"}},
		{"@weekly", "2026-03-01 10:30", []string{"2026-03-08 00:00"}}, // next Sunday
		{"@monthly", "2026-03-01 10:30", []string{"2026-04-01 00:00"}},
		{"@yearly", "2026-03-01 10:30", []string{"2027-01-01 00:00"}},
		{"@annually", "2026-03-01 10:30", []string{"2027-01-01 00:00"}},
	}
	for _, c := range cases {
		s, err := cron.Parse(c.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.expr, err)
			continue
		}
		cur := at(t, time.UTC, c.from)
		for _, w := range c.want {
			cur = s.Next(cur, time.UTC)
			if want := at(t, time.UTC, w); !cur.Equal(want) {
				t.Errorf("%q: next = %s, want %s", c.expr, cur.Format(time.DateTime), want.Format(time.DateTime))
				break
			}
		}
	}
}

// An expression that never matches has no next tick (registration refuses it).
func TestNextNever(t *testing.T) {
	t.Parallel()
	s, err := cron.Parse("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Next(time.Now(), time.UTC); !n.IsZero() {
		t.Fatalf("Feb 30 matched %s", n)
	}
}

// L2-CRON-001: malformed expressions are refused with the field and the rule.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                "want 5 fields",
		"* * * *":         "want 5 fields",
		"* * * * * *":     "want 5 fields",
		"60 * * * *":      "minute field",
		"* 24 * * *":      "hour field",
		"* * 0 * *":       "day of month field",
		"* * * 13 *":      "month field",
		"* * * * 8":       "day of week field",
		"*/0 * * * *":     "step",
		"5-1 * * * *":     "runs backwards",
		"1,,2 * * * *":    "empty list item",
		"a * * * *":       "minute field",
		"@every 1m":       "unknown shorthand",
		"@reboot":         "unknown shorthand",
		"* * * foo *":     "month field",
		"*/61 * * * *":    "step",
		"1-2-3 * * * *":   "minute field",
		"* * * * mon-sun": "runs backwards",
	}
	for expr, want := range cases {
		_, err := cron.Parse(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", expr, err, want)
		}
	}
}

// L2-CRON-002: a schedule is evaluated on the wall clock of its IANA time
// zone, so 09:00 America/New_York is 14:00 UTC in winter and 13:00 UTC in
// summer, across both daylight saving changes of 2026 (March 8, November 1).
func TestNextTimeZoneAcrossDST(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	s, _ := cron.Parse("0 9 * * *")
	cur := at(t, time.UTC, "2026-03-06 15:00")
	for _, want := range []string{"2026-03-07 14:00", "2026-03-08 13:00", "2026-03-09 13:00"} {
		cur = s.Next(cur, ny)
		if w := at(t, time.UTC, want); !cur.Equal(w) {
			t.Fatalf("spring: next = %s UTC, want %s UTC", cur.UTC().Format(time.DateTime), want)
		}
	}
	cur = at(t, time.UTC, "2026-10-30 14:00")
	for _, want := range []string{"2026-10-31 13:00", "2026-11-01 14:00", "2026-11-02 14:00"} {
		cur = s.Next(cur, ny)
		if w := at(t, time.UTC, want); !cur.Equal(w) {
			t.Fatalf("fall: next = %s UTC, want %s UTC", cur.UTC().Format(time.DateTime), want)
		}
	}
}

// A wall time skipped by spring-forward (02:30 on 2026-03-08 in New York)
// fires once, at 03:30 EDT; the next day it is 02:30 EDT again.
func TestNextSpringForwardGap(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	s, _ := cron.Parse("30 2 * * *")
	cur := at(t, ny, "2026-03-07 12:00")
	var got []string
	for range 3 {
		cur = s.Next(cur, ny)
		got = append(got, cur.In(ny).Format("2006-01-02 15:04 MST"))
	}
	want := []string{"2026-03-08 03:30 EDT", "2026-03-09 02:30 EDT", "2026-03-10 02:30 EDT"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A quarter-hourly schedule goes straight from 01:45 EST to 03:00 EDT
	// and keeps strictly increasing.
	q, _ := cron.Parse("*/15 * * * *")
	cur = at(t, ny, "2026-03-08 01:40")
	got = nil
	for range 4 {
		cur = q.Next(cur, ny)
		got = append(got, cur.In(ny).Format("15:04 MST"))
	}
	want = []string{"01:45 EST", "03:00 EDT", "03:15 EDT", "03:30 EDT"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("quarter-hourly got %v, want %v", got, want)
	}
}

// A wall time repeated by fall-back (01:30 on 2026-11-01 in New York
// occurs in EDT and again in EST) fires once, at its first occurrence;
// from inside the repeated hour the second occurrence is next.
func TestNextFallBackFold(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	s, _ := cron.Parse("30 1 * * *")
	cur := at(t, ny, "2026-10-31 12:00")
	var got []string
	for range 2 {
		cur = s.Next(cur, ny)
		got = append(got, cur.In(ny).Format("2006-01-02 15:04 MST"))
	}
	want := []string{"2026-11-01 01:30 EDT", "2026-11-02 01:30 EST"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	// 01:10 EST is inside the repeated hour (05:10 UTC, after 01:30 EDT).
	inFold := time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC)
	if n := s.Next(inFold, ny); !n.Equal(time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)) {
		t.Fatalf("from inside the fold next = %s, want 01:30 EST", n.In(ny).Format(time.DateTime+" MST"))
	}
}

// Next is strictly increasing over a year of an every-minute-ish schedule
// in a zone with DST, and never returns t itself.
func TestNextMonotonic(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe"} {
		loc := mustLoc(t, zone)
		s, _ := cron.Parse("*/7 */2 * * *")
		cur := at(t, time.UTC, "2026-01-01 00:00")
		for range 20_000 {
			n := s.Next(cur, loc)
			if !n.After(cur) {
				t.Fatalf("%s: Next(%s) = %s, not after", zone, cur, n)
			}
			if w := n.In(loc); w.Minute()%7 != 0 && w.Hour()%2 != 0 {
				t.Fatalf("%s: %s does not match", zone, w)
			}
			cur = n
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 1-3 1,15 jan-mar mon", "@hourly", "0 0 29 2 *", "1/2 * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := cron.Parse(expr)
		if err != nil {
			return
		}
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if n := s.Next(from, time.UTC); !n.IsZero() && !n.After(from) {
			t.Fatalf("%q: Next not after", expr)
		}
	})
}
