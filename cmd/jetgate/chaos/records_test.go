package chaos

import (
	"sort"
	"sync"
	"time"
)

// Enqueue outcomes of a job.
const (
	enqAccepted = "accepted" // 201, or 409 duplicate to a retry with the same id
	enqRefused  = "refused"  // 429 with no earlier unclear attempt: not stored
	enqMaybe    = "maybe"    // no clear answer yet: a GET decides
	enqNever    = "never"    // a GET after the drain found no such job
)

// Ends of a hold, as the worker saw them.
const (
	endAck200     = "ack 200"
	endAck409     = "ack 409"
	endNack200    = "nack 200"
	endNack409    = "nack 409"
	endUnclear    = "unclear" // the ack or nack got no clear answer
	endAbandoned  = "abandoned"
	endKilledSend = "killed while sending"
)

// hold is one attempt of a job as one worker had it. The times are all read
// from the test process's clock.
type hold struct {
	job, kind, worker string
	attempt           int
	fetchSent         time.Time // the fetch request left the worker
	fetchRecv         time.Time // its answer arrived: the start lies in [fetchSent, fetchRecv]
	endSent           time.Time // first ack or nack request left the worker (zero: none)
	killed            time.Time // the worker died holding it (zero: it did not)
	lastExt           time.Time // send time of the last heartbeat that extended it (zero: none)
	outcome           string

	// Limits the attempt ran under, from its kind.
	execTimeout time.Duration
	hbTimeout   time.Duration
}

// heldUntil is a time before which jetgate certainly still held the
// attempt's slot: the first ack/nack sent, the worker's death, or the
// earliest a timeout could have ended the attempt (its deadline measured
// from the fetch's send time, which precedes the server's start). Zero when
// the hold is still open.
func (h *hold) heldUntil() time.Time {
	end := h.endSent
	if end.IsZero() {
		end = h.killed
	}
	if end.IsZero() {
		return time.Time{}
	}
	ext := h.fetchSent
	if h.lastExt.After(ext) {
		ext = h.lastExt
	}
	if d := ext.Add(h.hbTimeout); d.Before(end) {
		end = d
	}
	if d := h.fetchSent.Add(h.execTimeout); d.Before(end) {
		end = d
	}
	if end.Before(h.fetchRecv) {
		return h.fetchRecv
	}
	return end
}

// ack is a successful (200) ack of an attempt.
type ack struct {
	worker   string
	attempt  int
	sent     time.Time
	received time.Time
}

// jobRec is everything the suite knows of one job.
type jobRec struct {
	id, kind, queue string
	priority        int // -1: the job was sent without one
	round           int
	submitted       time.Time // first enqueue attempt sent
	acceptedAt      time.Time // a 201/409 arrived (zero: not known when it was stored)
	enqueue         string
	holds           []*hold
	acks            []ack
	final           string // terminal state read by GET ("" until then)
	finalAt         time.Time
	events          map[string]int // terminal events seen on ojs.events.job.>
}

// recorder keeps the records of producers, workers and the event feed.
type recorder struct {
	mu              sync.Mutex
	jobs            map[string]*jobRec
	order           []string
	unknownHolds    []*hold     // jobs handed out that no producer enqueued
	unclearFetches  []time.Time // fetches of the bounded queue with no clear answer: sent at
	unexpectedEvent int
	refused429      int
	unclearRequests int
	depthSamples    int
	maxDepthSeen    int
}

func newRecorder() *recorder {
	return &recorder{jobs: make(map[string]*jobRec)}
}

func (r *recorder) addJob(j *jobRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[j.id] = j
	r.order = append(r.order, j.id)
}

// addHold records an attempt handed to a worker.
func (r *recorder) addHold(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[h.job]
	if j == nil {
		r.unknownHolds = append(r.unknownHolds, h)
		return
	}
	j.holds = append(j.holds, h)
}

// requests returns the counts of refused and unclear requests, read under
// the recorder's lock (workers still run while a round reports).
func (r *recorder) requests() (refused429, unclear int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused429, r.unclearRequests
}

// update runs f under the recorder's lock.
func (r *recorder) update(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func (r *recorder) addUnclearFetch(sent time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unclearFetches = append(r.unclearFetches, sent)
}

// event records a terminal event of a job.
func (r *recorder) event(typ, jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[jobID]
	if j == nil {
		r.unexpectedEvent++
		return
	}
	if j.events == nil {
		j.events = make(map[string]int)
	}
	j.events[typ]++
}

// snapshot returns the job records in enqueue order; read them only under
// the lock (r.update) or after the load stopped.
func (r *recorder) snapshot() []*jobRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*jobRec, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.jobs[id])
	}
	return out
}

func (r *recorder) sortedUnclearFetches() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]time.Time(nil), r.unclearFetches...)
	sort.Slice(out, func(a, b int) bool { return out[a].Before(out[b]) })
	return out
}
