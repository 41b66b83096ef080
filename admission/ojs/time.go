package ojs

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TimeFormat is how every timestamp jetgate makes leaves it: RFC 3339, UTC,
// millisecond precision (ojs-http-binding.md 6.3).
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time is a timestamp. One jetgate makes (NewTime) marshals in TimeFormat.
// One read from JSON, a client's scheduled_at or expires_at for instance,
// remembers the text it was read from and marshals back to exactly that
// text, offset and precision included, so a client sees the timestamp it
// gave in every later rendering of the job, also after the record's round
// trip through JetStream. Any RFC 3339 timestamp with a zone is read; the
// instant is kept in UTC, truncated to milliseconds.
type Time struct {
	time.Time
	// text is the RFC 3339 text the time was read from, when it is not
	// what TimeFormat writes for it.
	text string
}

// NewTime returns t as a *Time in UTC, written in TimeFormat.
func NewTime(t time.Time) *Time { return &Time{Time: t.UTC()} }

// readTime parses an RFC 3339 timestamp with a zone and keeps its text.
func readTime(s string) (Time, error) {
	if t, ok := readOwnTime(s); ok {
		return Time{Time: t}, nil
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Time{}, err
	}
	t := Time{Time: v.UTC().Truncate(time.Millisecond)}
	if s != string(appendTimeFormat(make([]byte, 0, len(TimeFormat)), t.Time)) {
		t.text = s
	}
	return t, nil
}

// Text is the timestamp as it is written: the text it was read from, or
// the time in TimeFormat.
func (t Time) Text() string {
	if t.text != "" {
		return t.text
	}
	return string(appendTimeFormat(make([]byte, 0, len(TimeFormat)), t.Time))
}

// MarshalJSON writes Text.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.Text() + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 timestamp, remembering its text.
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp must be an RFC 3339 string")
	}
	v, err := readTime(string(b[1 : len(b)-1]))
	if err != nil {
		return fmt.Errorf("timestamp must be RFC 3339: %w", err)
	}
	*t = v
	return nil
}

// String formats the time in TimeFormat (UTC), whatever text it was read
// from: for messages and logs.
func (t Time) String() string {
	return string(appendTimeFormat(make([]byte, 0, len(TimeFormat)), t.Time))
}

// appendTimeFormat appends t in TimeFormat, as t.UTC().AppendFormat(b,
// TimeFormat) does, without the layout interpretation: every record write
// formats several timestamps (issue 17, CPU per job). Years outside
// 0000-9999 take the general path.
func appendTimeFormat(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeFormat)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append(b, byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T')
	b = append(b, byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':')
	b = append(b, byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
	return b
}

// readOwnTime reads s when it is exactly in TimeFormat (what jetgate
// writes, so what every record read meets) without time.Parse; ok is
// false for anything else, which readTime then parses in general. A
// value out of range (month 13, February 30) is not ok: time.Date would
// normalize it, so the fields are checked against the result.
func readOwnTime(s string) (time.Time, bool) {
	if len(s) != len(TimeFormat) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		s[19] != '.' || s[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec, ms := num(11, 2), num(14, 2), num(17, 2), num(20, 3)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
		sec < 0 || sec > 59 || ms < 0 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, ms*int(time.Millisecond), time.UTC)
	if t.Day() != day {
		return time.Time{}, false
	}
	return t, true
}

// equal reports whether t and u are the same instant, whatever their text.
func (t Time) equal(u Time) bool { return t.Time.Equal(u.Time) }

// LatestTime is the latest instant jetgate can schedule: JetStream keeps
// the time of a message schedule and a message's TTL deadline as
// nanoseconds since 1970 in an int64 (nats-server's "@at" schedules are
// stored with UnixNano), which ends at 2262-04-11T23:47:16.854775807Z;
// jetgate keeps milliseconds. A later instant would wrap around and fire
// at once (issue 31), so a client's time past it is refused (400, naming
// the field and this time) and a deadline a duration puts past it is kept
// at it (Schedulable).
var LatestTime = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Millisecond)

// LatestTimeText is LatestTime as errors and docs write it.
var LatestTimeText = NewTime(LatestTime).String()

// Schedulable returns t, or LatestTime when t is later: the instant a
// timer, message schedule or deadline is written for. Every instant a
// client gives is at most LatestTime already (parse.go); this bounds the
// deadlines durations make (a timeout, a backoff, a rate limit period of
// a few hundred years), which then end at LatestTime instead of wrapping
// around to the past.
func Schedulable(t time.Time) time.Time {
	if t.After(LatestTime) {
		return LatestTime
	}
	return t
}

// SchedulableTTL returns ttl, shortened so that a message stored now with
// it expires a day before LatestTime at the latest (JetStream adds the TTL
// to the message's nanosecond timestamp, taken by the server's clock,
// which may run ahead of ours), and at least a second (the shortest TTL
// JetStream takes).
func SchedulableTTL(now time.Time, ttl time.Duration) time.Duration {
	if left := LatestTime.Add(-24 * time.Hour).Sub(now); ttl > left {
		ttl = left
	}
	return max(ttl, time.Second)
}

// TimeTooLate is the error for a client's time past LatestTime, naming
// field.
func TimeTooLate(field, received string) *ValidationError {
	return &ValidationError{Field: field, Rule: "a time no later than " + LatestTimeText,
		Received: received,
		Message: fmt.Sprintf("field '%s' is %s, past %s, the latest time jetgate can schedule "+
			"(JetStream counts nanoseconds since 1970 in 64 bits)", field, received, LatestTimeText)}
}

// isoSyntax is the shape of the durations RelativeTime reads: calendar
// years and months (whole), then the exact components ParseISODuration
// reads, a fraction on the last one only. It tells a duration too long to
// hold from one that is not a duration.
var isoSyntax = regexp.MustCompile(`^P(?:\d+Y)?(?:\d+M)?(?:\d+(?:[.,]\d+)?W)?(?:\d+(?:[.,]\d+)?D)?` +
	`(?:T(?:\d+(?:[.,]\d+)?H)?(?:\d+(?:[.,]\d+)?M)?(?:\d+(?:[.,]\d+)?S)?)?$`)

var digits = regexp.MustCompile(`\d+`)

// RelativeTime resolves the ISO 8601 duration of a relative time ("+P1M",
// "+PT30S", the "+" cut off) against now. Years (Y) and months (M before
// T) move the calendar date in UTC, a day past the end of the target month
// becoming its last day (Jan 31 + P1M is Feb 28 or 29); weeks, days,
// hours, minutes and seconds are exact durations (ParseISODuration, days of
// 24 hours). far reports a well-formed duration that ends past LatestTime,
// the latest time jetgate can schedule; err a string that is not such a
// duration.
func RelativeTime(iso string, now time.Time) (t time.Time, far bool, err error) {
	if !isoSyntax.MatchString(iso) || iso == "P" || strings.HasSuffix(iso, "T") {
		return time.Time{}, false, fmt.Errorf("invalid ISO 8601 duration %q", iso)
	}
	years, months, rest := 0, 0, iso[1:]
	for _, unit := range []byte{'Y', 'M'} {
		i := 0
		for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) || rest[i] != unit {
			continue
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n > 10000*12 {
			return time.Time{}, true, nil // past year 9999 from any now
		}
		if unit == 'Y' {
			years = n
		} else {
			months = n
		}
		rest = rest[i+1:]
	}
	t = addMonths(now.UTC(), 12*years+months)
	if rest != "" {
		d, err := ParseISODuration("P" + rest)
		if err != nil {
			// Too long for a time.Duration, or not a duration (a fraction
			// before the last component): the same shape with every
			// number 0 tells.
			if _, zerr := ParseISODuration("P" + digits.ReplaceAllString(rest, "0")); zerr != nil {
				return time.Time{}, false, err
			}
			return time.Time{}, true, nil
		}
		t = t.Add(d)
	}
	if t.After(LatestTime) {
		return time.Time{}, true, nil
	}
	return t, false, nil
}

// addMonths moves t by n calendar months in its location, keeping the day
// of the month, or the target month's last day when it has fewer.
func addMonths(t time.Time, n int) time.Time {
	if n == 0 {
		return t
	}
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	if last := first.AddDate(0, 1, -1).Day(); d > last {
		d = last
	}
	return first.AddDate(0, 0, d-1)
}
