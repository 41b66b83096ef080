package admission

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// Page size bounds of list endpoints.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 100
)

// ListDeadLetter lists discarded jobs, oldest first, one page at a time.
// Index entries whose job left the discarded state (retried, deleted, or
// written by a transition that lost its race) are dropped as they are met.
func (s *Service) ListDeadLetter(ctx context.Context, q ojs.DeadLetterQuery) (*ojs.JobPage, error) {
	limit := q.Page.Limit
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	limit = min(limit, MaxPageLimit)
	offset := q.Page.Offset
	if q.Page.Cursor != "" {
		o, err := decodeCursor(q.Page.Cursor)
		if err != nil {
			return nil, err
		}
		offset = o
	}
	keys, err := s.store.DeadKeys(ctx, q.Queue)
	if err != nil {
		return nil, err
	}
	page := &ojs.JobPage{Jobs: []*ojs.Job{}}
	i := offset
	for ; i < len(keys) && len(page.Jobs) < limit; i++ {
		k := keys[i]
		j, _, err := s.store.Get(ctx, k.JobID)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if j == nil || j.State != ojs.StateDiscarded || j.Queue != k.Queue {
			if err := s.store.DeleteDead(ctx, k.Queue, k.JobID); err != nil {
				return nil, err
			}
			continue
		}
		page.Jobs = append(page.Jobs, j)
	}
	page.Pagination = ojs.Pagination{Total: len(keys), Limit: limit, Offset: offset, HasMore: i < len(keys)}
	if page.Pagination.HasMore {
		page.Pagination.NextCursor = encodeCursor(i)
	}
	return page, nil
}

// RetryDeadLetter makes a discarded job available again with its attempts
// reset (ojs-core 6.3: discarded -> available, manual retry).
func (s *Service) RetryDeadLetter(ctx context.Context, id string) (_ *ojs.Job, err error) {
	seq, undo, err := s.reserveRetry(ctx, id)
	if err != nil {
		return nil, err
	}
	defer func() { undoDepth(undo, err) }()
	nj, _, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateDiscarded {
			return nil, nil, &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
		}
		nj := s.ready(j, s.now())
		nj.Attempt = 0
		nj.Error = nil
		nj.Errors = nil
		nj.DiscardedAt = nil
		nj.StartedAt = nil
		nj.Internal.DepthSeq = seq
		// Deadlines counted from created_at that passed would discard
		// the job again at once: an operator's retry lifts them.
		now := s.now()
		if at, ok := nj.TTLDeadline(); ok && !now.Before(at) {
			nj.EnqueueTTL, nj.EnqueueTTLMs = 0, 0
		}
		if at, ok := nj.TotalDeadline(); ok && !now.Before(at) {
			nj.TotalTimeout, nj.TotalTimeoutMs = 0, 0
		}
		if nj.ExpiresAt != nil && !now.Before(nj.ExpiresAt.Time) {
			nj.ExpiresAt = nil
		}
		return nj, func(ctx context.Context, nj *ojs.Job) error {
			if err := s.rearmExpiry(ctx, nj); err != nil {
				return err
			}
			return s.store.PublishReady(ctx, nj)
		}, nil
	})
	if err != nil {
		if isNotFound(err) {
			return nil, &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
		}
		return nil, err
	}
	if err := s.store.DeleteDead(ctx, nj.Queue, nj.ID); err != nil {
		s.log.Warn("dead letter index entry left behind", "job", id, "error", err)
	}
	s.stats.move(nj.Queue, nj.Priority, ojs.StateDiscarded, nj.State)
	s.notify.ready(nj.Queue)
	s.events.PublishJob(EventJobEnqueued, nj, map[string]any{"retried_from": "dead_letter"})
	return nj, nil
}

// DeleteDeadLetter removes a discarded job for good.
func (s *Service) DeleteDeadLetter(ctx context.Context, id string) error {
	for range maxCASRetries {
		j, rev, err := s.store.Get(ctx, id)
		if err != nil {
			if isNotFound(err) {
				return &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
			}
			return err
		}
		if j.State != ojs.StateDiscarded {
			return &ojs.NotFoundError{Resource: "dead_letter_job", ID: id}
		}
		if err := s.store.Delete(ctx, id, rev); err != nil {
			if err == jobstore.ErrConflict {
				continue
			}
			return err
		}
		s.stats.move(j.Queue, j.Priority, ojs.StateDiscarded, "")
		return s.store.DeleteDead(ctx, j.Queue, id)
	}
	return fmt.Errorf("%w: job %s kept changing", ojs.ErrConflict, id)
}

func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset)))
}

func decodeCursor(c string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 2 && string(b[:2]) == "o:" {
		if n, err := strconv.Atoi(string(b[2:])); err == nil && n >= 0 {
			return n, nil
		}
	}
	return 0, &ojs.ValidationError{Field: "cursor", Rule: "a cursor returned by a previous page"}
}
