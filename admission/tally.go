package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// tally is what the count keeper knows of the records (countkeeper.go):
// every job available with a record, active, scheduled, retryable or
// pending, and the numbers it makes per queue.
type tally struct {
	mu      sync.Mutex
	heldFor time.Duration
	// lapsedKeep is how long a held claim is remembered past heldFor
	// (heldcheck.go): long enough for the sentinel of a process that
	// died holding it to be seen stale. 0: forgotten at once.
	lapsedKeep time.Duration
	// started is when the tally first made its numbers (Unix ms): claims
	// that lapsed before are remembered lapsedKeep from then.
	started int64
	// jobs are the jobs available with a record, active, scheduled,
	// retryable or pending, by id.
	jobs map[string]tallyJob
	// held are the active jobs whose claim holds its ready message, by id:
	// counted held until heldFor after the claim, then while a check found
	// the message still there (heldcheck.go).
	held map[string]heldJob
	// present is how many of held a check found still there.
	present int
	// counts are the jobs per queue and state (active, scheduled,
	// retryable, pending).
	counts map[gaugeKey]int64
	// parked are the parked jobs per queue and priority, as of the last
	// count (parkedReader).
	parked map[gaugeKey]int64
	// avail are the jobs available with a record per queue and priority.
	avail map[levelKey]int64
	// orphans are the ready messages the orphan check found whose job
	// record never reached them, by stream sequence (orphans.go): a
	// subject may hold several (the attempts of an enqueue retried
	// after answers that never came).
	orphans map[uint64]orphanMsg
	// queues interns queue tokens (one string per queue, not per job).
	queues map[string]string
	// ready is set, and readyC closed, once the first reading has caught
	// up with the stream.
	ready  bool
	readyC chan struct{}
	// applied is the stream sequence of the last record message read, and
	// waiting the questions waiting for it to reach theirs.
	applied uint64
	waiting []appliedWaiter
}

type tallyJob struct {
	queue string
	prio  int32
	state ojs.State
	// token is the job's token while it is available (a parked job's
	// waiter carries it).
	token string
}

type heldJob struct {
	queue string
	prio  int32
	until int64 // Unix ms
	// present: the last check found the held message in the ready
	// stream (its claiming process died holding it).
	present bool
}

// levelKey names a priority level of a queue (its token).
type levelKey struct {
	queue string
	prio  int32
}

// orphanMsg is a ready message that no record accounts for: its job's
// record is not available with its token, and no claim holds it.
type orphanMsg struct {
	queue     string
	prio      int32
	id, token string
	// subject is the message's ready subject.
	subject string
}

type appliedWaiter struct {
	seq uint64
	ch  chan struct{}
}

// gaugeKey names one number the keeper writes: a queue token and a
// counter name (ojs.count.<queue>.<name>).
type gaugeKey struct{ queue, name string }

// subject is the counter's subject; queue is a token already, which
// topology.CountSubject would escape again.
func (g gaugeKey) subject() string {
	return fmt.Sprintf(topology.CountSubjectPattern, g.queue, g.name)
}

func newTally(heldFor time.Duration) *tally {
	return &tally{heldFor: heldFor, jobs: map[string]tallyJob{}, held: map[string]heldJob{},
		counts: map[gaugeKey]int64{}, queues: map[string]string{}, readyC: make(chan struct{}),
		avail: map[levelKey]int64{}, orphans: map[uint64]orphanMsg{}}
}

// advance notes that the record message at stream sequence seq was read;
// last says the stream held no later message then.
func (t *tally) advance(seq uint64, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.applied = max(t.applied, seq)
	if last {
		t.setReady()
	}
	if len(t.waiting) == 0 {
		return
	}
	keep := t.waiting[:0]
	for _, w := range t.waiting {
		if w.seq <= t.applied {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	t.waiting = keep
}

func (t *tally) markCaughtUp() {
	t.mu.Lock()
	t.setReady()
	t.mu.Unlock()
}

// setReady marks the first reading caught up; t.mu is held.
func (t *tally) setReady() {
	if !t.ready {
		t.ready = true
		close(t.readyC)
	}
}

// caughtUpC is closed once the first reading has caught up.
func (t *tally) caughtUpC() <-chan struct{} { return t.readyC }

func (t *tally) caughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// waitApplied waits until the record message at stream sequence seq (or
// a later one) has been read.
func (t *tally) waitApplied(ctx context.Context, seq uint64) error {
	t.mu.Lock()
	if t.applied >= seq {
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	t.waiting = append(t.waiting, appliedWaiter{seq: seq, ch: ch})
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kept reports whether the keeper remembers jobs in state st.
func kept(st ojs.State) bool {
	switch st {
	case ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending:
		return true
	}
	return false
}

// apply moves job id to what st says (nil: the record is gone).
func (t *tally) apply(id string, st *jobstore.RecordStat) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.jobs[id]; ok {
		if old.state != ojs.StateAvailable {
			k := gaugeKey{old.queue, string(old.state)}
			if t.counts[k]--; t.counts[k] == 0 {
				delete(t.counts, k)
			}
		} else {
			k := levelKey{old.queue, old.prio}
			if t.avail[k]--; t.avail[k] == 0 {
				delete(t.avail, k)
			}
		}
		delete(t.jobs, id)
		if h, ok := t.held[id]; ok && h.present {
			t.present--
		}
		delete(t.held, id)
	}
	if st == nil || !kept(st.State) {
		return
	}
	q, ok := t.queues[st.Queue]
	if !ok {
		q = strings.Clone(st.Queue)
		t.queues[q] = q
	}
	id = strings.Clone(id) // not the message's subject, which it would keep
	j := tallyJob{queue: q, prio: int32(st.Priority), state: st.State}
	if st.State == ojs.StateAvailable {
		j.token = strings.Clone(st.Token)
	}
	t.jobs[id] = j
	if st.State != ojs.StateAvailable {
		t.counts[gaugeKey{q, string(st.State)}]++
	} else {
		t.avail[levelKey{q, j.prio}]++
	}
	if st.State == ojs.StateActive && st.HeldSince > 0 && t.heldFor > 0 {
		t.held[id] = heldJob{queue: q, prio: int32(st.Priority), until: st.HeldSince + t.heldFor.Milliseconds()}
	}
}

// heldToCheck returns the held claims whose ready message a check should
// look for as of now: those found there at the last check, and, when
// suspect (a process died holding messages), every claim past heldFor or
// within ahead of it, by id.
func (t *tally) heldToCheck(now time.Time, suspect bool, ahead time.Duration) map[string]heldJob {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !suspect && t.present == 0 {
		return nil
	}
	var out map[string]heldJob
	soon := now.Add(ahead).UnixMilli()
	for id, h := range t.held {
		if h.present || suspect && h.until <= soon {
			if out == nil {
				out = map[string]heldJob{}
			}
			out[id] = h
		}
	}
	return out
}

// heldChecked applies a check of the claims asked (heldToCheck): one whose
// message is there counts held until a later check finds it gone; one
// whose message is gone is forgotten (an acked ready message does not
// come back). A claim replaced since the question is left alone.
func (t *tally) heldChecked(asked map[string]heldJob, present map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, was := range asked {
		h, ok := t.held[id]
		if !ok || h.until != was.until || h.queue != was.queue || h.prio != was.prio {
			continue
		}
		switch {
		case present[id] && !h.present:
			h.present = true
			t.held[id] = h
			t.present++
		case !present[id]:
			if h.present {
				t.present--
			}
			delete(t.held, id)
		}
	}
}

// heldCount is how many claims the tally counts or remembers held.
func (t *tally) heldCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held)
}

// setParked replaces the parked counts.
func (t *tally) setParked(p map[gaugeKey]int64) {
	t.mu.Lock()
	t.parked = p
	t.mu.Unlock()
}

// gauges returns every number to write as of now: the state counts, the
// held messages and the parked. A claim counts held until heldFor after
// it, and after that while the last check found its message still there
// (heldcheck.go); one past heldFor that no check found is forgotten after
// lapsedKeep.
func (t *tally) gauges(now time.Time) map[gaugeKey]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[gaugeKey]int64, len(t.counts)+len(t.parked)+8)
	for k, n := range t.counts {
		out[k] = n
	}
	ms := now.UnixMilli()
	if t.started == 0 {
		t.started = ms
	}
	for id, h := range t.held {
		if h.until <= ms && !h.present {
			if max(h.until, t.started)+t.lapsedKeep.Milliseconds() <= ms {
				delete(t.held, id)
			}
			continue
		}
		out[gaugeKey{h.queue, heldAt(int(h.prio))}]++
	}
	for k, n := range t.parked {
		out[k] += n
	}
	for seq, o := range t.orphans {
		switch t.accounts(o, ms) {
		case accountedAvailable:
			delete(t.orphans, seq) // its record came after all
		case accountedHeld:
		default:
			out[gaugeKey{o.queue, orphanAt(int(o.prio))}]++
		}
	}
	return out
}

// How the records account for a ready message (accounts).
const (
	unaccounted = iota
	// accountedAvailable: its job is available with the message's token
	// at the message's level.
	accountedAvailable
	// accountedHeld: its job's claim holds it (counted held).
	accountedHeld
)

// accounts tells how the records account for the ready message o as of
// ms (Unix ms); t.mu is held.
func (t *tally) accounts(o orphanMsg, ms int64) int {
	if j, ok := t.jobs[o.id]; ok && j.state == ojs.StateAvailable && j.token == o.token &&
		j.queue == o.queue && j.prio == o.prio {
		return accountedAvailable
	}
	if h, ok := t.held[o.id]; ok && h.queue == o.queue && h.prio == o.prio && (h.until > ms || h.present) {
		return accountedHeld
	}
	return unaccounted
}

// unaccounted reports whether no record accounts for the ready message o
// as of now (accounts).
func (t *tally) unaccounted(o orphanMsg, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accounts(o, now.UnixMilli()) == unaccounted
}

// setOrphans replaces the orphans of level (queue token, priority) with
// found, by stream sequence.
func (t *tally) setOrphans(queue string, prio int32, found map[uint64]orphanMsg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for seq, o := range t.orphans {
		if o.queue == queue && o.prio == prio {
			delete(t.orphans, seq)
		}
	}
	for seq, o := range found {
		if q, ok := t.queues[o.queue]; ok {
			o.queue = q
		}
		t.orphans[seq] = o
	}
}

// orphanSubjects returns the ready subjects of the orphans known, each
// once.
func (t *tally) orphanSubjects() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[string]bool, len(t.orphans))
	out := make([]string, 0, len(t.orphans))
	for _, o := range t.orphans {
		if !seen[o.subject] {
			seen[o.subject] = true
			out = append(out, o.subject)
		}
	}
	return out
}

// orphansAt is how many orphans of level (queue token, priority) are
// known.
func (t *tally) orphansAt(queue string, prio int32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.orphans {
		if o.queue == queue && o.prio == prio {
			n++
		}
	}
	return n
}

// orphansGone forgets the orphans on the subjects among asked that a
// lookup found no message on: acked or deleted, they do not come back.
// One of several on a subject that still holds another stays until its
// level is scanned again (orphanCheck looks for that).
func (t *tally) orphansGone(asked []string, present map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := map[string]bool{}
	for _, subj := range asked {
		if !present[subj] {
			gone[subj] = true
		}
	}
	for seq, o := range t.orphans {
		if gone[o.subject] {
			delete(t.orphans, seq)
		}
	}
}

// accountedAll is accounted summed over every queue and level.
func (t *tally) accountedAll(now time.Time) int64 {
	g := t.gauges(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, v := range t.avail {
		n += v
	}
	for k, v := range g {
		switch {
		case strings.HasPrefix(k.name, parkedPrefix):
			n -= v
		case strings.HasPrefix(k.name, heldPrefix), strings.HasPrefix(k.name, orphanPrefix):
			n += v
		}
	}
	return n
}

// accounted returns, per priority level of queue (its token), the ready
// messages the records account for as of now: the jobs available with a
// record, less those parked (their message is gone), plus the messages
// counted held and the orphans known.
func (t *tally) accounted(queue string, now time.Time) map[int]int64 {
	g := t.gauges(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]int64{}
	for k, n := range t.avail {
		if k.queue == queue {
			out[int(k.prio)] += n
		}
	}
	for k, n := range g {
		if k.queue != queue {
			continue
		}
		if p, ok := levelOf(k.name, parkedPrefix); ok {
			out[p] -= n
		} else if p, ok := levelOf(k.name, heldPrefix); ok {
			out[p] += n
		} else if p, ok := levelOf(k.name, orphanPrefix); ok {
			out[p] += n
		}
	}
	return out
}

// numbers returns the numbers of the queues named by token as of now, by
// queue token and counter name; a queue the keeper knows nothing of has
// an empty map.
func (t *tally) numbers(now time.Time, tokens []string) map[string]map[string]int64 {
	want := make(map[string]map[string]int64, len(tokens))
	for _, q := range tokens {
		want[q] = map[string]int64{}
	}
	for k, n := range t.gauges(now) {
		if m, ok := want[k.queue]; ok {
			m[k.name] = n
		}
	}
	return want
}

// Counter names of the numbers the keeper writes per priority level.
const (
	heldPrefix   = "held_p"
	parkedPrefix = "parked_p"
	orphanPrefix = "orphan_p"
)

func heldAt(prio int) string {
	return fmt.Sprintf("%s%0*d", heldPrefix, topology.PriorityDigits, prio)
}

func orphanAt(prio int) string {
	return fmt.Sprintf("%s%0*d", orphanPrefix, topology.PriorityDigits, prio)
}

func parkedAt(prio int) string {
	return fmt.Sprintf("%s%0*d", parkedPrefix, topology.PriorityDigits, prio)
}

// keptName reports whether counter name is one the keeper writes.
func keptName(name string) bool {
	switch ojs.State(name) {
	case ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending:
		return true
	}
	return strings.HasPrefix(name, heldPrefix) || strings.HasPrefix(name, parkedPrefix) ||
		strings.HasPrefix(name, orphanPrefix)
}
