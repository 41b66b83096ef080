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
//     (generation) of the name: drop the message. next_run_at is past the
//     tick: the tick ran already; make sure the schedule of next_run_at
//     exists (write it unless the schedule subject already holds it),
//     ack.
//  2. Enqueue the tick's job with an id derived from (name, generation,
//     tick) (TickJobID). If a job of that id exists, it is the tick's job
//     and is not enqueued again; two handlers racing past that check both
//     create the record expecting none, and one create wins (the other
//     sees its own id as a duplicate and goes on).
//  3. Advance the definition to the next tick with a compare-and-swap on
//     the revision read in 1. The compare-and-swap is the fence: only one
//     handler advances a tick; a loser reads again and lands in 1.
//  4. Write the schedule of the new next tick (replacing the fired one on
//     the same subject), then ack.
//
// Crash points: stopped before 2 or during it, the message is redelivered
// and 2 finds or creates the one job; stopped after 2 and before 3, the
// redelivery finds the job by its id and goes on to 3; stopped after 3 and
// before 4, the redelivery sees the tick done and writes the missing
// schedule (step 1); stopped after 4 and before the ack, the redelivery
// finds the schedule in place and acks. A process that is down at a tick
// loses nothing: the schedule fires in JetStream whether or not any
// jetgate process runs, and the fired message waits for the next process
// to consume it, which runs the tick late.
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
// The overlap policy "skip" (the default, L2-CRON-003) skips a tick while
// the job of the last tick that ran is not in a terminal state (completed,
// cancelled, discarded): waiting, scheduled and retrying jobs count as
// still running. "allow" (alias "queue", ojs-extension-interactions.md
// 13) enqueues every tick. It is evaluated before anything the enqueue
// decides (EI-011). "replace"/"cancel" are not offered.
//
// Expressions are evaluated on the wall clock of the time zone: a time
// skipped by a spring-forward change runs once, as far past the change as
// it was into the gap; a time repeated by a fall-back change runs once, at
// its first occurrence.
package cron
