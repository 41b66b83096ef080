package events

import (
	"encoding/json"
	"fmt"
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
	slots []ownSlot // ring: event number k is in slots[k % len(slots)]
	seq   uint64    // events kept so far; the next one is number seq
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
	s := &o.slots[o.seq%uint64(len(o.slots))]
	o.seq++
	return s
}

// oldest is the number of the oldest event the ring holds, under o.mu.
func (o *own) oldest() uint64 {
	return o.seq - min(o.seq, uint64(len(o.slots)))
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
	s.adoptJob()
	o.mu.Unlock()
}

// adoptJob points the pointer fields of s.jd that are set at s's own
// fields, copying the values they point at, so that s.jd shares nothing
// with the job (or slot) it was copied from.
func (s *ownSlot) adoptJob() {
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

// ownChunk is how many events a read copies out of the ring at a time.
const ownChunk = 128

// copyTo copies s into d, pointing d's job data at d's own fields, and
// its bytes into buf (returned grown; buf has room, so the bytes of the
// slots copied before stay where they are).
func (s *ownSlot) copyTo(d *ownSlot, buf []byte) []byte {
	d.subject, d.lazy = s.subject, s.lazy
	if !s.lazy {
		start := len(buf)
		buf = append(buf, s.data...)
		d.data = buf[start:len(buf):len(buf)]
		return buf
	}
	d.env, d.jd = s.env, s.jd
	start := len(buf)
	buf = append(buf, s.result...)
	d.result = buf[start:len(buf):len(buf)]
	if len(s.jd.Result) > 0 {
		d.jd.Result = d.result
	}
	d.adoptJob() // copies the values s's pointers hold into d
	return buf
}

// encoded returns the slot's event as bytes: its own, or its encoding
// (reduced through p when beyond maxBytes), appended to b.
func (s *ownSlot) encoded(b []byte, p *Publisher, maxBytes int) ([]byte, error) {
	if !s.lazy {
		return s.data, nil
	}
	b, err := appendEvent(b[:0], &s.env, &s.jd, nil)
	if err != nil {
		return nil, err
	}
	if len(b) > maxBytes {
		if r := p.reduce(s.env, &s.jd, nil, len(b), maxBytes); r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("events: a kept event of %d bytes does not fit %d even reduced", len(b), maxBytes)
	}
	return b, nil
}

// ownSource yields the events the ring held when it was made, newest
// first, that pass q. It copies them out of the ring ownChunk at a time,
// as the reader asks for more, holding the ring's lock only for those
// copies (so a read neither holds up the events being emitted nor copies
// a thousand events to list a hundred), and encodes and decodes an entry
// only when its subject passes the type filters. Events overwritten since
// it was made end it.
type ownSource struct {
	o        *own
	p        *Publisher
	top      uint64 // number of the next event to copy, plus one (0: none left)
	chunk    []ownSlot
	ci       int
	buf      []byte // the chunk's bytes
	enc      []byte // an encoding, reused
	filters  []string
	q        ojs.EventQuery
	maxBytes int
}

func (o *own) source(p *Publisher, q ojs.EventQuery) *ownSource {
	o.mu.Lock()
	top := o.seq
	o.mu.Unlock()
	return &ownSource{o: o, p: p, top: top, filters: filterSubjects(q.Types), q: q, maxBytes: o.maxBytes}
}

// fill copies the next chunk of events, newest first; false when none is
// left.
func (s *ownSource) fill() bool {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	low := o.oldest()
	if s.top <= low {
		s.top = 0
		return false
	}
	from := max(low, s.top-min(s.top, ownChunk))
	n := int(s.top - from)
	size := 0
	for k := from; k < s.top; k++ {
		sl := &o.slots[k%uint64(len(o.slots))]
		size += len(sl.data) + len(sl.result)
	}
	if cap(s.buf) < size {
		s.buf = make([]byte, 0, size)
	}
	buf := s.buf[:0]
	if cap(s.chunk) < n {
		s.chunk = make([]ownSlot, n)
	}
	s.chunk = s.chunk[:n]
	for j := range n {
		buf = o.slots[(s.top-1-uint64(j))%uint64(len(o.slots))].copyTo(&s.chunk[j], buf)
	}
	s.top, s.ci = from, 0
	return true
}

func (s *ownSource) next() (ojs.Event, bool) {
	for {
		if s.ci == len(s.chunk) {
			if s.top == 0 || !s.fill() {
				return ojs.Event{}, false
			}
		}
		e := &s.chunk[s.ci]
		s.ci++
		if len(s.filters) > 0 && !matchesAny(s.filters, e.subject) {
			continue
		}
		b, err := e.encoded(s.enc, s.p, s.maxBytes)
		if e.lazy && err == nil {
			s.enc = b[:0] // reused: Unmarshal copies what ojs.Event keeps
		}
		var ev ojs.Event
		if err == nil {
			err = json.Unmarshal(b, &ev)
		}
		if err != nil || ev.Type == "" || ev.SpecVersion == "" {
			s.p.skipMalformed(e.subject, err)
			continue
		}
		if s.q.Match(ev) {
			return ev, true
		}
	}
}

// len returns how many events the ring holds (for tests).
func (o *own) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return int(o.seq - o.oldest())
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
