// Package workflow runs workflows (ojs-http-binding.md 14, ojs-conformance.md
// level 3): a chain (steps one after another, each receiving its
// predecessor's result in parent_results), a group (jobs in parallel) and a
// batch (a group whose on_success, on_failure and on_complete callbacks are
// enqueued once every job has ended).
//
// It owns the workflow bucket (topology.WorkflowsBucket: one record per
// workflow, key = workflow id, holding its steps, their job ids, the
// outcome of each ended step and the workflow's state) and the workflow
// timer stream (topology.WorkflowTimerStream: one message schedule per
// running workflow). It meets the job life cycle only as an
// admission.Lifecycle (JobChanged when a step's job ends; Admit does
// nothing) and acts on jobs only through admission's operations (Enqueue,
// Get, Cancel), so their checks, events and counters stay admission's. It
// must never write job records, publish ready messages or job timers, or
// add a JetStream round trip for a job that is not a workflow step
// (JobChanged returns after one map lookup for those).
//
// # Exactly once
//
// Every change of a workflow record is one compare-and-swap on its
// revision. A step's end is recorded by the write that also decides what
// follows (the chain's next step, the batch's callbacks, the workflow's
// end), marking the successors "enqueued" in the same write. Of any number
// of processes that see the same step end (or the last jobs of a batch
// end at once), exactly one write lands on a given revision; the others
// re-read, find the step already recorded, and write nothing. Only the
// writer enqueues what it marked.
//
// Each step's job id is derived from the workflow id and the step's
// position (a UUIDv7 with the workflow's timestamp), fixed when the
// workflow is created, and the job is created expecting no record under
// that id. An enqueue repeated for any reason (the backstop below, a
// racing reconcile) meets the first one's record and is a no-op, so a
// step's job exists at most once.
//
// # Crash safety
//
// JobChanged runs after the step's job record was written, in the process
// that wrote it. That process may die before the workflow write (a missed
// step end), or after the workflow write and before the successor's
// enqueue (a marked but missing successor). Neither strands a workflow:
//
//   - Every running workflow has a check timer, a JetStream message
//     schedule armed before its record is created and re-armed by each
//     check, firing after Config.Check (or at the workflow's deadline if
//     earlier) to a durable consumer shared by all processes. A check
//     re-reads the job of every step the record shows enqueued but not
//     ended: an ended job is recorded as JobChanged would have (the same
//     compare-and-swap), a missing one is enqueued again (idempotently).
//     A check is acked only after the next one is armed, so a process
//     dying mid-check leaves the fired timer to be redelivered.
//   - GET /ojs/v1/workflows/{id} reconciles the same way before it
//     answers, so what a client reads is never behind the jobs.
//
// The one window left is a step whose job record is deleted (retention,
// DELETE /ojs/v1/jobs) before any check saw it end: it would be enqueued
// again. Job retention is hours to days; checks run every minute.
//
// # Failure, cancel, timeout
//
// A step that ends discarded (retries exhausted, or an execution timeout
// on its last attempt) or cancelled halts a chain: the workflow fails and
// later steps are never enqueued (L3-CHAIN-003, ojs-timeouts.md 9.2). A
// group or batch ends when all its jobs have; it fails if any did not
// complete. DELETE cancels the workflow (one write) and then its jobs that
// have not ended; workflow_timeout fails it at its deadline (the check
// timer) and cancels its running steps. A failed or cancelled workflow's
// remaining jobs are cancelled again by its last check (the timer armed
// while it was running still fires once) and by each GET, so a crash
// between the workflow write and the job cancels loses nothing.
//
// Successors (later chain steps, callbacks) take the first step's priority
// unless they set their own (ojs-priority.md 9.2).
package workflow
