package ojs

import (
	"testing"
	"time"
)

// ojs-events.md 6.1 and 6.4: EventQuery.Match applies every filter that is
// set; the items of one list are alternatives; "job.*" matches every type
// under "job." and "*" every type.
func TestEventQueryMatch_6_4(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 2, 12, 10, 30, 0, 0, time.UTC)
	ev := Event{Type: "job.completed", Time: Time{Time: at},
		Data: []byte(`{"job_type":"mail.send","queue":"mail","attempt":1}`)}
	queueEv := Event{Type: "queue.paused", Time: Time{Time: at}, Data: []byte(`{"queue":"mail"}`)}
	tests := []struct {
		name string
		q    EventQuery
		ev   Event
		want bool
	}{
		{"no filter", EventQuery{}, ev, true},
		{"type", EventQuery{Types: []string{"job.failed", "job.completed"}}, ev, true},
		{"other type", EventQuery{Types: []string{"job.failed"}}, ev, false},
		{"prefix", EventQuery{Types: []string{"job.*"}}, ev, true},
		{"other prefix", EventQuery{Types: []string{"queue.*"}}, ev, false},
		{"prefix is not a word prefix", EventQuery{Types: []string{"jo.*"}}, ev, false},
		{"star", EventQuery{Types: []string{"*"}}, ev, true},
		{"queue", EventQuery{Queues: []string{"x", "mail"}}, ev, true},
		{"other queue", EventQuery{Queues: []string{"x"}}, ev, false},
		{"queue event", EventQuery{Queues: []string{"mail"}}, queueEv, true},
		{"job type", EventQuery{JobTypes: []string{"mail.send"}}, ev, true},
		{"job type of a queue event", EventQuery{JobTypes: []string{"mail.send"}}, queueEv, false},
		{"all hold", EventQuery{Types: []string{"job.*"}, Queues: []string{"mail"}, JobTypes: []string{"mail.send"}}, ev, true},
		{"one fails", EventQuery{Types: []string{"job.*"}, Queues: []string{"mail"}, JobTypes: []string{"x.y"}}, ev, false},
		{"since", EventQuery{Since: at.Add(time.Second)}, ev, false},
		{"since equal", EventQuery{Since: at}, ev, true},
		{"data not an object", EventQuery{Queues: []string{"mail"}}, Event{Type: "x", Data: []byte(`[1]`)}, false},
	}
	for _, tc := range tests {
		if got := tc.q.Match(tc.ev); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}
