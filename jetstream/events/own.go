package events

import (
	"encoding/json"
	"sync"

	"github.com/jetgate/jetgate/admission/ojs"
)

// own keeps the last events this Publisher emitted, whether or not anyone
// on NATS heard them, so that GET /ojs/v1/events on this process lists
// them at once, without a stored message, a NATS message or a capture
// started before (issue 32 events). It is a fixed ring of n slots whose
// buffers are reused, so keeping an event allocates nothing once the ring
// has turned.
//
// An event that was encoded to be published is kept as its bytes, at most
// maxBytes (the publisher reduces a larger one first, see reduce). A job
// event nobody heard, the usual case on the embedded server, is kept
// unencoded (keepJob): its envelope fields and a copy of its job data,
// encoded only when read. Encoding was most of an event's cost (issue
// 17), and most kept events are never read. Such an entry holds at most
// maxBytes/2 of result and a few short strings (lazyFits); its encoding
// is reduced at read time when it is beyond maxBytes. So the ring holds
// about n × maxBytes bytes at most (4 MiB by default), a few hundred bytes
// per event usually.
type own struct {
	maxBytes int

	mu    sync.Mutex
	slots []ownSlot // ring; slots[next] is the oldest once full
	next  int
	full  bool
}

// ownSlot is one kept event: encoded (data) or not (lazy). The pointer
// fields of jd point into the slot's own fields, never into the caller's
// job.
type ownSlot struct {
	subject string // the NATS subject
	data    []byte // the encoded event, unless lazy
	lazy    bool
	env     envFields
	jd      jobData
	result  []byte
	ints    [4]int // priority, attempt, max_attempts, total_attempts
	int64s  [2]int64
	worker  string
	times   [5]ojs.Time
}

func newOwn(n, maxBytes int) *own {
	return &own{maxBytes: maxBytes, slots: make([]ownSlot, n)}
}

// slot returns the slot to overwrite, under o.mu.
func (o *own) slot() *ownSlot {
	s := &o.slots[o.next]
	o.next++
	if o.next == len(o.slots) {
		o.next, o.full = 0, true
	}
	return s
}

// keep copies one encoded event (at most maxBytes long) into the ring,
// overwriting the oldest when it is full.
func (o *own) keep(subject string, b []byte) {
	o.mu.Lock()
	s := o.slot()
	s.subject, s.lazy = subject, false
	s.data = append(s.data[:0], b...)
	s.clearJob()
	o.mu.Unlock()
}

// maxLazyString bounds each string of a job event kept unencoded.
const maxLazyString = 256

// lazyFits reports whether a job event may be kept unencoded: job data
// without an error (whose message and stack trace may be long), a result
// of at most maxBytes/2 and short strings.
func (o *own) lazyFits(subject string, jd *jobData) bool {
	return o != nil && jd != nil && jd.Error == nil && jd.LastError == nil && len(jd.Result) <= o.maxBytes/2 &&
		len(subject) <= maxLazyString && len(jd.JobType) <= maxLazyString && len(jd.Queue) <= maxLazyString &&
		len(jd.TraceID) <= maxLazyString && (jd.WorkerID == nil || len(*jd.WorkerID) <= maxLazyString)
}

// keepJob keeps a job event unencoded (lazyFits must hold): its envelope
// fields and a copy of jd that shares nothing with the caller's job but
// its strings (immutable).
func (o *own) keepJob(subject string, env *envFields, jd *jobData) {
	o.mu.Lock()
	s := o.slot()
	s.subject, s.lazy, s.env = subject, true, *env
	s.data = s.data[:0]
	s.jd = *jd
	s.result = append(s.result[:0], jd.Result...)
	if len(jd.Result) > 0 {
		s.jd.Result = s.result
	}
	copyPtr(&s.jd.Priority, &s.ints[0])
	copyPtr(&s.jd.Attempt, &s.ints[1])
	copyPtr(&s.jd.MaxAttempts, &s.ints[2])
	copyPtr(&s.jd.TotalAttempts, &s.ints[3])
	copyPtr(&s.jd.DurationMs, &s.int64s[0])
	copyPtr(&s.jd.TTLMs, &s.int64s[1])
	copyPtr(&s.jd.WorkerID, &s.worker)
	copyPtr(&s.jd.NextRetryAt, &s.times[0])
	copyPtr(&s.jd.ScheduledAt, &s.times[1])
	copyPtr(&s.jd.VisibleUntil, &s.times[2])
	copyPtr(&s.jd.CreatedAt, &s.times[3])
	copyPtr(&s.jd.ExpiredAt, &s.times[4])
	o.mu.Unlock()
}

// copyPtr copies *(*p) into dst and points *p at dst, when *p is set.
func copyPtr[T any](p **T, dst *T) {
	if *p != nil {
		*dst = **p
		*p = dst
	}
}

// clearJob drops what a lazy entry referenced (strings of a job).
func (s *ownSlot) clearJob() {
	s.env, s.jd, s.worker = envFields{}, jobData{}, ""
	s.times = [5]ojs.Time{}
}

// snapshot returns a copy of the kept events, oldest first, encoding the
// lazy ones (reduced through p when beyond maxBytes; one that does not
// encode is skipped).
func (o *own) snapshot(p *Publisher) []captured {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.next
	if o.full {
		n = len(o.slots)
	}
	out := make([]captured, 0, n)
	var buf []byte // every event's bytes, in few allocations
	for i := range n {
		s := &o.slots[(o.next-n+i+len(o.slots))%len(o.slots)]
		start := len(buf)
		if !s.lazy {
			buf = append(buf, s.data...)
		} else {
			var err error
			if buf, err = appendEvent(buf, &s.env, &s.jd, nil); err != nil {
				buf = buf[:start]
				p.skipMalformed(s.subject, err)
				continue
			}
			if len(buf)-start > o.maxBytes {
				r := p.reduce(s.env, &s.jd, nil, len(buf)-start, o.maxBytes)
				buf = append(buf[:start], r...)
			}
		}
		if len(buf) > start {
			out = append(out, captured{subject: s.subject, data: buf[start:len(buf):len(buf)]})
		}
	}
	return out
}

// len returns how many events the ring holds (for tests).
func (o *own) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full {
		return len(o.slots)
	}
	return o.next
}

// bytes returns the capacity of the ring's buffers, the memory it holds
// besides its slots (for tests).
func (o *own) bytes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, s := range o.slots {
		n += cap(s.data) + cap(s.result)
	}
	return n
}

// newest yields, newest first, the events of ents (oldest first) that
// pass the subject filters of q's types and q itself; malformed messages
// are skipped. It decodes an entry only when the caller asks for the next
// event.
type newest struct {
	ents    []captured
	i       int
	filters []string
	q       ojs.EventQuery
	skipped func(subject string, err error)
}

func newNewest(ents []captured, q ojs.EventQuery, skipped func(string, error)) *newest {
	return &newest{ents: ents, i: len(ents) - 1, filters: filterSubjects(q.Types), q: q, skipped: skipped}
}

func (n *newest) next() (ojs.Event, bool) {
	for ; n.i >= 0; n.i-- {
		e := n.ents[n.i]
		if len(n.filters) > 0 && !matchesAny(n.filters, e.subject) {
			continue
		}
		var ev ojs.Event
		if err := json.Unmarshal(e.data, &ev); err != nil || ev.Type == "" || ev.SpecVersion == "" {
			n.skipped(e.subject, err)
			continue
		}
		if n.q.Match(ev) {
			n.i--
			return ev, true
		}
	}
	return ojs.Event{}, false
}

func matchesAny(filters []string, subject string) bool {
	for _, f := range filters {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// listed yields the events of a list already filtered, newest first.
type listed struct {
	evs []ojs.Event
	i   int
}

func (l *listed) next() (ojs.Event, bool) {
	if l.i >= len(l.evs) {
		return ojs.Event{}, false
	}
	l.i++
	return l.evs[l.i-1], true
}

// eventSource yields events newest first.
type eventSource interface {
	next() (ojs.Event, bool)
}

// mergeNewest lists at most limit events of srcs, newest first by event
// time, each event once (by id). Each source is newest first; the merge
// keeps each one's own order (the capture's is arrival order, which
// another process's clock may make differ slightly from time order) and,
// between sources, takes the newer head, the earlier source on a tie: the
// same event found in two sources has the same time, so the copy of the
// earlier source is the one listed (the capture's or the stream's, which
// carries the event as it was published, before the own ring's copy,
// which may be reduced to its bound).
func mergeNewest(limit int, srcs ...eventSource) []ojs.Event {
	type head struct {
		ev ojs.Event
		ok bool
	}
	heads := make([]head, len(srcs))
	for i, s := range srcs {
		heads[i].ev, heads[i].ok = s.next()
	}
	out := make([]ojs.Event, 0, min(limit, 64))
	seen := make(map[string]struct{}, min(limit, 64))
	for len(out) < limit {
		best := -1
		for i, h := range heads {
			if h.ok && (best < 0 || h.ev.Time.After(heads[best].ev.Time.Time)) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		ev := heads[best].ev
		heads[best].ev, heads[best].ok = srcs[best].next()
		if _, dup := seen[ev.ID]; dup {
			continue
		}
		seen[ev.ID] = struct{}{}
		out = append(out, ev)
	}
	return out
}
