package admin_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/ojs"
)

// Issue 32: a sorted listing is served when every job it matches is read
// within the listing's scan bound (MaxScan), with an exact total, and is
// refused naming sort, with the reason, when there is more to read: an
// order made from part of the jobs would be wrong.
func TestSortedListingWithinScanBound(t *testing.T) {
	t.Parallel()
	b := setup(t, admin.Config{MaxScan: 6})
	ctx := testCtx(t)
	var made []string
	for range 5 {
		made = append(made, enqueue(t, b, "q", "t.sorted").ID)
	}
	l, err := b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable},
		Sort: ojs.SortCreatedAt, Desc: true, PerPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(made)
	slices.Reverse(want)
	if got := ids(l); !slices.Equal(got, want[:2]) || l.Pagination.Total == nil || *l.Pagination.Total != 5 || !l.Pagination.HasMore {
		t.Fatalf("newest first: %v total %v, want %v of 5 with more", got, l.Pagination.Total, want[:2])
	}
	// The next cursor goes on in the same order.
	next, err := b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable},
		Sort: ojs.SortCreatedAt, Desc: true, PerPage: 2, Cursor: l.Pagination.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(next); !slices.Equal(got, want[2:4]) || next.Pagination.Page != 2 {
		t.Fatalf("page 2 by cursor: %v (page %d), want %v", got, next.Pagination.Page, want[2:4])
	}
	// A sorted listing's cursor does not continue an unsorted one.
	_, err = b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable}, Cursor: l.Pagination.NextCursor})
	wantRefused(t, err, "cursor")

	// Two more jobs: 7 ready messages to read, above the bound of 6.
	enqueue(t, b, "q", "t.sorted")
	enqueue(t, b, "q", "t.sorted")
	_, err = b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable}, Sort: ojs.SortPriority})
	wantRefused(t, err, "sort")
	// Unsorted, the same listing is served page by page as before.
	if l, err := b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable}}); err != nil || len(l.Items) != 6 || !l.Pagination.HasMore {
		t.Fatalf("unsorted listing: %v, %v", l, err)
	}
}

func wantRefused(t *testing.T, err error, field string) {
	t.Helper()
	var ve *ojs.ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Fatalf("error %v, want a validation error naming %s", err, field)
	}
}
