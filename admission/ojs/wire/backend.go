package wire

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Core is the operations of the OJS core both bindings serve (httpbind and
// natsbind declare their Backend with it), as the admission service
// implements them. Errors are the ojs sentinels and typed errors, mapped by
// Classify.
type Core interface {
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
