package ojs

import "sync"

// FetchBudget bounds the size of the jobs one fetch answers, for a reply
// that must fit a limit: a NATS reply within the server's max_payload
// (issue 31). Each job costs its public JSON (AppendPublicJSON) and a
// comma (ReplySize). A fetch claims a job only once its cost is taken
// from the budget; a job that does not fit is not claimed, and its ready
// message goes back at once, so the next fetch gets it without waiting
// for a lease. A budget of max_payload less the reply's own bytes (its
// headers and brackets, under 1 KiB) always has room for one job: an
// active job's record, and so its public JSON, is at most max_payload
// less the result's part of the reserve (PayloadLimits).
//
// It is safe for concurrent use (the jobs of a fetch are claimed in
// parallel), and one budget serves the successive polls of a waiting
// fetch. A nil *FetchBudget has no bound.
type FetchBudget struct {
	mu    sync.Mutex
	left  int64
	taken int64 // bytes of the jobs taken
	jobs  int64 // jobs taken
	full  bool
}

// NewFetchBudget returns a budget of limit bytes.
func NewFetchBudget(limit int64) *FetchBudget { return &FetchBudget{left: limit} }

// Take takes n bytes for a job and reports true, or reports false when
// fewer than n are left: the fetch is full from then on (Full), and takes
// no job after one refused, not even a smaller one (the jobs come in
// priority order).
func (b *FetchBudget) Take(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.full || n > b.left {
		b.full = true
		return false
	}
	b.left -= n
	b.taken += n
	b.jobs++
	return true
}

// Give returns the n bytes taken (Take) for a job that was not claimed
// after all.
func (b *FetchBudget) Give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.left += n
	b.taken -= n
	b.jobs--
	b.mu.Unlock()
}

// Refuse marks the fetch full without a Take: a job was found too large
// for what is left before its claim was tried.
func (b *FetchBudget) Refuse() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.full = true
	b.mu.Unlock()
}

// Average is the mean cost of the jobs taken, 0 before any.
func (b *FetchBudget) Average() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.jobs <= 0 {
		return 0
	}
	return b.taken / b.jobs
}

// Left is the bytes not taken yet; -1 for a nil budget (no bound).
func (b *FetchBudget) Left() int64 {
	if b == nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

// Full reports whether a job was refused for want of room: the fetch
// answers what it has and claims no more.
func (b *FetchBudget) Full() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full
}

// ReplySize is what job j costs a FetchBudget: the length of its public
// JSON, and one byte for the comma that separates it from the next.
func ReplySize(j *Job) (int64, error) {
	buf := GetBuffer()
	defer PutBuffer(buf)
	out, err := j.AppendPublicJSON((*buf)[:0])
	if err != nil {
		return 0, err
	}
	*buf = out
	return int64(len(out)) + 1, nil
}
