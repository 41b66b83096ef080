package admission

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// WorkerHook is where the worker registry (admission/workers) meets the
// worker operations: the only two calls the core makes into it. The
// registry owns worker lifecycle state; the core only asks it.
type WorkerHook interface {
	// Admit is called by every fetch before it looks for jobs. It records
	// that req's worker was seen and tells whether the worker may be given
	// jobs (a quiet, draining or terminating worker may not, across every
	// process). It sets req.Pool to the pool the worker declared. It must
	// not wait on I/O: fetch is the hot path.
	Admit(req ojs.FetchRequest) (ojs.FetchRequest, bool)
	// Beat records a heartbeat and answers the state the worker is to be
	// in (running, quiet, drain or terminate). It never fails the
	// heartbeat: the registry answers from what it knows when its store
	// cannot be written.
	Beat(ctx context.Context, req ojs.HeartbeatRequest) string
}
