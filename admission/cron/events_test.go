package cron_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/cron"
	"github.com/jetgate/jetgate/admission/ojs"
)

// eventLog records the events published to it, in order.
type eventLog struct {
	mu     sync.Mutex
	events []loggedEvent
}

type loggedEvent struct {
	typ, subject string
	data         map[string]any
}

func (l *eventLog) Publish(typ, subject string, data any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, loggedEvent{typ, subject, data.(map[string]any)})
}

func (l *eventLog) of(typ string) []loggedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedEvent
	for _, e := range l.events {
		if e.typ == typ {
			out = append(out, e)
		}
	}
	return out
}

// ojs-events.md 3.6 and 4.5 (cron.triggered and cron.skipped, MUST at
// level 2; issue 32): with two processes on one server, each tick that
// enqueues publishes one cron.triggered naming the job it enqueued and its
// nominal tick, and each tick skipped by overlap_policy skip publishes one
// cron.skipped naming the unfinished job that made it skip.
func TestCronEventsTriggeredAndSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	log := &eventLog{}
	e.events = log
	p := e.start(0, nil)
	e.start(1, nil)
	skip := everyMinute("nightly", "cronevents")
	skip.OverlapPolicy = ojs.CronOverlapSkip
	register(t, p, skip)
	ctx := testCtx(t)

	deadline := time.Now().Add(60 * time.Second)
	for len(log.of(cron.EventSkipped)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("events after a minute: %d triggered, %d skipped", len(log.of(cron.EventTriggered)), len(log.of(cron.EventSkipped)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ids, _ := e.rec.snapshot()
	if len(ids) != 1 {
		t.Fatalf("skip policy enqueued %v while the first job waited", ids)
	}
	first := ids[0]
	triggered := log.of(cron.EventTriggered)
	if len(triggered) != 1 {
		t.Fatalf("cron.triggered published %d times for one enqueued tick: %+v", len(triggered), triggered)
	}
	tr := triggered[0]
	tick := tickOf(t, first)
	if tr.subject != "nightly" || tr.data["cron_name"] != "nightly" || tr.data["cron_expr"] != "* * * * *" ||
		tr.data["job_type"] != "report.generate" || tr.data["job_id"] != first {
		t.Fatalf("cron.triggered = %+v, want cron nightly's job %s", tr, first)
	}
	if at, ok := tr.data["scheduled_at"].(*ojs.Time); !ok || !at.Equal(tick) {
		t.Fatalf("cron.triggered scheduled_at = %v, want the tick %s", tr.data["scheduled_at"], tick)
	}
	var ticks []time.Time
	for _, sk := range log.of(cron.EventSkipped) {
		if sk.subject != "nightly" || sk.data["cron_name"] != "nightly" || sk.data["cron_expr"] != "* * * * *" ||
			sk.data["job_type"] != "report.generate" || sk.data["reason"] != "overlap_prevention" ||
			sk.data["existing_job_id"] != first {
			t.Fatalf("cron.skipped = %+v, want an overlap on %s", sk, first)
		}
		at := sk.data["scheduled_at"].(*ojs.Time).Time
		if !at.After(tick) {
			t.Fatalf("cron.skipped for tick %s, not after the triggered tick %s", at, tick)
		}
		ticks = append(ticks, at)
	}
	if len(slices.Compact(slices.Clone(ticks))) != len(ticks) {
		t.Fatalf("a skipped tick was published twice: %v", ticks)
	}
	// Once the job ends, the next tick enqueues and says so.
	if _, _, err := p.svc.Cancel(ctx, first); err != nil {
		t.Fatal(err)
	}
	for len(log.of(cron.EventTriggered)) < 2 {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("no cron.triggered after the previous run was cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if second := log.of(cron.EventTriggered)[1].data["job_id"]; second == first {
		t.Fatalf("the second cron.triggered names the first job %s", first)
	}
}
