package admin_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// BenchmarkListing measures what a listing reads and costs over a queue of
// JETGATE_ADMIN_JOBS available jobs (default 5,000; the report's figures
// are with 50,000): msgs/op is the messages read per request.
func BenchmarkListing(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("JETGATE_ADMIN_JOBS")); err == nil && v > 0 {
		n = v
	}
	bd := setup(b, admin.Config{})
	ctx := testCtx(b)
	for i := 0; i < n; i += 500 {
		batch := make([]*ojs.Job, 0, 500)
		for k := i; k < min(i+500, n); k++ {
			j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":"t.common","args":[%d],"options":{"queue":"q"}}`, k))
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, j)
		}
		if _, err := bd.svc.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	deep := ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable, Queue: "q"}, PerPage: 100}
	for range n * 8 / 10 / 100 {
		l, err := bd.adm.AdminJobs(ctx, deep)
		if err != nil {
			b.Fatal(err)
		}
		deep.Cursor = l.Pagination.NextCursor
	}
	for _, c := range []struct {
		name string
		q    ojs.JobListQuery
	}{
		{"available_first_page_100", ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable, Queue: "q"}, PerPage: 100}},
		{"available_cursor_at_80pct_100", deep},
		{"available_type_matching_none", ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable, Type: "t.rare"}, PerPage: 100}},
		{"completed_none_among_records", ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateCompleted}, PerPage: 100}},
		// Issue 32: a sorted listing reads every match within the bound.
		{"available_sorted_by_priority_100", ojs.JobListQuery{Filter: ojs.JobFilter{State: ojs.StateAvailable, Queue: "q"},
			Sort: ojs.SortPriority, PerPage: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var read int
			for range b.N {
				l, err := bd.adm.AdminJobs(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				read = l.Scanned
			}
			b.ReportMetric(float64(read), "msgs/op")
		})
	}
	b.Run("stats", func(b *testing.B) {
		for range b.N {
			if _, err := bd.adm.AdminStats(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStatsThroughput measures GET /ojs/v1/admin/stats with a full
// minute of activity samples (issue 32's throughput): 60 samples, one a
// second, from each of 3 processes on each of 20 queues, 3,600 samples in
// the window, whatever the number of jobs behind them.
func BenchmarkStatsThroughput(b *testing.B) {
	bd := setup(b, admin.Config{})
	ctx := testCtx(b)
	for q := range 20 {
		for range 3 * 60 {
			if _, err := bd.js.Publish(ctx, topology.StatSubject(fmt.Sprintf("q%d", q)), []byte(`{"completed":5,"failed":1}`)); err != nil {
				b.Fatal(err)
			}
		}
	}
	st, err := bd.adm.AdminStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if st.Throughput.ProcessedPerMinute != 20*180*6 {
		b.Fatalf("throughput %+v, want %d processed", st.Throughput, 20*180*6)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := bd.adm.AdminStats(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
