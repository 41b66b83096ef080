package natsbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Backend is what the NATS binding asks of the layer below: the core
// operations httpbind.Backend has too (wire.Core), so the value that serves
// HTTP serves NATS. Errors are mapped by wire.Classify exactly as HTTP maps
// them.
type Backend = wire.Core

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
	CronPut(ctx context.Context, name string, build func(cur *ojs.CronJob) (ojs.CronJob, error)) (*ojs.CronJob, bool, error)
}

// WorkflowBackend serves the workflow endpoints (ojs-http-binding.md 14).
type WorkflowBackend interface {
	CreateWorkflow(ctx context.Context, spec *ojs.WorkflowSpec) (*ojs.Workflow, error)
	Workflow(ctx context.Context, id string) (*ojs.Workflow, error)
	CancelWorkflow(ctx context.Context, id string) (*ojs.Workflow, error)
	Workflows(ctx context.Context, q ojs.WorkflowListQuery) (*ojs.WorkflowList, error)
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
