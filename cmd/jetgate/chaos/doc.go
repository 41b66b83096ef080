// Package chaos is jetgate's process-level chaos suite (issue 20): real
// `jetgate serve` binaries on a real 3-node NATS cluster (nats-server
// binaries, JetStream, file storage, --replicas 3), a steady mixed load from
// HTTP producers and workers, and, round after round, kill -9 of a jetgate
// process, kill -9 of a NATS node and the death of workers in the middle of
// their jobs. An observer checks after every round that no invariant broke.
//
// The package has no code outside its tests. TestChaos runs its short form
// (3 rounds) in every `go test ./...`, so .ci/run runs it, and is skipped
// with -short; JETGATE_CHAOS_ROUNDS sets the rounds (`task chaos`: 100);
// the checks themselves are unit-tested on synthetic records by the tests
// that always run, so each one is known to catch what it names.
//
// # What the observer checks
//
// Every check is exact in one direction: it reports only what certainly
// happened, never what might have. Workers are goroutines of the test
// process, so every time in the records is read from one clock, the one the
// jetgate processes on the same host read too. A start counted by jetgate
// lies between the moment the fetch was sent and the moment its answer came
// back; a concurrency slot is held at least until the ack or nack was sent,
// the worker died, or a timeout could have ended the attempt, whichever came
// first. Limits are checked against those bounds, so an overlap the
// observer reports is one jetgate let happen.
//
//   - every job answered 201 (or 409 duplicate to a retry of an enqueue whose
//     answer was lost) ends in completed, discarded or cancelled, and stays
//     there; a job whose enqueue got no clear answer counts once a GET finds
//     it;
//   - no attempt of a job is handed to two workers, no job is acked
//     successfully twice, none is handed out again after a successful ack,
//     and a job acked successfully reads completed;
//   - at most one terminal event (job.completed, job.discarded,
//     job.cancelled) per job on ojs.events.>, of the job's final state
//     (events are best effort: a missing one is counted, not a violation);
//   - concurrency, fixed-window and throttle limits of the rate-limited
//     keys are never exceeded;
//   - a bounded queue never holds more jobs than its bound: sampled from its
//     stats, and from the records (jobs answered 201 and not yet fetched).
//
// It never mocks anything and never reads jetgate's internal state: only
// HTTP answers, NATS events and the records of its own producers and
// workers.
package chaos
