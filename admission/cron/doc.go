// Package cron runs OJS cron jobs (ojs-http-binding.md 13; L2-CRON-001
// 5-field expressions and the @hourly-style shorthands, L2-CRON-002 IANA
// time zones, L2-CRON-003 no overlapping runs by default).
//
// It owns the cron job definitions (KV bucket OJS_CRON, one entry per
// name) and their tick schedules (stream OJS_CRON_TICKS: one JetStream
// message schedule per definition, on ojs.cron.tick.<name>.<generation>,
// firing to ojs.cron.fired), and the expression parser. It meets the job
// life cycle only through the Jobs interface (Enqueue and Get of
// *admission.Service): the admission core does not know cron exists.
//
// It must never: keep a timer per process or a leader flag in memory
// (ticks fire from JetStream itself), scan jobs, touch a job record other
// than through Jobs, or add anything to the life of a job that no cron
// tick enqueued.
//
// # Each tick runs exactly once, in any number of processes
//
// A definition records the time of its next tick (next_run_at); its
// message schedule is an "@at" schedule for that time, carrying the tick
// time in a header. When it fires, the server publishes one message to
// ojs.cron.fired, read through one durable consumer that every process
// shares, so one process holds it at a time; if that process stops, the
// message is redelivered (after AckWait) to another. Ticks are handled by
// whoever holds the message:
//
//  1. Read the definition. Deleted, or of another registration
//     (generation) of the name: drop the message. next_run_at is not the
//     tick: the tick was decided already; if it ran (last_job_id is the
//     tick's job id), do 3 again, then make sure the schedule of
//     next_run_at exists (write it unless the schedule subject already
//     holds it), ack.
//  2. Decide the tick by the overlap policy (below) and advance the
//     definition to the next tick with one compare-and-swap on the
//     revision read in 1, recording the tick's job (an id derived from
//     name, generation and tick: TickJobID) as last_job_id when it runs.
//     The compare-and-swap is the fence: of any number of handlers of a
//     tick one decision lands; a loser reads again and lands in 1.
//  3. When it runs: cancel the job it replaces (policy cancel), then
//     enqueue its job under the derived id, expecting no record under it:
//     a repeated enqueue finds the first one's job.
//  4. Write the schedule of the new next tick (replacing the fired one on
//     the same subject), then ack.
//
// Crash points: stopped before 2 lands, the message is redelivered and
// decides the tick again; stopped after 2 and before 3 or 4 ends, the
// redelivery finds the tick decided, does 3 again (idempotently) and
// writes the missing schedule; stopped after 4 and before the ack, the
// redelivery finds the job and the schedule in place and acks. Because
// the next tick is scheduled only after the tick's job was enqueued, a
// tick never fires before the job of the tick before it exists: the
// overlap check of a tick always sees the previous run's job. A process
// that is down at a tick loses nothing: the schedule fires in JetStream
// whether or not any jetgate process runs, and the fired message waits
// for the next process to consume it, which runs the tick late.
//
// Registration writes the schedule first and then creates the definition
// expecting none (409 when the name exists): a process stopping between
// the two leaves a schedule that fires once and is dropped (no definition
// of its generation), never a definition without a schedule.
//
// # Decisions
//
// Missed ticks are coalesced: when a tick runs late and later ticks are
// already past, the latest past tick is next (it runs at once) and the
// ones before it are skipped, as cron daemons and Kubernetes CronJobs do
// after downtime; a cron job never floods its queue after an outage.
//
// The overlap policy (L2-CRON-003, ojs-extension-interactions.md 13,
// openapi.yaml) is evaluated in step 2, against the job of the last tick
// that ran, before anything the enqueue decides (EI-011). "skip" (the
// default) decides the tick skipped while that job is not in a terminal
// state (completed, cancelled, discarded): waiting, scheduled and
// retrying jobs count as unfinished. "allow" (alias "queue") runs every
// tick. "cancel" (alias "replace") runs the tick and cancels the
// unfinished job first. The definition answers the policy as it was sent.
// A job that cannot be found counts as finished (removed by retention, or
// refused at its enqueue).
//
// Each tick says what it did (ojs-events.md 4.5): cron.triggered from the
// handler whose enqueue created the tick's job, cron.skipped from the
// handler whose compare-and-swap decided to skip it (reason
// overlap_prevention) or whose enqueue was refused (enqueue_refused).
//
// A definition registered or PUT with "enabled": false has no next tick
// and no schedule; PUT with "enabled": true schedules the first tick after
// now. PUT replaces a definition as a new registration (generation): the
// old one's ticks are dropped, its last run is kept for the overlap check.
//
// Expressions are evaluated on the wall clock of the time zone: a time
// skipped by a spring-forward change runs once, as far past the change as
// it was into the gap; a time repeated by a fall-back change runs once, at
// its first occurrence.
package cron
