package topology

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WorkersTTL is how long a worker's registry entry outlives its last
// write (workers seen by any process are rewritten every few seconds).
const WorkersTTL = 5 * time.Minute

// LeaseTTL is how long a role's lease (LeasesBucket) outlives its last
// renewal; holders renew it every second.
const LeaseTTL = 5 * time.Second

// Buckets, streams and subjects. Partitioned names are printf patterns whose
// arguments are always passed through Token first.
const (
	// JobsBucket holds one record per job, key = job id.
	JobsBucket = "OJS_JOBS"
	// QueuesBucket holds queue config (pause state, creation time), key = Token(queue).
	QueuesBucket = "OJS_QUEUES"
	// DeadBucket indexes discarded jobs, key = Token(queue) + "." + job id.
	DeadBucket = "OJS_DEAD"
	// LimitsBucket holds rate-limit state, key = Token(limit key).
	LimitsBucket = "OJS_LIMITS"
	// GroupsBucket holds worker group defaults (queue consumption
	// strategy, queues, weights), key = Token(group name).
	GroupsBucket = "OJS_GROUPS"
	// WorkersBucket is the worker registry: one entry per worker seen by
	// fetch or heartbeat, key = Token(worker id). Entries expire
	// WorkersTTL after their last write, so dead workers vanish.
	WorkersBucket = "OJS_WORKERS"
	// UniqueBucket holds the claimed unique job keys (admission/unique):
	// key = Token(uniqueness key), value names the job holding it. An
	// entry with a period carries it as per-message TTL.
	UniqueBucket = "OJS_UNIQUE"
	// CronBucket holds the cron job definitions (admission/cron), key =
	// Token(cron name); each tick advances its entry by compare-and-swap.
	CronBucket = "OJS_CRON"
	// WorkflowsBucket holds one record per workflow (admission/workflow),
	// key = workflow id; every change is a compare-and-swap on its revision.
	WorkflowsBucket = "OJS_WORKFLOWS"
	// BatchesBucket holds the markers of batches of new jobs being stored
	// (jobstore/batchmark.go): key b.<batch id>, present while the batch
	// is pending or after it was aborted, gone once it committed.
	BatchesBucket = "OJS_BATCHES"
	// LeasesBucket holds the leases of the roles one process at a time
	// plays for the whole deployment, key = role name (CountsRole).
	// Entries expire LeaseTTL after their last write, so a holder that
	// died loses its role by itself.
	LeasesBucket = "OJS_LEASES"
	// CountsRole is the lease of the count keeper (admission/countkeeper.go).
	CountsRole = "counts"
	// WorkflowTimerStream holds each active workflow's check timer: a
	// message schedule on ojs.wftimer.<workflow id> firing to
	// WorkflowFiredSubject, consumed by WorkflowTimerConsumer.
	WorkflowTimerStream = "OJS_WORKFLOW_TIMERS"
	// WorkflowTimerSubjects are the schedule subjects of workflow timers.
	WorkflowTimerSubjects = "ojs.wftimer.>"
	// WorkflowTimerPattern is the schedule subject of one workflow's timer.
	WorkflowTimerPattern = "ojs.wftimer.%s"
	// WorkflowFiredSubject is where workflow timers fire to.
	WorkflowFiredSubject = "ojs.wffired"
	// WorkflowTimerConsumer is the durable consumer of fired workflow timers.
	WorkflowTimerConsumer = "workflows"

	// ReadyStream holds one message per job that is ready to run.
	ReadyStream = "OJS_READY"
	// ReadySubjects is the ready stream's subject space.
	ReadySubjects = "ojs.ready.>"
	// ReadySubjectPattern is ojs.ready.<queue>.<priority>.<job id>;
	// priority is zero padded to PriorityDigits so subjects sort in
	// priority order, and the id ends the subject so that a job without a
	// record is found by the last message on ojs.ready.*.*.<id>
	// (jobstore/doc.go).
	ReadySubjectPattern = "ojs.ready.%s.%0*d.%s"
	// ReadyLegacyPattern is the subject of a level before per-job
	// subjects, ojs.ready.<queue>.<priority>: level consumers still take
	// such messages until an upgraded stream holds none.
	ReadyLegacyPattern = "ojs.ready.%s.%0*d"
	// ReadyQueueFilterPattern matches every message of one queue, every
	// level, both layouts.
	ReadyQueueFilterPattern = "ojs.ready.%s.>"
	// ReadyLegacyFilter matches the level subjects of the layout before
	// per-job subjects, of every queue: a stream info filtered on it has
	// one entry per level holding such messages.
	ReadyLegacyFilter = "ojs.ready.*.*"
	// ReadyIDFilterPattern matches the ready messages of one job id.
	ReadyIDFilterPattern = "ojs.ready.*.*.%s"
	// ReadyConsumerPattern names the durable pull consumer of one level.
	ReadyConsumerPattern = "ready_%s_%0*d"

	// WaitStream holds the jobs waiting on a rate limit: one message per
	// parked job on ojs.wait.<limit entry>.<priority>, oldest first.
	WaitStream = "OJS_WAIT"
	// WaitSubjects is the wait stream's subject space.
	WaitSubjects = "ojs.wait.>"
	// WaitSubjectPattern is ojs.wait.<entry>.<priority>, priority padded
	// like ready subjects.
	WaitSubjectPattern = "ojs.wait.%s.%0*d"
	// WaitEntryFilterPattern matches every level of one entry.
	WaitEntryFilterPattern = "ojs.wait.%s.*"

	// TimerStream holds message schedules and the messages they fire.
	TimerStream = "OJS_TIMERS"
	// TimerScheduleSubjects are the schedule subjects: ojs.timer.<kind>.<job id>.
	TimerScheduleSubjects = "ojs.timer.>"
	// TimerSchedulePattern is the schedule subject of one job's timer.
	TimerSchedulePattern = "ojs.timer.%s.%s"
	// TimerFiredSubjects are where schedules fire to: ojs.fired.<kind>.
	TimerFiredSubjects = "ojs.fired.>"
	// TimerFiredPattern is the fired subject of a timer kind.
	TimerFiredPattern = "ojs.fired.%s"
	// TimerCancelSubject receives the markers that stop a schedule early.
	TimerCancelSubject = "ojs.cancelled"
	// TimerConsumer is the durable pull consumer of fired timers.
	TimerConsumer = "timers"

	// CronStream holds the message schedule of each cron job's next tick
	// and the messages those schedules fire (admission/cron).
	CronStream = "OJS_CRON_TICKS"
	// CronSubjects is the cron stream's subject space.
	CronSubjects = "ojs.cron.>"
	// CronTickPattern is ojs.cron.tick.<cron name>.<generation>: the
	// schedule subject of one registration of a cron job.
	CronTickPattern = "ojs.cron.tick.%s.%s"
	// CronFiredSubject is where every cron tick schedule fires to.
	CronFiredSubject = "ojs.cron.fired"
	// CronConsumer is the durable pull consumer of fired cron ticks,
	// shared by every jetgate process.
	CronConsumer = "cron"

	// CountStream holds per-queue, per-state job counters (counter CRDTs,
	// ADR-49): ojs.count.<queue>.<state>, plus duration and wait sums.
	CountStream = "OJS_COUNTS"
	// CountSubjects is the counter subject space.
	CountSubjects = "ojs.count.>"
	// CountSubjectPattern is ojs.count.<queue>.<name>.
	CountSubjectPattern = "ojs.count.%s.%s"

	// StatStream keeps one hour of per-queue activity samples, one message
	// per process per second: ojs.stat.<queue>.
	StatStream = "OJS_STATS"
	// StatSubjects is the sample subject space.
	StatSubjects = "ojs.stat.>"
	// StatSubjectPattern is ojs.stat.<queue>.
	StatSubjectPattern = "ojs.stat.%s"
	// StatWindow is how long samples are kept.
	StatWindow = time.Hour

	// EventStream keeps recent events for GET /ojs/v1/events when an operator
	// turns it on (jetgate serve --events-stream); it does not exist by default.
	EventStream = "OJS_EVENTS"
	// EventSubjects is the event subject space: ojs.events.<type>.
	EventSubjects = "ojs.events.>"
	// EventSubjectPattern is the subject of one event type.
	EventSubjectPattern = "ojs.events.%s"

	// DepthStreamPattern names the depth stream of one bounded queue:
	// one message (unit) per job counted against the queue's bound, and
	// stream limits (MaxMsgs, MaxBytes, MaxMsgsPerSubject with discard
	// new) that make the bound exact (admission/backpressure.go).
	DepthStreamPattern = "OJS_DEPTH_%s"
	// DepthSubjectPattern is ojs.depth.<queue>.<tenant>: the subject of a
	// unit; the tenant token is "=" (empty) for jobs without a tenant.
	DepthSubjectPattern = "ojs.depth.%s.%s"
	// DepthSubjectsPattern is the subject space of one depth stream.
	DepthSubjectsPattern = "ojs.depth.%s.*"
	// FreedSubjectPattern is the core NATS subject on which a process
	// announces that units of a queue were released, waking producers
	// blocked on it in every process. No stream captures it.
	FreedSubjectPattern = "ojs.freed.%s"
	// FreedSubjects matches the freed notices of every queue.
	FreedSubjects = "ojs.freed.*"
	// AheadSubjectPattern is the core NATS subject on which a fetch that
	// found a queue empty asks the processes holding its ready messages
	// pulled ahead to give them back (admission/visible.go). Only a
	// process that may hold some listens. No stream captures it.
	AheadSubjectPattern = "ojs.ahead.%s"
	// CountsAskSubject is the core NATS subject on which the count keeper
	// (the holder of CountsRole) answers the numbers it keeps, up to date
	// with every record written before the question. No stream captures
	// it.
	CountsAskSubject = "ojs.keeper.counts"
	// OverdraftStream holds the overdraft units of every bounded queue:
	// one message per job that came back from active to retry while its
	// queue was full. It has no limits (a retry is never refused); a
	// queue's depth is its depth stream's units plus its overdraft units.
	OverdraftStream = "OJS_OVERDRAFT"
	// OverdraftSubjects is the overdraft stream's subject space.
	OverdraftSubjects = "ojs.overdraft.*"
	// OverdraftSubjectPattern is ojs.overdraft.<queue>.
	OverdraftSubjectPattern = "ojs.overdraft.%s"
	// BlockedStream holds the tickets of producers blocked on full queues
	// (strategy block): the stream order of a queue's tickets is the order
	// its producers are served in, across processes. Memory storage, kept
	// at most an hour.
	BlockedStream = "OJS_BLOCKED"
	// BlockedSubjects is the ticket stream's subject space.
	BlockedSubjects = "ojs.blocked.*"
	// BlockedSubjectPattern is ojs.blocked.<queue>.
	BlockedSubjectPattern = "ojs.blocked.%s"
)

// CancelSignalPattern is ojs.signal.cancel.<queue>.<job id>: where an
// active job's worker is told that its execution timeout passed and it has
// its grace period to stop (core NATS, no stream captures it).
const CancelSignalPattern = "ojs.signal.cancel.%s.%s"

// CancelSignalSubject returns the cancel signal subject of a job.
func CancelSignalSubject(queue, jobID string) string {
	return fmt.Sprintf(CancelSignalPattern, Token(queue), Token(jobID))
}

// Timer kinds.
const (
	TimerDue   = "due"   // scheduled_at / retry backoff: -> available
	TimerLease = "lease" // heartbeat and execution timeouts of an active job
	TimerLimit = "limit" // a rate limit entry may admit waiters again
	// TimerExpire ends a job that outlived its enqueue TTL, expires_at or
	// total timeout, whatever its state.
	TimerExpire = "expire"
	// TimerHolder is a jetgate process's sentinel while it holds ready
	// messages as the backstop of leases not written yet: on
	// ojs.timer.holder.<process id>, it fires only if the process stops
	// renewing it, and lists the ready consumers to look at then.
	TimerHolder = "holder"
)

// PriorityDigits is the zero padding of the priority token.
const PriorityDigits = 3

// ReadySubject returns the ready subject of a job at a queue and priority.
func ReadySubject(queue string, priority int, id string) string {
	return fmt.Sprintf(ReadySubjectPattern, Token(queue), PriorityDigits, priority, Token(id))
}

// ReadyLegacySubject returns the subject of a queue level in the layout
// before per-job subjects.
func ReadyLegacySubject(queue string, priority int) string {
	return fmt.Sprintf(ReadyLegacyPattern, Token(queue), PriorityDigits, priority)
}

// ReadyLevelFilter matches the per-job ready subjects of a queue level.
func ReadyLevelFilter(queue string, priority int) string {
	return ReadyLegacySubject(queue, priority) + ".>"
}

// ReadyLevelFilters are a level consumer's filters: the level's per-job
// subjects and its subject of the earlier layout.
func ReadyLevelFilters(queue string, priority int) []string {
	l := ReadyLegacySubject(queue, priority)
	return []string{l + ".>", l}
}

// ReadyIDFilter matches the ready messages of one job, whatever its queue
// and priority.
func ReadyIDFilter(id string) string {
	return fmt.Sprintf(ReadyIDFilterPattern, Token(id))
}

// ReadyLevelOf reads the queue token and priority of a ready subject of
// either layout.
func ReadyLevelOf(subject string) (queueToken string, priority int, ok bool) {
	rest, found := strings.CutPrefix(subject, "ojs.ready.")
	if !found {
		return "", 0, false
	}
	q, rest, found := strings.Cut(rest, ".")
	if !found {
		return "", 0, false
	}
	ps, _, _ := strings.Cut(rest, ".")
	p, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, false
	}
	return q, p, true
}

// ReadyQueueFilter returns the filter that matches all levels of a queue.
func ReadyQueueFilter(queue string) string {
	return fmt.Sprintf(ReadyQueueFilterPattern, Token(queue))
}

// ReadyConsumer returns the durable consumer name of a queue level.
func ReadyConsumer(queue string, priority int) string {
	return fmt.Sprintf(ReadyConsumerPattern, Token(queue), PriorityDigits, priority)
}

// WaitSubject returns the wait subject of a limit entry and priority.
func WaitSubject(entry string, priority int) string {
	return fmt.Sprintf(WaitSubjectPattern, Token(entry), PriorityDigits, priority)
}

// WaitEntryFilter matches every priority level of a limit entry's waiters.
func WaitEntryFilter(entry string) string {
	return fmt.Sprintf(WaitEntryFilterPattern, Token(entry))
}

// TimerSchedule returns the schedule subject of a job's timer.
func TimerSchedule(kind, jobID string) string {
	return fmt.Sprintf(TimerSchedulePattern, kind, Token(jobID))
}

// WorkflowTimer returns the schedule subject of a workflow's check timer.
func WorkflowTimer(id string) string { return fmt.Sprintf(WorkflowTimerPattern, Token(id)) }

// TimerFired returns the subject a timer kind fires to.
func TimerFired(kind string) string { return fmt.Sprintf(TimerFiredPattern, kind) }

// EventSubject returns the subject of an event type ("job.completed" ->
// "ojs.events.job.completed"). Type segments are escaped one by one so the
// dots of the type stay token separators.
func EventSubject(eventType string) string {
	parts := strings.Split(eventType, ".")
	for i, p := range parts {
		parts[i] = Token(p)
	}
	return fmt.Sprintf(EventSubjectPattern, strings.Join(parts, "."))
}

// CountSubject returns the counter subject of a queue's counter.
func CountSubject(queue, name string) string {
	return fmt.Sprintf(CountSubjectPattern, Token(queue), name)
}

// StatSubject returns the sample subject of a queue.
func StatSubject(queue string) string { return fmt.Sprintf(StatSubjectPattern, Token(queue)) }

// DeadKey returns the dead-letter index key of a job.
func DeadKey(queue, jobID string) string { return Token(queue) + "." + Token(jobID) }

// DepthStream returns the depth stream name of a queue.
func DepthStream(queue string) string { return fmt.Sprintf(DepthStreamPattern, Token(queue)) }

// DepthSubject returns the unit subject of a queue and tenant.
func DepthSubject(queue, tenant string) string {
	return fmt.Sprintf(DepthSubjectPattern, Token(queue), Token(tenant))
}

// DepthSubjects returns the subject space of a queue's depth stream.
func DepthSubjects(queue string) string { return fmt.Sprintf(DepthSubjectsPattern, Token(queue)) }

// OverdraftSubject returns the overdraft unit subject of a queue.
func OverdraftSubject(queue string) string { return fmt.Sprintf(OverdraftSubjectPattern, Token(queue)) }

// BlockedSubject returns the ticket subject of a queue.
func BlockedSubject(queue string) string { return fmt.Sprintf(BlockedSubjectPattern, Token(queue)) }

// FreedSubject returns the freed-notice subject of a queue.
func FreedSubject(queue string) string { return fmt.Sprintf(FreedSubjectPattern, Token(queue)) }

// AheadSubject returns the give-back subject of a queue's messages pulled
// ahead.
func AheadSubject(queue string) string { return fmt.Sprintf(AheadSubjectPattern, Token(queue)) }

// CronTick returns the schedule subject of a cron job's registration.
func CronTick(name, gen string) string { return fmt.Sprintf(CronTickPattern, Token(name), Token(gen)) }
