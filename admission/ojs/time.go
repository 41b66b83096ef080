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
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Time{}, err
	}
	t := Time{Time: v.UTC().Truncate(time.Millisecond)}
	if s != t.Time.Format(TimeFormat) {
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
	return t.UTC().Format(TimeFormat)
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
func (t Time) String() string { return t.UTC().Format(TimeFormat) }

// equal reports whether t and u are the same instant, whatever their text.
func (t Time) equal(u Time) bool { return t.Time.Equal(u.Time) }
