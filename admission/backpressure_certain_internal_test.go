package admission

import (
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// The bookkeeping of a remembered refusal (backpressure_certain.go,
// issue 20), step by step: a release under way when the refused attempt
// started makes room; each unit of room lets one unit through; a changed
// bound, another strategy, another kind of refusal or the end of the
// trust period forget it. BP-002: only refusals may come from memory.
func TestFullMemoBookkeeping_BP002(t *testing.T) {
	t.Parallel()
	cfg := ojs.Backpressure{MaxDepth: 10, Strategy: ojs.StrategyReject}
	full := &fullError{bound: "max_depth"}
	now := time.Now()
	q := &bpQueue{name: "q"}

	if q.certainlyFull(cfg, 1, now, time.Hour) {
		t.Fatal("full with nothing remembered")
	}
	q.releasing() // a release under way before the attempt
	a := q.startAttempt()
	q.attempted(cfg, a, full)
	if q.certainlyFull(cfg, 1, now, time.Hour) {
		t.Fatal("the release under way when the attempt started may have made room after it: one unit must go through")
	}
	q.released()
	if !q.certainlyFull(cfg, 1, now, time.Hour) {
		t.Fatal("its room was handed out: refuse")
	}
	q.freedElsewhere()
	if !q.certainlyFull(cfg, 2, now, time.Hour) {
		t.Fatal("one unit of room cannot take a batch of two")
	}
	if q.certainlyFull(cfg, 1, now, time.Hour) {
		t.Fatal("another process's release makes room for one")
	}
	if !q.certainlyFull(cfg, 1, now, time.Hour) {
		t.Fatal("that room was handed out too")
	}

	// Anything else forgets.
	remember := func() {
		q.attempted(cfg, q.startAttempt(), full)
		if !q.certainlyFull(cfg, 1, time.Now(), time.Hour) {
			t.Fatal("a fresh refusal is remembered")
		}
	}
	remember()
	if q.certainlyFull(ojs.Backpressure{MaxDepth: 11, Strategy: ojs.StrategyReject}, 1, time.Now(), time.Hour) {
		t.Fatal("a raised bound must ask JetStream")
	}
	remember()
	if q.certainlyFull(cfg, 1, time.Now().Add(time.Second), 100*time.Millisecond) {
		t.Fatal("a refusal older than its trust must ask JetStream")
	}
	remember()
	q.attempted(cfg, q.startAttempt(), &fullError{bound: "tenant_max_depth", tenant: "a"})
	if q.certainlyFull(cfg, 1, time.Now(), time.Hour) {
		t.Fatal("a tenant bound's refusal says nothing of the queue: forget")
	}
	block := ojs.Backpressure{MaxDepth: 10, Strategy: ojs.StrategyBlock}
	q.attempted(block, q.startAttempt(), full)
	if q.certainlyFull(block, 1, time.Now(), time.Hour) {
		t.Fatal("a block queue waits for room; it is never refused from memory")
	}
}
