package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetgate/jetgate/admission/ojs"
)

// BulkJobs applies one action to the jobs a filter matches (ojs-admin-api.md
// 8): at most Config.MaxBulk of them (or req.Limit, if lower), found as a
// listing finds them, from req.Cursor on. The jobs are found first and
// changed afterwards, each by its own admission transition (one
// compare-and-swap, re-read and decided again on a lost race), so a job
// that changed meanwhile is judged by its state at that moment. The answer
// counts what succeeded and names each job that failed, with why; when
// more jobs may match, it carries a cursor to go on from.
//
// Retry applies to discarded jobs (RetryDeadLetter), cancel to jobs not yet
// finished (Cancel), delete to finished ones (DeleteJob); the confirmation
// the spec requires is httpbind's to check.
func (a *Admin) BulkJobs(ctx context.Context, req ojs.BulkRequest) (*ojs.BulkResult, error) {
	op, eligible, err := a.bulkOp(req.Action)
	if err != nil {
		return nil, err
	}
	limit := a.cfg.MaxBulk
	if req.Limit > 0 {
		limit = min(limit, req.Limit)
	}
	cur := startCursor(req.Filter)
	if req.Cursor != "" {
		if cur, err = decodeCursor("cursor", req.Cursor, req.Filter); err != nil {
			return nil, err
		}
	}
	var jobs []*ojs.Job
	next, more, _, err := a.walk(ctx, req.Filter, cur, a.cfg.MaxScan, func(j *ojs.Job) bool {
		jobs = append(jobs, j)
		return len(jobs) < limit
	})
	if err != nil {
		return nil, err
	}
	res := &ojs.BulkResult{Action: req.Action, Matched: len(jobs), Errors: []ojs.BulkError{}, HasMore: more}
	if more {
		res.NextCursor = next.encode()
	}
	fail := func(id string, err error) { res.Fail(id, BulkCode(err), err) }
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			fail(j.ID, fmt.Errorf("%w: %w", ojs.ErrUnavailable, err))
			continue
		}
		if why := eligible(j.State); why != "" {
			fail(j.ID, fmt.Errorf("%w: job %s is %s: %s", ojs.ErrInvalidState, j.ID, j.State, why))
			continue
		}
		if err := op(ctx, j.ID); err != nil {
			fail(j.ID, err)
			continue
		}
		res.Succeeded++
	}
	return res, nil
}

// bulkOp returns the transition of an action and the test of the states it
// applies to (an empty reason: eligible).
func (a *Admin) bulkOp(action string) (func(context.Context, string) error, func(ojs.State) string, error) {
	switch action {
	case ojs.BulkRetry:
		return func(ctx context.Context, id string) error {
				_, err := a.svc.RetryDeadLetter(ctx, id)
				return err
			}, func(s ojs.State) string {
				if s != ojs.StateDiscarded {
					return "only discarded jobs can be retried"
				}
				return ""
			}, nil
	case ojs.BulkCancel:
		return func(ctx context.Context, id string) error {
				_, _, err := a.svc.Cancel(ctx, id)
				return err
			}, func(s ojs.State) string {
				if !ojs.CanTransition(s, ojs.StateCancelled) {
					return "only jobs that have not finished can be cancelled"
				}
				return ""
			}, nil
	case ojs.BulkDelete:
		return a.svc.DeleteJob, func(s ojs.State) string {
			if !s.Terminal() {
				return "only completed, cancelled or discarded jobs can be deleted"
			}
			return ""
		}, nil
	}
	return nil, nil, &ojs.NotFoundError{Resource: "bulk action", ID: action}
}

// BulkCode is the code a bulk answer gives a job's failure.
func BulkCode(err error) string {
	switch {
	case errors.Is(err, ojs.ErrInvalidState):
		return "invalid_state"
	case errors.Is(err, ojs.ErrNotFound):
		return ojs.CodeNotFound
	case errors.Is(err, ojs.ErrConflict):
		return ojs.CodeConflict
	case errors.Is(err, ojs.ErrQueuePaused):
		return ojs.CodeQueuePaused
	default:
		return ojs.CodeBackendError
	}
}
