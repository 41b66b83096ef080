// Package unique enforces unique jobs (ojs-unique-jobs.md): a job whose
// enqueue carries a unique policy is created only if no other job holds
// its uniqueness key, and the policy's on_conflict decides what a
// duplicate gets: reject (409 duplicate naming the existing job), ignore
// (the existing job, 200), replace or replace_except_schedule (the
// existing job is cancelled and the new one created).
//
// It owns the unique key bucket (topology.UniqueBucket): one entry per
// uniqueness key, naming the job that holds it. It meets the job life
// cycle only as an admission.Lifecycle: Admit before jobs are stored,
// JobChanged after a state change, and it acts on other jobs only through
// admission.Jobs (Get, Cancel, SetPriority), so their checks, events and
// counters stay admission's. It must never write job records, publish
// ready messages or timers, or add a JetStream round trip for a job that
// has no unique policy (both hooks return at once for those).
//
// # Atomicity
//
// The key is taken with one KV create (create-if-absent): of any number
// of producers racing on any number of jetgate processes, exactly one
// create succeeds; the others read the entry and see the job it names.
// A key is freed in two ways, neither of which needs a sweep or a timer:
//
//   - It expires: an entry of a policy with a period carries it as
//     per-message TTL, and JetStream removes it.
//   - It is stale: the job it names has left the counted states, its
//     period is over, or it does not exist although the key was claimed
//     longer than Config.Grace ago (the claiming process died between
//     the key create and the job create). The next enqueue takes the key
//     over with one compare-and-swap on the entry's revision, so again
//     exactly one racer wins. JobChanged deletes the entry (on its
//     revision, only while it names that job) when the job leaves the
//     counted states, which only saves that next enqueue the check.
//
// Hence the guarantee is strong for reject and ignore: two jobs with one
// key are never both in counted states within the period, whatever the
// races and crashes (a key younger than Grace whose job is missing is
// held: the enqueue waits Config.Wait for the job and then answers a
// retryable conflict). Replace is cancel-then-swap: the holder is
// cancelled (if still not active), then the key is swapped to the new
// job on the revision read; a racer that swapped first makes this one
// look again. An active holder is never replaced (a duplicate error),
// since its worker may be mid-execution.
//
// Claims made by a fetch (available to active) do not call JobChanged;
// the staleness check reads the holder's state at the next enqueue, so a
// policy whose states omit active still frees the key when the job is
// claimed.
package unique
