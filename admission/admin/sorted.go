package admin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
)

// phaseSorted marks the cursor of a sorted listing: its seq is the offset
// of the page it starts, plus one.
const phaseSorted = 's'

// sortedJobs is a listing ordered by q.Sort (issue 32: admin dashboards
// ask for the scheduled jobs soonest first). Jobs carry no index by those
// fields, so the order is made here: the listing reads every job the
// filter matches, within the same bound of MaxScan messages an unsorted
// page reads at most, keeps each one's listing fields only, and sorts
// them. A listing with more to read than that is refused naming sort and
// saying how to narrow it: an order made from part of the jobs would be
// wrong. Its total is exact, its pages are offsets into the sorted list.
func (a *Admin) sortedJobs(ctx context.Context, q ojs.JobListQuery, per int) (*ojs.JobList, error) {
	skip, page, err := a.sortedPosition(q, per)
	if err != nil {
		return nil, err
	}
	var all []*ojs.Job
	_, more, scanned, err := a.walk(ctx, q.Filter, startCursor(q.Filter), a.cfg.MaxScan, func(j *ojs.Job) bool {
		all = append(all, listingFields(j))
		return true
	})
	if err != nil {
		return nil, err
	}
	if more {
		return nil, &ojs.ValidationError{Field: "sort", Received: strconv.Quote(q.Sort),
			Rule: fmt.Sprintf("served for listings within %d jobs and records read; this one has more: "+
				"narrow it with queue, state, type, since or until, or list without sort (stream order, pages by cursor)", a.cfg.MaxScan)}
	}
	slices.SortFunc(all, jobOrder(q.Sort, q.Desc))
	total := int64(len(all))
	from := min(skip, len(all))
	to := min(from+per, len(all))
	out := &ojs.JobList{Items: all[from:to], Scanned: scanned,
		Pagination: ojs.AdminPagination{Total: &total, Page: page, PerPage: per, HasMore: to < len(all)}}
	if out.Pagination.HasMore {
		out.Pagination.NextCursor = cursor{phase: phaseSorted, seq: uint64(to) + 1, page: page + 1}.encode()
	}
	return out, nil
}

// sortedPosition is the offset and page number a sorted page starts at.
func (a *Admin) sortedPosition(q ojs.JobListQuery, per int) (skip, page int, err error) {
	if q.Cursor != "" {
		c, err := decodeCursor("cursor", q.Cursor, q.Filter)
		if err != nil || c.phase != phaseSorted {
			return 0, 0, badCursor("cursor")
		}
		return int(min(c.seq-1, uint64(a.cfg.MaxScan))), c.page, nil
	}
	page = max(q.Page, 1)
	skip = (page - 1) * per
	if skip > a.cfg.MaxOffset || skip < 0 {
		return 0, 0, &ojs.ValidationError{Field: "page",
			Rule:     fmt.Sprintf("(page-1)*per_page at most %d", a.cfg.MaxOffset),
			Received: strconv.Itoa(q.Page)}
	}
	return skip, page, nil
}

// listingFields is j with only what a listing shows (wire.Summarize):
// a sorted listing holds every matching job until it has sorted them.
func listingFields(j *ojs.Job) *ojs.Job {
	return &ojs.Job{ID: j.ID, Type: j.Type, Queue: j.Queue, State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Tags: j.Tags, CreatedAt: j.CreatedAt,
		EnqueuedAt: j.EnqueuedAt, ScheduledAt: j.ScheduledAt, StartedAt: j.StartedAt,
		CompletedAt: j.CompletedAt, CancelledAt: j.CancelledAt, DiscardedAt: j.DiscardedAt,
		NextAttemptAt: j.NextAttemptAt, Error: j.Error}
}

// jobOrder compares two jobs by field, then by creation and id, so that
// equal keys keep one order; desc reverses it. A job without the field
// (no scheduled_at) comes last either way.
func jobOrder(field string, desc bool) func(a, b *ojs.Job) int {
	return func(a, b *ojs.Job) int {
		var c int
		switch field {
		case ojs.SortPriority:
			c = cmp.Compare(a.Priority, b.Priority)
		case ojs.SortScheduledAt:
			ta, tb := dueAt(a), dueAt(b)
			if (ta == nil) != (tb == nil) {
				if ta == nil {
					return 1
				}
				return -1
			}
			c = compareTime(ta, tb)
		}
		if c == 0 {
			c = compareTime(a.CreatedAt, b.CreatedAt)
		}
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if desc {
			return -c
		}
		return c
	}
}

// dueAt is when a job is due to run: its scheduled_at, or for a retrying
// job its next attempt.
func dueAt(j *ojs.Job) *ojs.Time {
	if j.ScheduledAt != nil {
		return j.ScheduledAt
	}
	return j.NextAttemptAt
}

func compareTime(a, b *ojs.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return a.Compare(b.Time)
}
