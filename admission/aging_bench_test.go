package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// BenchmarkFetchAging measures what aging costs a fetch (ojs-priority.md
// 8.2; aging.go): jobs spread over 10 levels, fetched 10 at a time and
// acked, in a queue without aging, in one with aging whose jobs are all
// younger than its interval, and in one where every level ages.
//
//	go test -run '^$' -bench FetchAging -benchtime 2000x ./admission
func BenchmarkFetchAging(b *testing.B) {
	for _, c := range []struct {
		name  string
		aging *ojs.Aging
	}{
		{"none", nil},
		// Jobs younger than the interval: one look-up per pull.
		{"aging-young", &ojs.Aging{Interval: time.Minute, Step: 1}},
		// Every level ages: two look-ups per level per pull.
		{"aging-all-levels", &ojs.Aging{Interval: time.Millisecond, Step: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.Connect(b, s)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			assets, err := topology.Ensure(ctx, js, topology.Config{})
			if err != nil {
				b.Fatal(err)
			}
			svc, err := admission.New(js.Conn(), js, assets, admission.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if err := svc.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer svc.Stop()
			bd := bundle{svc: svc, js: js}
			if c.aging != nil {
				if _, err := bd.svc.SetQueueAging(ctx, "bq", c.aging); err != nil {
					b.Fatal(err)
				}
			}
			var batch []*ojs.Job
			for i := range b.N {
				j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":"b.t","args":[%d],"queue":"bq","priority":%d}`, i, i%10))
				if err != nil {
					b.Fatal(err)
				}
				if batch = append(batch, j); len(batch) == 100 || i == b.N-1 {
					if _, err := bd.svc.EnqueueBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for got := 0; got < b.N; {
				jobs, err := bd.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"bq"}, Count: 10, WorkerID: "w"})
				if err != nil {
					b.Fatal(err)
				}
				for _, j := range jobs {
					if _, err := bd.svc.Ack(ctx, ojs.AckRequest{JobID: j.ID}); err != nil {
						b.Fatal(err)
					}
				}
				got += len(jobs)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
