package admission

import (
	"errors"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Refusing without a round trip (issue 20, jetgate load).
//
// Under overload most enqueues of a reject queue are refused, and each
// refusal used to publish its unit only to have JetStream refuse it: a
// round trip per 429 that, at twice the sustained rate, crowded out the
// drain. A process now remembers that a queue was full and refuses from
// that memory while it is certain the queue is still full. Only refusals
// come early, never admissions: every admission is still JetStream's
// atomic limit check, so the bound stays exact across processes.
//
// Certainty: a unit refused for max_depth proves the depth stream held
// max_depth units when JetStream handled the publish. The attempt noted
// how many of this process's releases had completed when it started
// (base). From then on the queue can only have gained room by a release,
// so a process keeps, under q.mu:
//   - relStarted, counted before a unit's delete is sent (releaseUnit),
//     and each freed notice of another process (sent after its delete
//     completed);
//   - relDone, counted after a delete completed, and per notice.
//
// Free room is at most relStarted - base - granted, granted being the
// units let through to JetStream since; a release in flight when the
// attempt started counts, because it is counted as started and not as
// done at base. An acquire of n units is refused at once when that is
// below n; otherwise it takes n of it and publishes. A publish refused
// again starts a new certainty; one that fails otherwise ends it.
//
// Another process's release is known here only when its freed notice
// arrives (core NATS, after its delete): within that delivery time a
// refusal can come while one unit of room exists, as a refused publish can
// race a delete anyway. A notice can be lost (reconnect, slow consumer),
// so certainty also ends certainFor after its attempt started; the next
// enqueue then asks JetStream. A change of the queue's bound or strategy
// ends it too. Only max_depth refusals of reject queues are remembered: a
// size bound may still fit a smaller job, a tenant bound another tenant,
// and block and drop_oldest act on a refusal rather than answer it.
//
// ojs-backpressure.md 5.1 ("when the queue bound is reached, the backend
// rejects the enqueue request immediately") and 7.1/7.2: the 429 carries
// the depth this process knows (its last reading, with its own admissions
// and releases since), which is the bound while certainty holds unless a
// release of its own is under way.

// certainFor is how long a max_depth refusal is trusted without news of
// a release; a lost freed notice delays an admission by at most this.
const certainFor = 100 * time.Millisecond

// fullMemo is a queue's remembered max_depth refusal; guarded by bpQueue.mu.
type fullMemo struct {
	known   bool
	cfg     ojs.Backpressure // the bound it was refused under
	at      time.Time        // when the refused attempt started
	base    uint64           // relDone when it started
	granted uint64           // units let through since
}

// attempt is what an acquire notes before publishing its units.
type attempt struct {
	at   time.Time
	base uint64
}

// certainlyFull reports whether an acquire of n units under cfg is
// certain to be refused for max_depth. When it is not but a refusal is
// remembered, the n units are counted as let through.
func (q *bpQueue) certainlyFull(cfg ojs.Backpressure, n int, now time.Time, trust time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := &q.full
	if !m.known || m.cfg != cfg || cfg.Strategy != ojs.StrategyReject || now.Sub(m.at) > trust {
		m.known = false
		return false
	}
	room := q.relStarted - m.base - m.granted
	if room < uint64(n) {
		return true
	}
	m.granted += uint64(n)
	return false
}

// startAttempt notes when an acquire's publish starts.
func (q *bpQueue) startAttempt() attempt {
	q.mu.Lock()
	defer q.mu.Unlock()
	return attempt{at: time.Now(), base: q.relDone}
}

// attempted records the outcome of an acquire's publish under cfg: a
// max_depth refusal is remembered (the most recent attempt's wins), any
// other failure forgets, an admission changes nothing.
func (q *bpQueue) attempted(cfg ojs.Backpressure, a attempt, err error) {
	if err == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	full, ok := errors.AsType[*fullError](err)
	if !ok || full.bound != "max_depth" || cfg.Strategy != ojs.StrategyReject {
		q.full = fullMemo{}
		return
	}
	if q.full.known && q.full.cfg == cfg && q.full.base > a.base {
		return // a later attempt's refusal is remembered already
	}
	q.full = fullMemo{known: true, cfg: cfg, at: a.at, base: a.base}
}

// releasing counts a release about to be sent; released, one completed.
func (q *bpQueue) releasing() {
	q.mu.Lock()
	q.relStarted++
	q.mu.Unlock()
}

func (q *bpQueue) released() {
	q.mu.Lock()
	q.relDone++
	q.mu.Unlock()
}

// freedElsewhere counts another process's completed release.
func (q *bpQueue) freedElsewhere() {
	q.mu.Lock()
	q.relStarted++
	q.relDone++
	q.mu.Unlock()
}
