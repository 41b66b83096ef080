package app

import (
	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/cron"
	"github.com/jetgate/jetgate/admission/pools"
	"github.com/jetgate/jetgate/admission/workers"
	"github.com/jetgate/jetgate/httpbind"
)

// backend is what the HTTP binding serves: the admission service, plus
// the operator API (admission/admin, httpbind.AdminBackend), the worker registry (httpbind.WorkerBackend) and the pools
// (httpbind.PoolBackend) and the cron scheduler (httpbind.CronBackend), found by httpbind through type assertions.
type backend struct {
	*admission.Service
	*admin.Admin
	*workers.Registry
	*pools.Pools
	*cron.Scheduler
	// Workflows (admission/workflow).
	httpbind.WorkflowBackend
}

var (
	_ httpbind.AdminBackend    = backend{}
	_ httpbind.WorkerBackend   = backend{}
	_ httpbind.PoolBackend     = backend{}
	_ httpbind.CronBackend     = backend{}
	_ httpbind.WorkflowBackend = backend{}
	_ httpbind.Backend         = backend{}
)
