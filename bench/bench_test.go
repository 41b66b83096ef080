package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Every benchmark stops its jetgate, clients and goroutines (STYLE 14).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// BenchmarkRoundTrip runs b.N enqueue→fetch→ack round trips per path on
// one shared jetgate, spread over the producers and workers of the shape
// (so there is no per-iteration loop: b.N is the job count). Compare runs
// with benchstat; jobs/s is the number that matters, allocs/op counts the
// whole process, embedded nats-server included.
//
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./bench
func BenchmarkRoundTrip(b *testing.B) {
	sh := defaultShape(0)
	e := setup(b, sh)
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			sh := sh
			sh.jobs = b.N
			ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			r, err := p.run(ctx, e, sh)
			b.StopTimer()
			if err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			b.ReportMetric(float64(b.N)/r.elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(r.fetches)/float64(b.N), "fetches/job")
			b.ReportMetric(float64(r.empty)/float64(b.N), "empty/job")
		})
	}
}

// BenchmarkRatio runs every path once per iteration on -bench.jobs jobs
// (BENCH_JOBS, default 20000), one after the other on one jetgate, and
// reports each path's jobs/s and the ratios the issue sets targets for:
// go_ratio = go/raw (target >= 0.35), http_ratio = http/raw (>= 0.20).
// Each run is logged.
//
// raw runs first and again last, and the faster of the two is the
// baseline: load that drifts during the iteration is seen by it, and a raw
// run that collapses (Fetch(1)+ack on a file-stored WorkQueue stream
// sometimes drops to ~1k/s, DESIGN "Speed") cannot make jetgate look good.
//
//	go test -run '^$' -bench '^BenchmarkRatio$' -benchtime 1x -count 3 ./bench
func BenchmarkRatio(b *testing.B) {
	sh := defaultShape(*flagJobs)
	e := setup(b, sh)
	order := append(paths[:len(paths):len(paths)], paths[0])
	elapsed := make(map[string]time.Duration, len(paths))
	b.ResetTimer()
	for range b.N {
		took := make(map[string]time.Duration, len(paths))
		for _, p := range order {
			ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
			r, err := p.run(ctx, e, sh)
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			b.Logf("%-9s %8.0f jobs/s  %5.2f fetches/job  %5.2f empty/job", p.name,
				float64(sh.jobs)/r.elapsed.Seconds(), float64(r.fetches)/float64(sh.jobs), float64(r.empty)/float64(sh.jobs))
			if d, ok := took[p.name]; !ok || r.elapsed < d {
				took[p.name] = r.elapsed
			}
		}
		for name, d := range took {
			elapsed[name] += d
		}
	}
	b.StopTimer()
	rate := func(name string) float64 { return float64(sh.jobs*b.N) / elapsed[name].Seconds() }
	for _, p := range paths {
		b.ReportMetric(rate(p.name), p.name+"_jobs/s")
		if p.ratioTo != "" {
			b.ReportMetric(rate(p.name)/rate(p.ratioTo), p.name+"_ratio")
		}
	}
}

// TestPaths checks the workloads themselves on a few jobs: each path
// completes every job exactly once. It measures nothing.
func TestPaths(t *testing.T) {
	sh := shape{jobs: 100, producers: 2, workers: 4}
	e := setup(t, sh)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := p.run(ctx, e, sh); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPayloads checks that jobs and raw messages are payloadSize bytes and
// carry their index where the workers read it.
func TestPayloads(t *testing.T) {
	for _, i := range []int{0, 7, 19_999, 1_000_000} {
		body := jobBody("bench-go-1", i)
		if len(body) != payloadSize {
			t.Errorf("job %d: body is %d bytes, want %d", i, len(body), payloadSize)
		}
		job, err := ojs.ParseJob(body)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if got, err := argIndex(job.Args); err != nil || got != i {
			t.Errorf("job %d: argIndex = %d, %v", i, got, err)
		}
		if got, err := strconv.Atoi(string(payload(i)[:8])); err != nil || got != i {
			t.Errorf("raw %d: index = %d, %v", i, got, err)
		}
	}
}
