// Package admission owns every scheduling decision jetgate makes: which job
// a worker gets when it fetches (priority first, FIFO among equals), what
// happens when a job succeeds, fails, stalls or is cancelled, when a
// scheduled or retrying job becomes ready, and what a queue's pause means.
//
// It speaks the types of package ojs and keeps no state of its own beyond
// caches: job records, ready messages and timers live in JetStream through
// jetstream/jobstore, so any number of jetgate processes can run the same
// Service against one NATS cluster. It never knows about HTTP.
//
// Every transition follows jobstore's rule: take a new token, publish the
// messages the new state relies on (ready message, timer, dead-letter
// index), then compare-and-swap the record. A lost race re-reads the record
// and decides again. A job has one timer of each kind, so the loser of a
// race may have replaced the winner's timer with its own: a timer that
// fires stale therefore makes sure the record's own timer is there
// (restoreTimer).
//
// Priority ordering is exact within a queue: each priority level of a queue
// has its own subject and durable consumer, and a fetch asks the ready
// stream which levels hold messages before fetching from the lowest one
// (an empty no-wait pull is checked against the stream, levels.go). A
// fetch that would answer empty looks at the stream itself and asks other
// processes for the messages they pulled ahead (visible.go), so a job
// whose enqueue was answered is never missed for another process's
// knowledge of the queue. A
// queue with aging tries its levels by effective priority instead,
// computed at fetch time from ready message timestamps and never written
// (aging.go). Worker groups (groups.go) are stored defaults of the
// consumption strategy that fetches naming them take, and the worker pools
// of admission/pools. Worker lifecycle (quiet, drain, terminate) lives in
// admission/workers, met through WorkerHook (workerhook.go): fetch asks it
// whether a worker may be given jobs, heartbeat what to answer.
//
// Timeouts (ojs-timeouts.md) fire from JetStream message schedules, never
// from a scan: an active job's one lease timer stands at its next deadline
// (heartbeat, execution timeout, end of the grace period), and a job with
// an enqueue TTL, expires_at or a total timeout has one expire timer at
// the earliest of them; when a timer fires, the job's record decides
// (timeouts.go, expire.go). Progress updates (progress.go) are kept on the
// record and count as heartbeats. A claim defers writing its lease timer
// and holds its ready message as the backstop meanwhile; a sentinel
// schedule per process brings the held messages of a process that died
// back without waiting for a fetch, and Stop writes every deferred lease
// (lease.go, holder.go, holderwalk.go).
//
// Queue bounds (the backpressure extension) are exact: a job takes a unit
// in its queue's depth stream, whose discard-new limits are the bound,
// before its record is written, and gives it back when a worker claims it
// (releaseClaimed) or it finishes while waiting (releaseDepth); a retry
// takes one again (take). Why JetStream limits
// rather than a KV compare-and-swap counter, and what it costs, is written
// at the top of backpressure.go.
package admission
