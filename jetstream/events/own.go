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
// byte buffers are reused: keeping an event is a copy under a lock, with
// no allocation once the ring has turned. An event holds at most maxBytes
// bytes (the publisher reduces a larger one before keeping it, see
// fitted), so the ring never holds more than n × maxBytes bytes of events.
type own struct {
	maxBytes int

	mu    sync.Mutex
	slots []captured // ring; slots[next] is the oldest once full
	next  int
	full  bool
}

func newOwn(n, maxBytes int) *own {
	return &own{maxBytes: maxBytes, slots: make([]captured, n)}
}

// keep copies one encoded event (at most maxBytes long) into the ring,
// overwriting the oldest when it is full.
func (o *own) keep(subject string, b []byte) {
	o.mu.Lock()
	s := &o.slots[o.next]
	s.subject = subject
	s.data = append(s.data[:0], b...)
	o.next++
	if o.next == len(o.slots) {
		o.next, o.full = 0, true
	}
	o.mu.Unlock()
}

// snapshot returns a copy of the kept events, oldest first.
func (o *own) snapshot() []captured {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.next
	if o.full {
		n = len(o.slots)
	}
	out := make([]captured, 0, n)
	size := 0
	for i := range n {
		size += len(o.slots[(o.next-n+i+len(o.slots))%len(o.slots)].data)
	}
	buf := make([]byte, 0, size) // one allocation for every event's bytes
	for i := range n {
		s := o.slots[(o.next-n+i+len(o.slots))%len(o.slots)]
		start := len(buf)
		buf = append(buf, s.data...)
		out = append(out, captured{subject: s.subject, data: buf[start:len(buf):len(buf)]})
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
		n += cap(s.data)
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
