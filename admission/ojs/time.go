package ojs

import (
	"fmt"
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
