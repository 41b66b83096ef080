package ojs

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// LatestTime is the last millisecond JetStream's int64 nanoseconds hold.
func TestLatestTime(t *testing.T) {
	t.Parallel()
	if LatestTimeText != "2262-04-11T23:47:16.854Z" {
		t.Fatalf("LatestTime %s", LatestTimeText)
	}
	if n := LatestTime.UnixNano(); time.Unix(0, n).UTC() != LatestTime {
		t.Fatalf("LatestTime does not survive UnixNano: %d", n)
	}
	if next := LatestTime.Add(time.Millisecond); next.UnixNano() > 0 && time.Unix(0, next.UnixNano()).Equal(next) {
		t.Fatalf("a millisecond later still fits int64 nanoseconds: LatestTime is not the latest")
	}
	if got := Schedulable(LatestTime.AddDate(1, 0, 0)); !got.Equal(LatestTime) {
		t.Errorf("Schedulable a year past = %v", got)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Schedulable(now); !got.Equal(now) {
		t.Errorf("Schedulable(now) = %v", got)
	}
	if ttl := SchedulableTTL(now, math.MaxInt64); now.Add(ttl).After(LatestTime) || ttl < 200*365*24*time.Hour {
		t.Errorf("SchedulableTTL(max) = %v", ttl)
	}
	if ttl := SchedulableTTL(now, time.Hour); ttl != time.Hour {
		t.Errorf("SchedulableTTL(1h) = %v", ttl)
	}
}

// Issue 31 item 4: scheduled_at, delay_until and expires_at past the
// latest time JetStream can schedule (2262-04-11T23:47:16.854Z) are 400
// naming the field and that time, in both the absolute and the relative
// form; up to it they are accepted.
func TestIssue31FarTimesAreRefusedNamingTheLatest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, field string }{
		{`{"type":"a","args":[],"scheduled_at":"2300-01-01T00:00:00Z"}`, "scheduled_at"},
		{`{"type":"a","args":[],"options":{"delay_until":"2300-01-01T00:00:00Z"}}`, "options.delay_until"},
		{`{"type":"a","args":[],"options":{"scheduled_at":"9999-12-31T23:59:59Z"}}`, "options.scheduled_at"},
		{`{"type":"a","args":[],"expires_at":"2262-04-11T23:47:16.855Z"}`, "expires_at"},
		{`{"type":"a","args":[],"options":{"expires_at":"2262-04-12T01:47:16.855+02:00"}}`, "options.expires_at"},
		{`{"type":"a","args":[],"scheduled_at":"+P250Y"}`, "scheduled_at"},
		{`{"type":"a","args":[],"options":{"delay_until":"+P3000M"}}`, "options.delay_until"},
		{`{"type":"a","args":[],"scheduled_at":"+PT2562047H47M16S"}`, "scheduled_at"},
		{`{"type":"a","args":[],"scheduled_at":"+P99999999999999999999W"}`, "scheduled_at"},
		{`{"type":"a","args":[],"expires_at":"+P100000D"}`, "expires_at"},
	} {
		_, err := ParseJob([]byte(tc.body))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Error(), LatestTimeText) ||
			!strings.Contains(ve.Rule, LatestTimeText) {
			t.Errorf("%s: %v, want a 400 naming %s and %s", tc.body, err, tc.field, LatestTimeText)
		}
	}
	for _, body := range []string{
		`{"type":"a","args":[],"scheduled_at":"2262-04-11T23:47:16.854Z"}`,
		`{"type":"a","args":[],"expires_at":"2262-04-12T01:47:16.854+02:00"}`,
		`{"type":"a","args":[],"scheduled_at":"+P200Y"}`,
		`{"type":"a","args":[],"options":{"delay_until":"+P1Y2M3DT4H5M6.5S"}}`,
	} {
		if _, err := ParseJob([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	// Not a duration at all stays the format error.
	for _, rel := range []string{"+P1.5Y", "+P1.5DT1H", "+PT", "+P", "+P1M1Y", "+5s"} {
		_, err := ParseJob([]byte(`{"type":"a","args":[],"scheduled_at":"` + rel + `"}`))
		if err == nil || strings.Contains(err.Error(), LatestTimeText) {
			t.Errorf("%s: %v, want the format error", rel, err)
		}
	}
}

// Relative times: years and months move the calendar date (clamped to
// the month's last day), the rest is exact.
func TestRelativeTimeCalendar(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
	for iso, want := range map[string]time.Time{
		"P1M":         time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC),
		"P1Y1M":       time.Date(2027, 2, 28, 10, 0, 0, 0, time.UTC),
		"P2Y1M":       time.Date(2028, 2, 29, 10, 0, 0, 0, time.UTC),
		"P13M":        time.Date(2027, 2, 28, 10, 0, 0, 0, time.UTC),
		"P1Y":         time.Date(2027, 1, 31, 10, 0, 0, 0, time.UTC),
		"P1MT1M":      time.Date(2026, 2, 28, 10, 1, 0, 0, time.UTC),
		"P1DT0.5S":    time.Date(2026, 2, 1, 10, 0, 0, 500_000_000, time.UTC),
		"P2W":         time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC),
		"P0Y":         now,
		"P236Y2M11D":  time.Date(2262, 4, 11, 10, 0, 0, 0, time.UTC),
		"PT1H":        now.Add(time.Hour),
		"P1Y2M3DT4H":  time.Date(2027, 4, 3, 14, 0, 0, 0, time.UTC),
		"P10Y0M0DT0S": time.Date(2036, 1, 31, 10, 0, 0, 0, time.UTC),
	} {
		got, far, err := RelativeTime(iso, now)
		if err != nil || far || !got.Equal(want) {
			t.Errorf("RelativeTime(%s) = %v, %v, %v; want %v", iso, got, far, err, want)
		}
	}
	for _, iso := range []string{"P237Y", "P236Y3M", "P10000Y", "P999999999999Y", "PT9999999999999999999H"} {
		if _, far, err := RelativeTime(iso, now); !far || err != nil {
			t.Errorf("RelativeTime(%s): far %v, %v; want far", iso, far, err)
		}
	}
}

// Issue 31 item 4, a property over random instants up to year 9999, in
// every field and spelling a client may use: an instant up to LatestTime
// is accepted as that instant (to the millisecond); a later one is 400
// naming the field and the latest accepted time.
func TestIssue31RandomInstantsUpToYear9999(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 4))
	lo := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC).UnixMilli()
	fields := []struct{ wrap, path string }{
		{`"scheduled_at":%s`, "scheduled_at"},
		{`"options":{"delay_until":%s}`, "options.delay_until"},
		{`"options":{"scheduled_at":%s}`, "options.scheduled_at"},
		{`"expires_at":%s`, "expires_at"},
		{`"options":{"expires_at":%s}`, "options.expires_at"},
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600)}
	accepted, refused := 0, 0
	for i := range 4000 {
		var at time.Time
		switch i % 4 {
		case 0: // around LatestTime, where the bound bites
			at = LatestTime.Add(time.Duration(r.Int64N(int64(48*time.Hour))) - 24*time.Hour).Truncate(time.Millisecond)
		default:
			at = time.UnixMilli(lo + r.Int64N(hi-lo)).UTC()
		}
		text := at.In(zones[r.IntN(len(zones))]).Format(time.RFC3339Nano)
		f := fields[r.IntN(len(fields))]
		body := `{"type":"a","args":[],` + strings.Replace(f.wrap, "%s", `"`+text+`"`, 1) + `}`
		j, err := ParseJob([]byte(body))
		if !at.After(LatestTime) {
			accepted++
			if err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			got := j.ScheduledAt
			if strings.HasSuffix(f.path, "expires_at") {
				got = j.ExpiresAt
			}
			if got == nil || !got.Equal(at) || time.Unix(0, got.UnixNano()).UTC() != at {
				t.Fatalf("%s: parsed %v, want %v that survives int64 nanoseconds", body, got, at)
			}
			continue
		}
		refused++
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != f.path || !strings.Contains(ve.Error(), LatestTimeText) {
			t.Fatalf("%s: %v, want 400 naming %s and %s", body, err, f.path, LatestTimeText)
		}
	}
	if accepted < 500 || refused < 500 {
		t.Fatalf("%d accepted, %d refused: the instants do not cover both sides", accepted, refused)
	}
}
