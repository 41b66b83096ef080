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
// and decides again.
//
// Priority ordering is exact within a queue: each priority level of a queue
// has its own subject and durable consumer, and a fetch asks the ready
// stream which levels hold messages before fetching from the lowest one.
package admission
