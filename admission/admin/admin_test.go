package admin_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type bundle struct {
	svc *admission.Service
	adm *admin.Admin
	js  jetstream.JetStream
}

func setup(t testing.TB, cfg admin.Config) bundle {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := testCtx(t)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	svc, err := admission.New(js.Conn(), js, assets, admission.Config{})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Stop)
	adm, err := admin.New(svc, svc.Store(), cfg)
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	return bundle{svc: svc, adm: adm, js: js}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func enqueue(t testing.TB, b bundle, queue, typ string) *ojs.Job {
	t.Helper()
	j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":%q,"args":[1],"options":{"queue":%q}}`, typ, queue))
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.svc.Enqueue(testCtx(t), j)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return out
}

func ids(l *ojs.JobList) []string {
	var out []string
	for _, j := range l.Items {
		out = append(out, j.ID)
	}
	return out
}

// ojs-admin-api.md 7.1 with the design's ready messages: an available job
// is listed from its ready message. A ready message whose job moved on
// (a stale token: a cancel removes the message of the job it cancels, but
// one published by a transition that then lost its compare-and-swap
// stays until a fetch drops it) is not listed, and a ready message that
// carries the whole job while no record exists yet is (the layout where
// the ready message is the available job's record).
func TestAvailableFromReadyStream_ADM003(t *testing.T) {
	t.Parallel()
	b := setup(t, admin.Config{})
	ctx := testCtx(t)
	keep := enqueue(t, b, "q", "t.keep")
	gone := enqueue(t, b, "q", "t.gone")
	if _, _, err := b.svc.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	// A ready message of the cancelled job with a token its record never
	// had.
	stale := *gone
	stale.Internal.Token = jobstore.NewToken()
	if _, err := b.js.PublishMsg(ctx, jobstore.ReadyMsg(&stale)); err != nil {
		t.Fatal(err)
	}
	// A ready message carrying its job, no record.
	carried := &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "t.carried", Queue: "q",
		Args: []byte(`[1]`), Priority: ojs.DefaultPriority, State: ojs.StateAvailable, CreatedAt: ojs.NewTime(time.Now()),
		Internal: ojs.Internal{Token: jobstore.NewToken()}}
	m := jobstore.ReadyMsg(carried)
	m.Data, _ = carried.AppendJSON(nil)
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	l, err := b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(l), []string{keep.ID, carried.ID}; !slices.Equal(got, want) {
		t.Fatalf("available: %v, want %v", got, want)
	}
	if l.Scanned != 3 {
		t.Fatalf("read %d ready messages, want 3 (no record scan)", l.Scanned)
	}
	cancelled, err := b.adm.AdminJobs(ctx, ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateCancelled}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(cancelled); !slices.Equal(got, []string{gone.ID}) {
		t.Fatalf("cancelled: %v", got)
	}
}

// Package doc: a request reads at most MaxScan messages; a selective
// filter comes back with a short page, has_more and a cursor, and going on
// from the cursor finds every match exactly once.
func TestScanBudgetShortPages(t *testing.T) {
	t.Parallel()
	b := setup(t, admin.Config{MaxScan: 4})
	var want []string
	for i := range 12 {
		typ := "t.common"
		if i%3 == 2 {
			typ = "t.rare"
		}
		j := enqueue(t, b, "q", typ)
		if typ == "t.rare" {
			want = append(want, j.ID)
		}
	}
	q := ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable, Type: "t.rare"}, PerPage: 10}
	var got []string
	for n := 0; ; n++ {
		if n > 10 {
			t.Fatal("paging does not end")
		}
		l, err := b.adm.AdminJobs(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if l.Scanned > 4 {
			t.Fatalf("read %d messages, budget 4", l.Scanned)
		}
		got = append(got, ids(l)...)
		if !l.Pagination.HasMore {
			break
		}
		q.Cursor = l.Pagination.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rare jobs: %v, want %v", got, want)
	}
}

// Package doc: a page number skips at most MaxOffset matches.
func TestPageDepthBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, admin.Config{MaxOffset: 40})
	_, err := b.adm.AdminJobs(testCtx(t), ojs.JobListQuery{Page: 4, PerPage: 20})
	if ve, ok := err.(*ojs.ValidationError); !ok || ve.Field != "page" {
		t.Fatalf("page 4 of 20 with MaxOffset 40: %v", err)
	}
	if _, err := b.adm.AdminJobs(testCtx(t), ojs.JobListQuery{Page: 3, PerPage: 20}); err != nil {
		t.Fatalf("page 3: %v", err)
	}
}

// ojs-admin-api.md 8: a bulk request changes at most MaxBulk jobs and says
// more may match.
func TestBulkBounded_ADM007(t *testing.T) {
	t.Parallel()
	b := setup(t, admin.Config{MaxBulk: 2})
	for range 3 {
		enqueue(t, b, "q", "t.x")
	}
	res, err := b.adm.BulkJobs(testCtx(t), ojs.BulkRequest{Action: ojs.BulkCancel, Filter: ojs.JobFilter{Queue: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 2 || res.Succeeded != 2 || !res.HasMore || res.NextCursor == "" {
		t.Fatalf("bulk: %+v", res)
	}
	n, err := b.svc.StateCounts(testCtx(t), "q")
	if err != nil {
		t.Fatal(err)
	}
	if n[ojs.StateCancelled] != 2 || n[ojs.StateAvailable] != 1 {
		t.Fatalf("counts: %v", n)
	}
}
