package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// BenchmarkPriorityLevels runs the Go round trip with jobs spread over 1,
// 10 and 256 priority levels and reports each one's jobs/s and the ratio
// of 10 and 256 levels to 1 (the priority issue's target: >= 0.7 for 256).
//
//	go test -run '^$' -bench PriorityLevels -benchtime 1x -count 2 ./bench
func BenchmarkPriorityLevels(b *testing.B) {
	sh := defaultShape(*flagJobs)
	e := startEnv(b)
	levels := []int{1, 10, 256}
	elapsed := map[int]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, n := range levels {
			ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
			r, err := e.GoRoundTrip(ctx, sh, fmt.Sprintf("bench-lv%d", n), levelsBody(n))
			cancel()
			if err != nil {
				b.Fatalf("%d levels: %v", n, err)
			}
			b.Logf("%3d levels %8.0f jobs/s", n, r.Metrics["jobs/s"])
			elapsed[n] += r.Elapsed
		}
	}
	b.StopTimer()
	rate := func(n int) float64 { return float64(sh.Jobs*b.N) / elapsed[n].Seconds() }
	for _, n := range levels {
		b.ReportMetric(rate(n), fmt.Sprintf("levels_%d_jobs/s", n))
		if n > 1 {
			b.ReportMetric(rate(n)/rate(1), fmt.Sprintf("levels_%d_ratio", n))
		}
	}
}

// BenchmarkUrgentLatency queues -bench.backlog jobs at priority 4 (default
// 100,000), then enqueues priority-0 jobs one at a time and measures, for
// each, the time from its enqueue to the fetch that returns it (p50, p99).
//
//	go test -run '^$' -bench UrgentLatency -benchtime 1x ./bench
func BenchmarkUrgentLatency(b *testing.B) {
	const backlog, probes = 100_000, 200
	e := startEnv(b)
	svc := e.Server().Service()
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
	queue := fmt.Sprintf("bench-urgent-%d", nextRun())
	batch := make([]*ojs.Job, 0, 500)
	for i := range backlog {
		j, err := ojs.ParseJob(levelsBody(5)(queue, 4+5*i, 200))
		if err != nil {
			b.Fatal(err)
		}
		if batch = append(batch, j); len(batch) == cap(batch) {
			if _, err := svc.EnqueueBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	var lat []float64
	for range b.N {
		for i := range probes {
			j, err := ojs.ParseJob(levelsBody(1)(queue, i, 200))
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := svc.Enqueue(ctx, j); err != nil {
				b.Fatal(err)
			}
			got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, WorkerID: "urgent"})
			if err != nil || len(got) != 1 || got[0].Priority != 0 {
				b.Fatalf("fetch: %v, %v; want the priority-0 job", got, err)
			}
			lat = append(lat, float64(time.Since(start))/float64(time.Millisecond))
			if _, err := svc.Ack(ctx, ojs.AckRequest{JobID: got[0].ID}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[int(math.Ceil(p*float64(len(lat))))-1] }
	b.ReportMetric(q(0.5), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
}
