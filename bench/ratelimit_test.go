package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// limitedBody is a job of about payloadSize bytes carrying policy as its
// rate_limit.
func limitedBody(queue string, i int, policy string) []byte {
	b := jobBody(queue, i)
	return append(b[:len(b)-1], []byte(`,"rate_limit":`+policy+`}`)...)
}

// rateLimitPaths are the dispatch paths the rate limiting issue sets
// targets for: unlimited, concurrency-limited on one key (limit far above
// the load), and the same over 10,000 keys.
var rateLimitPaths = []struct {
	name    string
	run     pathFunc
	ratioTo string
}{
	{name: "unlimited", run: goPathWith("bench-rl", nil)},
	{name: "limited_1key", run: goPathWith("bench-rl", func(int) string { return `{"key":"bench-one","concurrency":100000}` }), ratioTo: "unlimited"},
	{name: "limited_10k_keys", run: goPathWith("bench-rl", func(i int) string {
		return fmt.Sprintf(`{"key":"bench-k%d","concurrency":1000}`, i%10_000)
	}), ratioTo: "limited_1key"},
}

// BenchmarkRateLimitRatio runs each rate limit path once per iteration on
// -bench.jobs jobs and reports jobs/s and the ratios the rate limiting
// issue targets: limited_1key_ratio = limited/unlimited (>= 0.7),
// limited_10k_keys_ratio = 10k keys / 1 key (>= 0.8).
//
//	go test -run '^$' -bench RateLimitRatio -benchtime 1x -count 3 ./bench
func BenchmarkRateLimitRatio(b *testing.B) {
	sh := defaultShape(*flagJobs)
	e := setup(b, sh)
	elapsed := map[string]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, p := range rateLimitPaths {
			ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
			r, err := p.run(ctx, e, sh)
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			b.Logf("%-17s %8.0f jobs/s", p.name, float64(sh.jobs)/r.elapsed.Seconds())
			elapsed[p.name] += r.elapsed
		}
	}
	b.StopTimer()
	rate := func(name string) float64 { return float64(sh.jobs*b.N) / elapsed[name].Seconds() }
	for _, p := range rateLimitPaths {
		b.ReportMetric(rate(p.name), p.name+"_jobs/s")
		if p.ratioTo != "" {
			b.ReportMetric(rate(p.name)/rate(p.ratioTo), p.name+"_ratio")
		}
	}
}

// BenchmarkThrottleAccuracy runs jobs under a throttle of 50 starts per
// second with more workers than it allows, and reports how far the start
// spacing (from the records' started_at) deviates from period/limit:
// p50, p99 and max, in ms (target: p99 <= 5 ms). No spacing below the
// interval is allowed at all (RL-R002); that is a failure.
//
//	go test -run '^$' -bench ThrottleAccuracy -benchtime 1x ./bench
func BenchmarkThrottleAccuracy(b *testing.B) {
	const jobs, interval = 200, 20 * time.Millisecond
	sh := defaultShape(jobs)
	e := setup(b, sh)
	svc := e.srv.Service()
	b.ResetTimer()
	var devs []float64
	for range b.N {
		queue := fmt.Sprintf("bench-thr-%d", nextRun())
		policy := fmt.Sprintf(`{"key":"bench-thr-%s","throttle":{"limit":50,"period":"PT1S"}}`, queue)
		ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
		for i := range jobs {
			job, err := ojs.ParseJob(limitedBody(queue, i, policy))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Enqueue(ctx, job); err != nil {
				b.Fatal(err)
			}
		}
		var mu sync.Mutex
		var starts []time.Time
		led := newLedger(jobs)
		c, wctx := newCrew(ctx)
		for w := range sh.workers {
			req := ojs.FetchRequest{Queues: []string{queue}, Count: 1, WorkerID: fmt.Sprintf("thr-%d", w)}
			c.spawn(func() error {
				for !led.finished() {
					got, err := svc.Fetch(wctx, req)
					if err != nil {
						return err
					}
					for _, j := range got {
						mu.Lock()
						starts = append(starts, j.StartedAt.Time)
						mu.Unlock()
						if err := goAck(wctx, svc, j, led); err != nil {
							return err
						}
					}
					if len(got) == 0 {
						if err := pause(wctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}
		err := c.wait()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		slices.SortFunc(starts, func(x, y time.Time) int { return x.Compare(y) })
		for i := 1; i < len(starts); i++ {
			gap := starts[i].Sub(starts[i-1])
			if gap < interval {
				b.Fatalf("RL-R002: starts %s apart under a %s throttle", gap, interval)
			}
			devs = append(devs, float64(gap-interval)/float64(time.Millisecond))
		}
	}
	b.StopTimer()
	slices.Sort(devs)
	q := func(p float64) float64 { return devs[int(math.Ceil(p*float64(len(devs))))-1] }
	b.ReportMetric(q(0.50), "p50_dev_ms")
	b.ReportMetric(q(0.99), "p99_dev_ms")
	b.ReportMetric(devs[len(devs)-1], "max_dev_ms")
}

// BenchmarkWaitingIdleCPU parks 10,000 jobs on a paused key (concurrency
// 0), waits until all are parked, then reports the whole process's CPU
// time per second of wall time while they wait (jetgate and its embedded
// nats-server together; DESIGN invariant 4: waiting costs nothing), next
// to the same measurement with no job at all.
//
//	go test -run '^$' -bench WaitingIdleCPU -benchtime 1x ./bench
func BenchmarkWaitingIdleCPU(b *testing.B) {
	const jobs, window = 10_000, 10 * time.Second
	sh := defaultShape(jobs)
	e := setup(b, sh)
	svc := e.srv.Service()
	idleCPU := cpuPerSecond(window)
	b.ResetTimer()
	var waitingCPU float64
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
		queue := fmt.Sprintf("bench-wait-%d", nextRun())
		key := "bench-paused-" + queue
		batch := make([]*ojs.Job, 0, 100)
		for i := range jobs {
			job, err := ojs.ParseJob(limitedBody(queue, i, fmt.Sprintf(`{"key":%q,"concurrency":0}`, key)))
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, job)
			if len(batch) == cap(batch) {
				if _, err := svc.EnqueueBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		// Workers fetch until every job is parked on the key.
		for {
			got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: 100, WorkerID: "park"})
			if err != nil || len(got) > 0 {
				b.Fatalf("fetch under concurrency 0: %d jobs, %v", len(got), err)
			}
			st, err := svc.RateLimit(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if st.WaitingCount == jobs {
				break
			}
		}
		cancel()
		// Let the parking's own work (GC, flushes) settle first.
		time.Sleep(3 * time.Second)
		waitingCPU += cpuPerSecond(window)
	}
	b.StopTimer()
	b.ReportMetric(waitingCPU/float64(b.N)*1000, "waiting_cpu_ms/s")
	b.ReportMetric(idleCPU*1000, "idle_cpu_ms/s")
}

// cpuPerSecond is the process's CPU seconds per wall second over d.
func cpuPerSecond(d time.Duration) float64 {
	before := processCPU()
	time.Sleep(d)
	return (processCPU() - before).Seconds() / d.Seconds()
}
