package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Batches of seeds under a pending marker (doc.go, "Batches").
//
// A batch of new available jobs whose ids the server made is stored
// without a JetStream atomic batch, which on file storage stages every
// message in a file store of its own before the commit (nats-server
// stream.go: "persist everything to survive hard kills"), costing a
// directory, files and an fsync per batch:
//
//  1. a pending marker is created in OJS_BATCHES under the batch's id, and
//     its answer awaited;
//  2. the seeds are published pipelined, each naming the batch
//     (HeaderBatch), and every answer awaited;
//  3. the commit removes the marker, a compare-and-swap on the revision
//     step 1 wrote (a purge whose marker expires after batchMarkerTTL).
//
// A seed that names a batch is a job only once its batch is committed:
// its marker is gone. Every reader of a seed asks (SeedBatch): a claim,
// and Get. A pending batch is waited for while it is young; one older
// than BatchWindow is abandoned (its publisher died or stalled) by a
// compare-and-swap of its marker to aborted, which the commit's
// compare-and-swap then loses: exactly one of commit and abort lands, so
// a batch is all or none. An aborted batch's seeds are dropped by whoever
// meets them. A failed publish aborts the batch at once.
//
// The seeds precede nothing: the marker is stored (step 1) before any of
// them, so a seed whose marker is absent is committed. A committed batch
// is remembered per process, so a batch costs one marker read per
// process, not one per job.

// HeaderBatch names the batch a seed was stored in.
const HeaderBatch = "Ojs-Batch"

// BatchWindow is how long a pending batch is waited for before a reader
// of one of its seeds abandons it. The publisher of a batch gives up well
// before (a third of it): its publishes are pipelined and take
// milliseconds; only a stalled or dead publisher is older.
const BatchWindow = 30 * time.Second

// SetBatchWindow sets how long this store's readers wait for a pending
// batch (default BatchWindow; tests shorten it). Its publisher commits
// only within a third of it; an older batch is aborted instead.
func (s *Store) SetBatchWindow(d time.Duration) { s.window.Store(int64(d)) }

func (s *Store) batchWindow() time.Duration {
	if d := time.Duration(s.window.Load()); d > 0 {
		return d
	}
	return BatchWindow
}

// batchMarkerTTL is how long the purge marker a commit leaves is kept.
// Its absence means the same (committed).
const batchMarkerTTL = time.Hour

// maxCommitted bounds the per-process memory of committed batches.
const maxCommitted = 4096

// BatchState is what a seed's batch is.
type BatchState int

const (
	// BatchCommitted: the batch's jobs exist.
	BatchCommitted BatchState = iota
	// BatchPending: the batch is being stored; its seeds are not jobs
	// yet and may never be.
	BatchPending
	// BatchAborted: the batch failed; its seeds are not jobs and are
	// dropped.
	BatchAborted
)

// batchMarker is the value of a batch's marker.
type batchMarker struct {
	State string `json:"state"` // "pending" or "aborted"
	Jobs  int    `json:"jobs"`
}

const (
	markerPending = "pending"
	markerAborted = "aborted"
)

// committedBatches remembers batches known committed (final: a committed
// batch never changes).
type committedBatches struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (c *committedBatches) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

func (c *committedBatches) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids) >= maxCommitted {
		c.ids = make(map[string]struct{}, 64)
	}
	c.ids[id] = struct{}{}
}

// BatchOf returns the batch a ready message's seed was stored in, "" for
// none.
func BatchOf(h nats.Header) string { return h.Get(HeaderBatch) }

// batchKey is the marker's key in OJS_BATCHES.
func batchKey(id string) string { return "b." + id }

// publishMarkedBatch stores jobs (new, available, server-made ids) as
// seeds under a pending marker, and commits them (see above).
func (s *Store) publishMarkedBatch(ctx context.Context, jobs []*ojs.Job) error {
	id := nuid.Next()
	mark, err := json.Marshal(batchMarker{State: markerPending, Jobs: len(jobs)})
	if err != nil {
		return err
	}
	rev, err := s.assets.Batches.Create(ctx, batchKey(id), mark)
	if err != nil {
		return fmt.Errorf("enqueue batch: mark pending: %w", Unavailable(err))
	}
	started := time.Now()
	msgs := make([]*nats.Msg, len(jobs))
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	var failed error
	for i, j := range jobs {
		m, err := SeedMsg(j)
		if err == nil {
			m.Header.Set(HeaderBatch, id)
			msgs[i] = m
			var f jetstream.PubAckFuture
			if f, err = s.publishReadyAsync(ctx, j.Queue, j.Priority, m); err == nil {
				futures = append(futures, f)
			}
		}
		if err != nil {
			failed = err
			break
		}
	}
	acks := make([]*jetstream.PubAck, len(futures))
	for i, f := range futures {
		select {
		case a := <-f.Ok():
			acks[i] = a
		case err := <-f.Err():
			failed = cmpErr(failed, err)
		case <-ctx.Done():
			failed = cmpErr(failed, ctx.Err())
		}
	}
	if failed == nil && time.Since(started) > s.batchWindow()/3 {
		failed = fmt.Errorf("its seeds took %s to store", time.Since(started).Round(time.Millisecond))
	}
	if failed == nil {
		err := s.assets.Batches.Purge(ctx, batchKey(id), jetstream.LastRevision(rev), jetstream.PurgeTTL(batchMarkerTTL))
		if err == nil {
			s.committed.add(id)
			for i, a := range acks {
				s.noteReady(msgs[i].Subject, a)
			}
			return nil
		}
		failed = err
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// The commit may have landed: the caller hears an error it
			// cannot tell from success (as with a lost publish ack).
			return fmt.Errorf("enqueue batch: commit: %w", Unavailable(err))
		}
		// A reader abandoned the batch meanwhile: it is aborted.
	}
	s.abortBatch(id, rev, len(jobs), acks)
	return fmt.Errorf("enqueue batch: %w", Unavailable(failed))
}

// abortBatch marks batch id aborted at rev (if still pending there) and
// removes the seeds that were stored (best effort: a seed left over is
// dropped by whoever meets it).
func (s *Store) abortBatch(id string, rev uint64, n int, acks []*jetstream.PubAck) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	mark, _ := json.Marshal(batchMarker{State: markerAborted, Jobs: n})
	if _, err := s.assets.Batches.Update(ctx, batchKey(id), mark, rev); err != nil {
		// Aborted by a reader already, or unreachable: a pending marker
		// is abandoned by the next reader after BatchWindow.
		return
	}
	for _, a := range acks {
		if a != nil {
			_ = s.assets.Ready.DeleteMsg(ctx, a.Sequence)
		}
	}
}

// SeedBatch tells what the batch of a seed is. A pending batch older than
// BatchWindow is abandoned here (marked aborted, unless it committed or
// was aborted meanwhile).
func (s *Store) SeedBatch(ctx context.Context, id string) (BatchState, error) {
	if s.committed.has(id) {
		return BatchCommitted, nil
	}
	for range 3 {
		e, err := s.assets.Batches.Get(ctx, batchKey(id))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			s.committed.add(id)
			return BatchCommitted, nil
		case err != nil:
			return 0, fmt.Errorf("read batch %s: %w", id, Unavailable(err))
		}
		var m batchMarker
		if err := json.Unmarshal(e.Value(), &m); err != nil {
			return 0, fmt.Errorf("read batch %s: %w", id, err)
		}
		if m.State == markerAborted {
			return BatchAborted, nil
		}
		if time.Since(e.Created()) < s.batchWindow() {
			return BatchPending, nil
		}
		mark, _ := json.Marshal(batchMarker{State: markerAborted, Jobs: m.Jobs})
		_, err = s.assets.Batches.Update(ctx, batchKey(id), mark, e.Revision())
		switch {
		case err == nil:
			return BatchAborted, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // committed or aborted meanwhile: read again
		default:
			return 0, fmt.Errorf("abandon batch %s: %w", id, Unavailable(err))
		}
	}
	return 0, fmt.Errorf("read batch %s: %w: its marker kept changing", id, ErrConflict)
}

// cmpErr keeps the first error.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}
