package ojs

import (
	"encoding/json"
	"fmt"
	"time"
)

// Aging is a queue's priority aging (ojs-priority.md 8.2): a ready job's
// effective priority improves by Step for every full Interval it has been
// waiting, down to MinPriority; its stored priority never changes. A job
// whose stored priority is already at or below MinPriority does not age.
type Aging struct {
	Interval    time.Duration
	Step        int
	MinPriority int
}

// Aging defaults and bounds.
const (
	DefaultAgingStep = 1
	// MinAgingInterval is the shortest interval accepted: ages are read
	// from ready message timestamps, which are exact to far less.
	MinAgingInterval = time.Millisecond
	// MaxAgingInterval is the longest interval accepted (30 days).
	MaxAgingInterval = 30 * 24 * time.Hour
)

// Effective returns the effective priority of a job of stored priority
// prio that has been ready for age: max(MinPriority, prio -
// Step*floor(age/Interval)), and prio itself when prio <= MinPriority.
func (a Aging) Effective(prio int, age time.Duration) int {
	if prio <= a.MinPriority || age < a.Interval || a.Interval <= 0 {
		return prio
	}
	steps := int64(age / a.Interval)
	if gain := steps * int64(a.Step); gain < int64(prio-a.MinPriority) {
		return prio - int(gain)
	}
	return a.MinPriority
}

// Bound returns how long a job of stored priority prio waits at most
// before its effective priority reaches target (target < prio, target >=
// MinPriority): the documented bound of aging.
func (a Aging) Bound(prio, target int) time.Duration {
	if target >= prio {
		return 0
	}
	steps := (prio - target + a.Step - 1) / a.Step
	return time.Duration(steps) * a.Interval
}

// Validate checks the ranges; prefix names the object in errors.
func (a Aging) Validate(prefix string) error {
	switch {
	case a.Interval < MinAgingInterval || a.Interval > MaxAgingInterval:
		return &ValidationError{Field: prefix + "interval_ms", Rule: "a duration from 1 ms to 30 days",
			Received: a.Interval.String()}
	case a.Step < 1 || a.Step > MaxPriority:
		return &ValidationError{Field: prefix + "step", Rule: fmt.Sprintf("an integer from 1 to %d", MaxPriority),
			Received: fmt.Sprint(a.Step)}
	case a.MinPriority < 0 || a.MinPriority > MaxPriority:
		return &ValidationError{Field: prefix + "min_priority", Rule: priorityRule, Received: fmt.Sprint(a.MinPriority)}
	}
	return nil
}

// agingJSON is how Aging travels and is stored: the interval both as
// milliseconds and as an ISO 8601 duration.
type agingJSON struct {
	Interval    string `json:"interval"`
	IntervalMs  int64  `json:"interval_ms"`
	Step        int    `json:"step"`
	MinPriority int    `json:"min_priority"`
}

// MarshalJSON writes {"interval","interval_ms","step","min_priority"}.
func (a Aging) MarshalJSON() ([]byte, error) {
	return json.Marshal(agingJSON{
		Interval: FormatISODuration(a.Interval), IntervalMs: a.Interval.Milliseconds(),
		Step: a.Step, MinPriority: a.MinPriority,
	})
}

// UnmarshalJSON reads what MarshalJSON writes (stored queue records);
// the ISO 8601 interval wins, being exact below a millisecond.
func (a *Aging) UnmarshalJSON(b []byte) error {
	var v agingJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	a.Interval = time.Duration(v.IntervalMs) * time.Millisecond
	if v.Interval != "" {
		d, err := ParseISODuration(v.Interval)
		if err != nil {
			return fmt.Errorf("aging interval: %w", err)
		}
		a.Interval = d
	}
	a.Step, a.MinPriority = v.Step, v.MinPriority
	return nil
}

// QueueAging is GET /ojs/v1/admin/queues/{name}/aging.
type QueueAging struct {
	Queue string `json:"queue"`
	Aging *Aging `json:"aging"`
}
