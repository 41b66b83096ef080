package natsbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Backend is what the NATS binding asks of the layer below: the same
// methods, with the same meaning, as httpbind.Backend, so the value that
// serves HTTP serves NATS too (Go's structural typing; natsbind does not
// import httpbind). Errors are the ojs sentinels and typed errors, mapped
// by wire.Classify exactly as HTTP maps them.
type Backend interface {
	Enqueue(ctx context.Context, job *ojs.Job) (*ojs.Job, error)
	// EnqueueBatch enqueues all jobs or none.
	EnqueueBatch(ctx context.Context, jobs []*ojs.Job) ([]*ojs.Job, error)
	Get(ctx context.Context, id string) (*ojs.Job, error)
	// Cancel returns the cancelled job and the state it left.
	Cancel(ctx context.Context, id string) (*ojs.Job, ojs.State, error)
	Activate(ctx context.Context, id string) (*ojs.Job, error)

	Fetch(ctx context.Context, req ojs.FetchRequest) ([]*ojs.Job, error)
	Ack(ctx context.Context, req ojs.AckRequest) (*ojs.AckResult, error)
	Nack(ctx context.Context, req ojs.NackRequest) (*ojs.NackResult, error)
	Heartbeat(ctx context.Context, req ojs.HeartbeatRequest) (*ojs.HeartbeatResult, error)

	ListQueues(ctx context.Context) ([]ojs.QueueInfo, error)
	QueueStats(ctx context.Context, name string) (*ojs.QueueStats, error)
	PauseQueue(ctx context.Context, name string) (*ojs.QueueInfo, error)
	ResumeQueue(ctx context.Context, name string) (*ojs.QueueInfo, error)

	ListDeadLetter(ctx context.Context, q ojs.DeadLetterQuery) (*ojs.JobPage, error)
	RetryDeadLetter(ctx context.Context, id string) (*ojs.Job, error)
	DeleteDeadLetter(ctx context.Context, id string) error

	RecentEvents(ctx context.Context, q ojs.EventQuery) ([]ojs.Event, error)
	Health(ctx context.Context) ojs.Health
}

// PriorityBackend serves jobs.patch (priority) and queues.prioritystats;
// a Backend that implements it gets those endpoints (as httpbind's).
type PriorityBackend interface {
	SetPriority(ctx context.Context, id string, priority int) (*ojs.PriorityChange, error)
	PriorityStats(ctx context.Context, queue string) (*ojs.PriorityStats, error)
}

// TimeoutBackend lets jobs.patch change timeouts too (ojs-timeouts.md
// 12.3), with the priority in the same compare-and-swap.
type TimeoutBackend interface {
	PatchJob(ctx context.Context, id string, tp *ojs.TimeoutPatch, priority *int) (*ojs.Job, int, error)
}

// ProgressBackend serves workers.progress and jobs.progress
// (ojs-progress.md 10).
type ProgressBackend interface {
	ReportProgress(ctx context.Context, id string, u *ojs.ProgressUpdate) (*ojs.ProgressStatus, bool, error)
	Progress(ctx context.Context, id string) (*ojs.ProgressStatus, error)
}

// RateLimitBackend serves the ratelimits endpoints (ojs-rate-limiting.md
// 7.2, 10).
type RateLimitBackend interface {
	RateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error)
	RateLimits(ctx context.Context, page ojs.PageRequest) (*ojs.RateLimitPage, error)
	SetRateLimitOverride(ctx context.Context, key string, ov ojs.RateLimitOverride) (*ojs.RateLimitStatus, error)
	ResetRateLimit(ctx context.Context, key string) (*ojs.RateLimitStatus, error)
	QueueRateLimit(ctx context.Context, queue string) (*ojs.RateLimitStatus, error)
	SetQueueRateLimit(ctx context.Context, queue string, l *ojs.Limits) (*ojs.QueueInfo, error)
}

// BackpressureBackend serves queues.config (ojs-backpressure.md 6.2).
type BackpressureBackend interface {
	QueueConfig(ctx context.Context, name string) (*ojs.QueueConfig, error)
	SetQueueBackpressure(ctx context.Context, name string, bp *ojs.Backpressure) (*ojs.QueueConfig, error)
}

// AdminBackend serves the operator API's endpoints (ojs-admin-api.md):
// listings, counts and bulk operations.
type AdminBackend interface {
	AdminStats(ctx context.Context) (*ojs.AdminStats, error)
	AdminQueues(ctx context.Context, page, perPage int) (*ojs.AdminQueueList, error)
	AdminQueue(ctx context.Context, name string) (*ojs.AdminQueue, error)
	AdminJobs(ctx context.Context, q ojs.JobListQuery) (*ojs.JobList, error)
	BulkJobs(ctx context.Context, req ojs.BulkRequest) (*ojs.BulkResult, error)
	DeadLetterStats(ctx context.Context) (*ojs.DeadLetterStats, error)
}

// CronBackend serves the cron endpoints (ojs-http-binding.md 13).
type CronBackend interface {
	CronRegister(ctx context.Context, cj ojs.CronJob) (*ojs.CronJob, error)
	CronJobs(ctx context.Context, page ojs.PageRequest) (*ojs.CronPage, error)
	CronJob(ctx context.Context, name string) (*ojs.CronJob, error)
	CronDelete(ctx context.Context, name string) error
}

// WorkflowBackend serves the workflow endpoints (ojs-http-binding.md 14).
type WorkflowBackend interface {
	CreateWorkflow(ctx context.Context, spec *ojs.WorkflowSpec) (*ojs.Workflow, error)
	Workflow(ctx context.Context, id string) (*ojs.Workflow, error)
	CancelWorkflow(ctx context.Context, id string) (*ojs.Workflow, error)
}

// WorkerBackend serves the worker registry's calls (ojs-admin-api.md 9,
// the graceful shutdown extension's beat and worker health).
type WorkerBackend interface {
	ListWorkers(ctx context.Context, page, perPage int) (*ojs.WorkerPage, error)
	Worker(ctx context.Context, id string) (*ojs.Worker, error)
	WorkerHealth(ctx context.Context, id string) (*ojs.WorkerHealth, error)
	Directive(ctx context.Context, id, directive string) (*ojs.Worker, error)
	Deregister(ctx context.Context, id string) (*ojs.Worker, error)
}

// PoolBackend serves the fair scheduling extension's pools.
type PoolBackend interface {
	ListPools(ctx context.Context) ([]ojs.Pool, error)
	Pool(ctx context.Context, name string) (*ojs.Pool, error)
	SetPool(ctx context.Context, g ojs.WorkerGroup) (*ojs.Pool, error)
	DeletePool(ctx context.Context, name string) error
	SchedulingStats(ctx context.Context) (*ojs.SchedulingStats, error)
}

// PriorityAdminBackend serves queue aging and worker groups.
type PriorityAdminBackend interface {
	QueueAging(ctx context.Context, queue string) (*ojs.QueueAging, error)
	SetQueueAging(ctx context.Context, queue string, a *ojs.Aging) (*ojs.QueueAging, error)
	WorkerGroup(ctx context.Context, name string) (*ojs.WorkerGroup, error)
	WorkerGroups(ctx context.Context) ([]ojs.WorkerGroup, error)
	SetWorkerGroup(ctx context.Context, g ojs.WorkerGroup) (*ojs.WorkerGroup, error)
	DeleteWorkerGroup(ctx context.Context, name string) error
}
