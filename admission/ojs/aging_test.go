package ojs

import (
	"encoding/json"
	"testing"
	"time"
)

// ojs-priority.md 8.2: the effective priority falls by step per full
// interval waited, never below min_priority, and jobs at or below it do
// not age; Bound is the wait after which a level is reached.
func TestAgingEffective_PRI8_2(t *testing.T) {
	a := Aging{Interval: time.Minute, Step: 2, MinPriority: 1}
	for _, c := range []struct {
		prio int
		age  time.Duration
		want int
	}{
		{9, 0, 9},
		{9, 59 * time.Second, 9},
		{9, time.Minute, 7},
		{9, 3*time.Minute + time.Second, 3},
		{9, time.Hour, 1},
		{2, time.Hour, 1},
		{1, time.Hour, 1},
		{0, time.Hour, 0},
		{9, -time.Minute, 9},
		{999, 1000 * time.Hour, 1},
	} {
		if got := a.Effective(c.prio, c.age); got != c.want {
			t.Errorf("Effective(%d, %s) = %d, want %d", c.prio, c.age, got, c.want)
		}
	}
	if got := a.Bound(9, 4); got != 3*time.Minute {
		t.Errorf("Bound(9, 4) = %s, want 3m", got)
	}
	if got := a.Effective(9, a.Bound(9, 4)); got > 4 {
		t.Errorf("after Bound(9, 4) the effective priority is %d", got)
	}
}

// The stored form round-trips, interval exact, and carries both units.
func TestAgingJSON(t *testing.T) {
	a := Aging{Interval: 1500 * time.Microsecond, Step: 3, MinPriority: 2}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Aging
	if err := json.Unmarshal(b, &back); err != nil || back != a {
		t.Fatalf("%s read back as %+v, %v", b, back, err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["interval_ms"] != float64(1) || m["interval"] == "" {
		t.Fatalf("stored form %s", b)
	}
}
