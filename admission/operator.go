package admission

import (
	"context"
	"fmt"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// Hooks of the operator API (package admission/admin): the counts it
// reports and the one transition it needs that the data plane has not.

// StateCounts returns a queue's jobs in every state: the counters in
// stream OJS_COUNTS plus this process's unflushed deltas (one direct get
// per state, no scan).
func (s *Service) StateCounts(ctx context.Context, queue string) (map[ojs.State]int64, error) {
	return s.stateCounts(ctx, queue, ojs.States)
}

// DeleteJob removes a finished job (completed, cancelled or discarded) for
// good, with one compare-and-swap on its record: a job that changed since
// it was read is read again, and one that is not finished is refused with
// a StateError. A discarded job leaves the dead letter queue with it.
func (s *Service) DeleteJob(ctx context.Context, id string) error {
	for range maxCASRetries {
		j, rev, err := s.store.Get(ctx, id)
		if err != nil {
			return err
		}
		if !j.State.Terminal() {
			return &ojs.StateError{JobID: id, Current: j.State, Op: "delete"}
		}
		if err := s.store.Delete(ctx, id, rev); err != nil {
			if err == jobstore.ErrConflict {
				continue
			}
			return err
		}
		s.stats.move(j.Queue, j.Priority, j.State, "")
		if j.State == ojs.StateDiscarded {
			return s.store.DeleteDead(ctx, j.Queue, id)
		}
		return nil
	}
	return fmt.Errorf("%w: job %s kept changing", ojs.ErrConflict, id)
}
