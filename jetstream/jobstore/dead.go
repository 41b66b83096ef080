package jobstore

import (
	"context"
	"encoding/json"
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

// The index is read and pruned through its stream rather than as a KV
// bucket. A key listing through a KV watcher is served by an ephemeral
// consumer that a replicated stream may place on a replica a few
// milliseconds behind, so a job discarded just now could be missing from
// a listing made just after (read-after-write fails on R3). Stream info is
// answered by the stream leader. A removed entry is purged from the stream
// whole, leaving no delete marker behind, so the subjects the stream holds
// are exactly the entries.

// deadSubjects is the subject prefix of the index's entries.
var deadSubjects = "$KV." + topology.DeadBucket + "."

func (s *Store) deadStream(ctx context.Context) (jetstream.Stream, error) {
	st, err := s.js.Stream(ctx, topology.KVStream(topology.DeadBucket))
	if err != nil {
		return nil, fmt.Errorf("dead letter index: %w", Unavailable(err))
	}
	return st, nil
}

// DeleteDead removes a job from the dead letter index.
func (s *Store) DeleteDead(ctx context.Context, queue, id string) error {
	st, err := s.deadStream(ctx)
	if err != nil {
		return err
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(deadSubjects+topology.DeadKey(queue, id))); err != nil {
		return fmt.Errorf("unindex dead job %s: %w", id, Unavailable(err))
	}
	return nil
}

// DeadKeys lists the index keys of one queue ("" = all queues) in job id
// order, which for UUIDv7 ids is creation order, as the stream leader
// knows them (read-after-write on a cluster).
func (s *Store) DeadKeys(ctx context.Context, queue string) ([]DeadKey, error) {
	filter := deadSubjects + ">"
	if queue != "" {
		filter = deadSubjects + topology.Token(queue) + ".*"
	}
	st, err := s.deadStream(ctx)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("list dead letter: %w", Unavailable(err))
	}
	keys := make([]DeadKey, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		qt, idt, ok := strings.Cut(strings.TrimPrefix(subj, deadSubjects), ".")
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
