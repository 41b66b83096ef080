package workflow_test

import (
	"bytes"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/workflow"
)

// Issue 32 workflows: a record stored before issue 32 says "active" for a
// running workflow; it reads as running (GET and the listing, whose state
// filter also accepts "active"), and the engine still moves it on.
func TestIssue32StoredActiveReadsAsRunning(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 0, true)[0]
	ctx := testCtx(t)
	w := create(t, n, `{"type":"chain","name":"legacy","steps":[{"name":"a","type":"t.a","args":[],"options":{"queue":"wf32legacy"}}]}`)
	kv := n.kv
	en, err := kv.Get(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Replace(en.Value(), []byte(`"state":"running"`), []byte(`"state":"active"`), 1)
	if bytes.Equal(old, en.Value()) {
		t.Fatalf("record does not say running: %s", en.Value())
	}
	if _, err := kv.Put(ctx, w.ID, old); err != nil {
		t.Fatal(err)
	}
	if got := get(t, n, w.ID); got.State != ojs.WorkflowRunning {
		t.Fatalf("stored active reads as %q, want running", got.State)
	}
	for _, st := range []string{"running", "active"} {
		l, err := n.eng.Workflows(ctx, ojs.WorkflowListQuery{State: st})
		if err != nil || len(l.Workflows) != 1 || l.Workflows[0].State != ojs.WorkflowRunning {
			t.Fatalf("list state=%s: %+v %v", st, l, err)
		}
	}
	ack(t, n, fetch(t, n, "wf32legacy"), `{"ok":true}`)
	waitState(t, n, w.ID, ojs.WorkflowCompleted)
}

// Issue 32 workflow listing: pages by page/per_page and by cursor, filters
// by state, refuses an unknown state naming the field, and reads at most
// MaxScan records per request: a page that meets the bound ends early
// with has_more and a cursor that goes on where it stopped.
func TestIssue32WorkflowListingBounded(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 0, true)[0]
	ctx := testCtx(t)
	var ids []string
	for range 5 {
		w := create(t, n, `{"type":"group","jobs":[{"name":"a","type":"t.a","args":[],"options":{"queue":"wf32list"}}]}`)
		ids = append(ids, w.ID)
	}
	if _, err := n.eng.CancelWorkflow(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	all, err := n.eng.Workflows(ctx, ojs.WorkflowListQuery{PerPage: 10})
	if err != nil || len(all.Workflows) != 5 || all.Pagination.HasMore {
		t.Fatalf("all: %+v %v", all, err)
	}
	for _, w := range all.Workflows {
		if w.Steps != nil || w.JobsTotal == nil || *w.JobsTotal != 1 {
			t.Fatalf("summary %+v: want no steps, jobs_total 1", w)
		}
	}
	p2, err := n.eng.Workflows(ctx, ojs.WorkflowListQuery{Page: 2, PerPage: 2})
	if err != nil || len(p2.Workflows) != 2 || !p2.Pagination.HasMore || p2.Pagination.Page != 2 {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	c, err := n.eng.Workflows(ctx, ojs.WorkflowListQuery{State: "cancelled"})
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].ID != ids[1] {
		t.Fatalf("cancelled: %+v %v", c, err)
	}
	if _, err := n.eng.Workflows(ctx, ojs.WorkflowListQuery{State: "paused"}); !isField(err, "state") {
		t.Fatalf("unknown state: %v, want a validation error naming state", err)
	}

	// At most 2 records read per request: the running ones come over
	// pages that follow the cursor, each read bounded.
	workflow.SetMaxScan(n.eng, 2)
	seen := map[string]bool{}
	q := ojs.WorkflowListQuery{State: "running", PerPage: 10}
	for pages := 0; ; pages++ {
		l, err := n.eng.Workflows(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if l.Scanned > 2 {
			t.Fatalf("a page read %d records, bound 2", l.Scanned)
		}
		for _, w := range l.Workflows {
			if seen[w.ID] || w.State != ojs.WorkflowRunning {
				t.Fatalf("listed %s (%s) twice or in the wrong state", w.ID, w.State)
			}
			seen[w.ID] = true
		}
		if !l.Pagination.HasMore {
			break
		}
		if pages > 10 || l.Pagination.NextCursor == "" {
			t.Fatalf("paging does not end: %+v", l.Pagination)
		}
		q = ojs.WorkflowListQuery{State: "running", PerPage: 10, Cursor: l.Pagination.NextCursor}
	}
	if len(seen) != 4 {
		t.Fatalf("listed %d running workflows over bounded pages, want 4", len(seen))
	}
}

func isField(err error, field string) bool {
	ve, ok := err.(*ojs.ValidationError)
	return ok && ve.Field == field
}
