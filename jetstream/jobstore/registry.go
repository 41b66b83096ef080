package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The level registry (doc.go, "Levels without walking jobs").
//
// With one ready subject per job, no request that matches a queue's
// subjects is cheap any more: the server walks one subject per ready job.
// So the priority levels a queue has used are kept in its record in
// OJS_QUEUES (QueueRecord.Levels), and a fetch asks only those levels'
// consumers. Before a ready message is published at a level missing from
// the record, the level is added with one compare-and-swap (EnsureLevel):
// once per queue and level in the cluster, since every process remembers
// the levels it registered or saw in the record (KnowLevels, fed by
// admission's watch of the bucket). Levels are never removed: a level that
// holds nothing costs a fetch one consumer info, or nothing while the
// queue's level counts are reused (admission/levelpull.go).
//
// The registry also notes, per level, the highest stream sequence of this
// process's own ready publishes (from the publish acks): a level
// consumer's pending count is updated a little after a publish, and a
// fetch that finds a level empty although this process published there
// after the last message it was handed waits a moment for it
// (admission/levels.go).

// levelRegistry is a Store's view of the queues' registered levels and of
// its own ready publishes.
type levelRegistry struct {
	mu    sync.RWMutex
	known map[string][]int // queue -> registered levels, ascending; never changed in place
	pub   map[string]uint64
	// writes serializes the registry writes of this process.
	writes sync.Mutex
}

// has reports whether queue's level prio is known to be registered.
func (r *levelRegistry) has(queue string, prio int) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := slices.BinarySearch(r.known[queue], prio)
	return ok
}

// add merges levels into the known levels of queue.
func (r *levelRegistry) add(queue string, levels []int) {
	if len(levels) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.known[queue]
	missing := false
	for _, p := range levels {
		if _, ok := slices.BinarySearch(old, p); !ok {
			missing = true
			break
		}
	}
	if !missing {
		return
	}
	merged := append(slices.Clone(old), levels...)
	slices.Sort(merged)
	if r.known == nil {
		r.known = map[string][]int{}
	}
	r.known[queue] = slices.Compact(merged)
}

// Levels returns the registered priority levels of queue known to this
// process, ascending. The slice must not be changed.
func (s *Store) Levels(queue string) []int {
	s.levels.mu.RLock()
	defer s.levels.mu.RUnlock()
	return s.levels.known[queue]
}

// KnowLevels notes levels of queue as registered (read from its record).
func (s *Store) KnowLevels(queue string, levels []int) { s.levels.add(queue, levels) }

// EnsureLevel registers level prio of queue in the queue's record unless
// it is known to be there: one compare-and-swap on the record (created if
// missing), retried on conflict. Every ready message must be published
// after its level's EnsureLevel returned.
func (s *Store) EnsureLevel(ctx context.Context, queue string, prio int) error {
	if s.levels.has(queue, prio) {
		return nil
	}
	s.levels.writes.Lock()
	defer s.levels.writes.Unlock()
	for range 8 {
		if s.levels.has(queue, prio) {
			return nil
		}
		rec, err := s.GetQueue(ctx, queue)
		if errors.Is(err, ojs.ErrNotFound) {
			rec = &QueueRecord{QueueInfo: ojs.QueueInfo{Name: queue, Status: ojs.QueueActive, CreatedAt: ojs.NewTime(time.Now())}}
			err = s.createQueueRecord(ctx, rec, prio)
			if errors.Is(err, ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			s.levels.add(queue, rec.Levels)
			return nil
		}
		if err != nil {
			return fmt.Errorf("register level %d of %s: %w", prio, queue, err)
		}
		s.levels.add(queue, rec.Levels)
		if _, ok := slices.BinarySearch(rec.Levels, prio); ok {
			return nil
		}
		rec.Levels = append(slices.Clone(rec.Levels), prio)
		slices.Sort(rec.Levels)
		switch err := s.UpdateQueue(ctx, rec); {
		case err == nil:
			s.levels.add(queue, rec.Levels)
			return nil
		case !errors.Is(err, ErrConflict):
			return fmt.Errorf("register level %d of %s: %w", prio, queue, err)
		}
	}
	return fmt.Errorf("register level %d of %s: %w", prio, queue, ErrConflict)
}

// createQueueRecord creates rec holding level prio; ErrConflict when the
// record exists.
func (s *Store) createQueueRecord(ctx context.Context, rec *QueueRecord, prio int) error {
	rec.Levels = []int{prio}
	b, _ := json.Marshal(rec)
	rev, err := s.assets.Queues.Create(ctx, topology.Token(rec.Name), b)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrConflict
		}
		return fmt.Errorf("register level %d of %s: %w", prio, rec.Name, Unavailable(err))
	}
	rec.Rev = rev
	return nil
}

// RegisterLegacyLevels registers the levels that hold ready messages of
// the layout before per-job subjects (ojs.ready.<queue>.<priority>),
// which were published without a registry. One stream info with a filter
// on those subjects answers it: one entry per level, not per job.
func (s *Store) RegisterLegacyLevels(ctx context.Context) error {
	info, err := s.assets.Ready.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyLegacyFilter))
	if err != nil {
		return fmt.Errorf("legacy ready levels: %w", Unavailable(err))
	}
	for subj, n := range info.State.Subjects {
		tok, prio, ok := topology.ReadyLevelOf(subj)
		if !ok || n == 0 {
			continue
		}
		queue, err := topology.Untoken(tok)
		if err != nil {
			continue
		}
		if err := s.EnsureLevel(ctx, queue, prio); err != nil {
			return err
		}
	}
	return nil
}

// levelKey names a level in levelRegistry.pub: its subject of the earlier
// layout, ojs.ready.<queue>.<priority>.
func levelKey(readySubject string) string {
	if i := strings.LastIndexByte(readySubject, '.'); i >= 0 {
		return readySubject[:i]
	}
	return readySubject
}

// noteReady records the stream sequence of a stored ready message this
// process published on subject (per-job).
func (s *Store) noteReady(subject string, ack *jetstream.PubAck) {
	if ack == nil {
		return
	}
	k := levelKey(subject)
	s.levels.mu.Lock()
	defer s.levels.mu.Unlock()
	if s.levels.pub == nil {
		s.levels.pub = map[string]uint64{}
	}
	if ack.Sequence > s.levels.pub[k] {
		s.levels.pub[k] = ack.Sequence
	}
}

// PublishedSeq returns the highest stream sequence of a ready message this
// process published at queue's level prio (0: none).
func (s *Store) PublishedSeq(queue string, prio int) uint64 {
	k := topology.ReadyLegacySubject(queue, prio)
	s.levels.mu.RLock()
	defer s.levels.mu.RUnlock()
	return s.levels.pub[k]
}

// LastReady returns the stream sequence and the level of the last ready
// message stored at queue's level prio (sequence 0: none), or, with
// prio < 0, at any level of queue. It is read from the stream itself, not
// from a level consumer's count: a direct get on a single server, the
// stream leader's answer on a cluster (topology.Ensure), so a message
// whose publish was acknowledged is there. The server finds it from the
// subjects of that level (or queue) alone, one per message stored there.
func (s *Store) LastReady(ctx context.Context, queue string, prio int) (seq uint64, level int, err error) {
	filter := topology.ReadyQueueFilter(queue)
	if prio >= 0 {
		filter = topology.ReadyLevelFilter(queue, prio)
	}
	m, err := s.assets.Ready.GetLastMsgForSubject(ctx, filter)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("last ready message of %s: %w", filter, Unavailable(err))
	}
	_, level, ok := topology.ReadyLevelOf(m.Subject)
	if !ok {
		return 0, 0, fmt.Errorf("last ready message of %s: subject %q names no level", filter, m.Subject)
	}
	return m.Sequence, level, nil
}

// StoredLevels returns the levels of queue at which the ready stream holds
// messages, ascending: one stream info whose subject filter the server
// answers from the queue's subjects, one per message stored there, so it
// costs as much as the queue holds (for a queue a fetch found empty, the
// messages of running jobs and of claims under way).
func (s *Store) StoredLevels(ctx context.Context, queue string) ([]int, error) {
	info, err := s.assets.Ready.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyQueueFilter(queue)))
	if err != nil {
		return nil, fmt.Errorf("stored levels of %s: %w", queue, Unavailable(err))
	}
	var levels []int
	for subj, n := range info.State.Subjects {
		if _, p, ok := topology.ReadyLevelOf(subj); ok && n > 0 && !slices.Contains(levels, p) {
			levels = append(levels, p)
		}
	}
	slices.Sort(levels)
	return levels, nil
}

// publishReady registers the level of m (a ready message of queue at
// prio), publishes m, waits for it to be stored and notes its sequence.
func (s *Store) publishReady(ctx context.Context, queue string, prio int, m *nats.Msg) error {
	if err := s.EnsureLevel(ctx, queue, prio); err != nil {
		return err
	}
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return err
	}
	s.noteReady(m.Subject, ack)
	return nil
}

// publishReadyAsync registers the level of m (a ready message of queue at
// prio), then publishes m without waiting; the caller notes the ack
// (noteReady).
func (s *Store) publishReadyAsync(ctx context.Context, queue string, prio int, m *nats.Msg) (jetstream.PubAckFuture, error) {
	if err := s.EnsureLevel(ctx, queue, prio); err != nil {
		return nil, err
	}
	return s.js.PublishMsgAsync(m)
}
