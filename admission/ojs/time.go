package ojs

import (
	"fmt"
	"time"
)

// TimeFormat is how every timestamp leaves jetgate: RFC 3339, UTC,
// millisecond precision (ojs-http-binding.md 6.3).
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time is a timestamp that marshals in TimeFormat and unmarshals any RFC 3339
// timestamp, with or without a non-UTC offset.
type Time struct{ time.Time }

// NewTime returns t as a *Time in UTC.
func NewTime(t time.Time) *Time { return &Time{t.UTC()} }

// MarshalJSON writes the time in TimeFormat.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(TimeFormat) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 timestamp.
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("timestamp must be RFC 3339: %w", err)
	}
	t.Time = v.UTC()
	return nil
}

// String formats the time in TimeFormat.
func (t Time) String() string { return t.UTC().Format(TimeFormat) }
