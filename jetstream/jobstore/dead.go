package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// DeadEntry is one entry of the dead letter index (bucket OJS_DEAD). The
// index is written before the job's CAS to discarded and removed after it
// leaves that state; entries whose job is not discarded are stale and are
// removed by whoever lists them.
type DeadEntry struct {
	JobID       string    `json:"id"`
	Queue       string    `json:"queue"`
	DiscardedAt *ojs.Time `json:"discarded_at,omitempty"`
}

// PutDead indexes a job as dead-lettered.
func (s *Store) PutDead(ctx context.Context, e DeadEntry) error {
	b, _ := json.Marshal(e)
	if _, err := s.assets.Dead.Put(ctx, topology.DeadKey(e.Queue, e.JobID), b); err != nil {
		return fmt.Errorf("index dead job %s: %w", e.JobID, Unavailable(err))
	}
	return nil
}

// DeleteDead removes a job from the dead letter index.
func (s *Store) DeleteDead(ctx context.Context, queue, id string) error {
	err := s.assets.Dead.Purge(ctx, topology.DeadKey(queue, id))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("unindex dead job %s: %w", id, Unavailable(err))
	}
	return nil
}

// DeadKeys lists the index keys of one queue ("" = all queues) in job id
// order, which for UUIDv7 ids is creation order.
func (s *Store) DeadKeys(ctx context.Context, queue string) ([]DeadKey, error) {
	filter := ">"
	if queue != "" {
		filter = topology.Token(queue) + ".*"
	}
	lister, err := s.assets.Dead.ListKeysFiltered(ctx, filter)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("list dead letter: %w", Unavailable(err))
	}
	var keys []DeadKey
	for k := range lister.Keys() {
		qt, idt, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		q, err1 := topology.Untoken(qt)
		id, err2 := topology.Untoken(idt)
		if err1 != nil || err2 != nil {
			continue
		}
		keys = append(keys, DeadKey{Queue: q, JobID: id})
	}
	slices.SortFunc(keys, func(a, b DeadKey) int { return strings.Compare(a.JobID, b.JobID) })
	return keys, nil
}

// DeadKey names one dead letter index entry.
type DeadKey struct {
	Queue string
	JobID string
}
