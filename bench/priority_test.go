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

// BenchmarkPriorityLevels measures fetch throughput with jobs spread over
// 1, 10 and 256 priority levels, two ways: draining a backlog queued
// first (the priority issue's "fetch throughput", target >= 0.7 of one
// level for 256), and the Go round trip (enqueue while fetching, so the
// levels holding jobs change with every fetch). It reports each one's
// jobs/s and the ratios of 10 and 256 levels to 1.
//
//	go test -run '^$' -bench PriorityLevels -benchtime 1x -count 2 ./bench
func BenchmarkPriorityLevels(b *testing.B) {
	sh := defaultShape(*flagJobs)
	e := startEnv(b)
	levels := []int{1, 10, 256}
	type run struct {
		name string
		f    func(ctx context.Context, n int) (Sample, error)
	}
	runs := []run{
		{"drain", func(ctx context.Context, n int) (Sample, error) {
			return e.GoDrain(ctx, sh, fmt.Sprintf("bench-dr%d", n), levelsBody(n))
		}},
		{"roundtrip", func(ctx context.Context, n int) (Sample, error) {
			return e.GoRoundTrip(ctx, sh, fmt.Sprintf("bench-lv%d", n), levelsBody(n))
		}},
	}
	elapsed := map[string]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, r := range runs {
			for _, n := range levels {
				ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
				s, err := r.f(ctx, n)
				cancel()
				if err != nil {
					b.Fatalf("%s, %d levels: %v", r.name, n, err)
				}
				b.Logf("%-9s %3d levels %8.0f jobs/s", r.name, n, s.Metrics["jobs/s"])
				elapsed[fmt.Sprintf("%s_%d", r.name, n)] += s.Elapsed
			}
		}
	}
	b.StopTimer()
	rate := func(k string) float64 { return float64(sh.Jobs*b.N) / elapsed[k].Seconds() }
	for _, r := range runs {
		for _, n := range levels {
			k := fmt.Sprintf("%s_%d", r.name, n)
			b.ReportMetric(rate(k), "levels_"+k+"_jobs/s")
			if n > 1 {
				b.ReportMetric(rate(k)/rate(fmt.Sprintf("%s_1", r.name)), "levels_"+k+"_ratio")
			}
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
