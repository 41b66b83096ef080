package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// rateLimitPaths are the dispatch paths the rate limiting issue sets
// targets for: unlimited, concurrency-limited on one key (limit far above
// the load), and the same over 10,000 keys.
var rateLimitPaths = []struct {
	name    string
	body    BodyFunc
	ratioTo string
}{
	{name: "unlimited"},
	{name: "limited_1key", body: limitedBody(oneKey), ratioTo: "unlimited"},
	{name: "limited_10k_keys", body: limitedBody(manyKeys(10_000)), ratioTo: "limited_1key"},
}

// BenchmarkRateLimitRatio runs each rate limit path once per iteration on
// -bench.jobs jobs and reports jobs/s and the ratios the rate limiting
// issue targets: limited_1key_ratio = limited/unlimited (>= 0.7),
// limited_10k_keys_ratio = 10k keys / 1 key (>= 0.8). `jetgate bench
// concurrency-limit keys-10k` measures the same in time-boxed rounds.
//
//	go test -run '^$' -bench RateLimitRatio -benchtime 1x -count 3 ./bench
func BenchmarkRateLimitRatio(b *testing.B) {
	sh := defaultShape(*flagJobs)
	e := startEnv(b)
	elapsed := map[string]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, p := range rateLimitPaths {
			ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
			r, err := e.GoRoundTrip(ctx, sh, "bench-rl-"+strings.ReplaceAll(p.name, "_", "-"), p.body)
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			b.Logf("%-17s %8.0f jobs/s", p.name, r.Metrics["jobs/s"])
			elapsed[p.name] += r.Elapsed
		}
	}
	b.StopTimer()
	rate := func(name string) float64 { return float64(sh.Jobs*b.N) / elapsed[name].Seconds() }
	for _, p := range rateLimitPaths {
		b.ReportMetric(rate(p.name), p.name+"_jobs/s")
		if p.ratioTo != "" {
			b.ReportMetric(rate(p.name)/rate(p.ratioTo), p.name+"_ratio")
		}
	}
}

// BenchmarkThrottleAccuracy runs 200 jobs per iteration under a throttle
// of 50 starts per second with more workers than it allows, and reports
// how far the start spacing (from the records' started_at) deviates from
// period/limit: p50, p99 and max, in ms (target: p99 <= 5 ms). No spacing
// below the interval is allowed at all (RL-R002); that is a failure.
//
//	go test -run '^$' -bench ThrottleAccuracy -benchtime 1x ./bench
func BenchmarkThrottleAccuracy(b *testing.B) {
	const perSecond, interval = 50, 20 * time.Millisecond
	sh := defaultShape(0)
	sh.Duration = 4 * time.Second // 200 starts
	e := startEnv(b)
	b.ResetTimer()
	var p50, p99, worst float64
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
		s, err := e.GoThrottle(ctx, sh, perSecond)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if n := s.Metrics["early gaps"]; n > 0 {
			b.Fatalf("RL-R002: %v starts closer than %s under a %d/s throttle", n, interval, perSecond)
		}
		p50 += s.Metrics["p50 dev ms"]
		p99 += s.Metrics["p99 dev ms"]
		for _, g := range s.Spacing {
			worst = max(worst, g-float64(interval)/float64(time.Millisecond))
		}
	}
	b.StopTimer()
	b.ReportMetric(p50/float64(b.N), "p50_dev_ms")
	b.ReportMetric(p99/float64(b.N), "p99_dev_ms")
	b.ReportMetric(worst, "max_dev_ms")
}

// BenchmarkWaitingIdleCPU parks 10,000 jobs on a paused key (concurrency
// 0), waits until all are parked and 10 s more, then reports the whole
// process's CPU time per second of wall time over 10 s while they wait
// (jetgate and its embedded nats-server together; DESIGN invariant 4:
// waiting costs nothing), next to the same measurement with no job at
// all.
//
//	go test -run '^$' -bench WaitingIdleCPU -benchtime 1x ./bench
func BenchmarkWaitingIdleCPU(b *testing.B) {
	const jobs, window = 10_000, 10 * time.Second
	e := startEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
	idleCPU, err := cpuPerSecond(ctx, window)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var waitingCPU float64
	for range b.N {
		s, err := e.GoWaiting(ctx, Shape{Duration: window}, jobs)
		if err != nil {
			b.Fatal(err)
		}
		waitingCPU += s.Metrics["CPU ms/s"]
	}
	b.StopTimer()
	b.ReportMetric(waitingCPU/float64(b.N), "waiting_cpu_ms/s")
	b.ReportMetric(idleCPU, "idle_cpu_ms/s")
}
