package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// QueueRecord is a queue's config in bucket OJS_QUEUES.
type QueueRecord struct {
	ojs.QueueInfo
	// Levels are the priority levels the queue has used, ascending: the
	// level registry (registry.go). It is stored in the record beside the
	// QueueInfo fields, and not part of the QueueInfo the API returns.
	Levels []int  `json:"levels,omitempty"`
	Rev    uint64 `json:"-"`
}

// GetQueue reads a queue record.
func (s *Store) GetQueue(ctx context.Context, name string) (*QueueRecord, error) {
	e, err := s.assets.Queues.Get(ctx, topology.Token(name))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, &ojs.NotFoundError{Resource: "queue", ID: name}
		}
		return nil, fmt.Errorf("get queue %s: %w", name, Unavailable(err))
	}
	return decodeQueue(e)
}

// CreateQueue registers a queue unless it exists; it returns the record.
//
// On a cluster a create can be refused because another process's create
// of the same queue is being replicated, before a read sees it: the read
// is then tried again a few times.
func (s *Store) CreateQueue(ctx context.Context, q ojs.QueueInfo) (*QueueRecord, error) {
	b, _ := json.Marshal(q)
	for try := 0; ; try++ {
		rev, err := s.assets.Queues.Create(ctx, topology.Token(q.Name), b)
		if err == nil {
			return &QueueRecord{QueueInfo: q, Rev: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("create queue %s: %w", q.Name, Unavailable(err))
		}
		rec, err := s.GetQueue(ctx, q.Name)
		if err == nil || !errors.Is(err, ojs.ErrNotFound) || try == 4 {
			return rec, err
		}
		select {
		case <-time.After(10 * time.Millisecond << try):
		case <-ctx.Done():
			return nil, fmt.Errorf("create queue %s: %w", q.Name, Unavailable(ctx.Err()))
		}
	}
}

// UpdateQueue writes q if it is still at q.Rev.
func (s *Store) UpdateQueue(ctx context.Context, q *QueueRecord) error {
	b, _ := json.Marshal(q)
	rev, err := s.assets.Queues.Update(ctx, topology.Token(q.Name), b, q.Rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return ErrConflict
		}
		return fmt.Errorf("update queue %s: %w", q.Name, Unavailable(err))
	}
	q.Rev = rev
	return nil
}

// WatchQueues streams every queue record, then each change, until ctx ends.
func (s *Store) WatchQueues(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := s.assets.Queues.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch queues: %w", Unavailable(err))
	}
	return w, nil
}

// DecodeQueue reads a queue record from a KV entry.
func DecodeQueue(e jetstream.KeyValueEntry) (*QueueRecord, error) { return decodeQueue(e) }

func decodeQueue(e jetstream.KeyValueEntry) (*QueueRecord, error) {
	var q QueueRecord
	if err := json.Unmarshal(e.Value(), &q); err != nil {
		return nil, fmt.Errorf("decode queue %s: %w", e.Key(), err)
	}
	q.Rev = e.Revision()
	return &q, nil
}
