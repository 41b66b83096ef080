package httpbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Backend is everything the HTTP binding asks of the layer below. The
// admission service implements it; httpbind never touches JetStream itself.
// Errors are the ojs sentinels and typed errors, mapped by writeError.
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
	// Ready reports whether the process can serve (GET /ready); it must
	// be cheap, as probes call it often.
	Ready(ctx context.Context) ojs.Readiness
}
