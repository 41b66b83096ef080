//go:build unix

package admission_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// Benchmarks of the timeouts extension (issue 7). They run the admission
// service on an embedded nats-server with file storage, in this process:
//
//	go test -run '^$' -bench 'TimeoutPrecision|TimeoutIdleCPU' -benchtime 1x ./admission
//
// BenchmarkTimeoutPrecision: 10,000 active jobs with execution timeouts
// spread over 5..15 s (grace 0, one attempt each) time out; lateness is
// discarded_at - (started_at + timeout). Reports p50/p99/max lateness.
//
// BenchmarkTimeoutIdleCPU: the process CPU per second while N active jobs
// wait on their (30 min execution, 1 h heartbeat) timeouts, for N = 100 and N = 100,000: with
// timers in JetStream and nothing scanning, the two are about equal.

func setupBench(b *testing.B, cfg admission.Config) *admission.Service {
	b.Helper()
	s := natstest.RunServer(b)
	_, js := natstest.Connect(b, s)
	bb := setupCfg(b, js, cfg)
	b.Cleanup(bb.svc.Stop)
	return bb.svc
}

// enqueueAndStart enqueues n jobs built by body and fetches them all.
func enqueueAndStart(b *testing.B, svc *admission.Service, queue string, n int, body func(i int) string) []*ojs.Job {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	batch := make([]*ojs.Job, 0, 100)
	for i := range n {
		j, err := ojs.ParseJob([]byte(body(i)))
		if err != nil {
			b.Fatal(err)
		}
		if batch = append(batch, j); len(batch) == cap(batch) || i == n-1 {
			if _, err := svc.EnqueueBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var started []*ojs.Job
	failures := 0
	for len(started) < n {
		got, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: 100, WorkerID: "bench"})
		if err != nil {
			// A loaded machine may time out a request; a worker retries.
			if failures++; failures > 10 {
				b.Fatal(err)
			}
			continue
		}
		started = append(started, got...)
	}
	return started
}

func BenchmarkTimeoutPrecision(b *testing.B) {
	const jobs = 10_000
	for range b.N {
		svc := setupBench(b, admission.Config{})
		queue := "precision"
		started := enqueueAndStart(b, svc, queue, jobs, func(int) string {
			ms := 5000 + rand.IntN(10_000)
			return fmt.Sprintf(`{"type":"bench.t","args":[],"queue":%q,"timeout_ms":%d,"grace_period":0,"retry":{"max_attempts":1}}`, queue, ms)
		})
		last := time.Time{}
		for _, j := range started {
			last = maxTime(last, j.StartedAt.Add(time.Duration(j.TimeoutMs)*time.Millisecond))
		}
		time.Sleep(time.Until(last) + 3*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var late []time.Duration
		pending := 0
		for _, j := range started {
			for try := 0; ; try++ {
				cur, err := svc.Get(ctx, j.ID)
				if err != nil {
					b.Fatal(err)
				}
				if cur.State == ojs.StateDiscarded {
					late = append(late, cur.DiscardedAt.Sub(j.StartedAt.Add(time.Duration(j.TimeoutMs)*time.Millisecond)))
					break
				}
				if try == 100 {
					pending++
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		cancel()
		if pending > 0 {
			b.Fatalf("%d of %d jobs never timed out", pending, jobs)
		}
		slices.Sort(late)
		b.ReportMetric(float64(late[len(late)/2].Milliseconds()), "p50_late_ms")
		b.ReportMetric(float64(late[len(late)*99/100].Milliseconds()), "p99_late_ms")
		b.ReportMetric(float64(late[len(late)-1].Milliseconds()), "max_late_ms")
		b.ReportMetric(float64(late[0].Milliseconds()), "min_late_ms")
	}
}

func BenchmarkTimeoutIdleCPU(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			for range b.N {
				svc := setupBench(b, admission.Config{})
				queue := "idle"
				enqueueAndStart(b, svc, queue, n, func(int) string {
					// Silent workers: a heartbeat timeout longer than the run.
					return fmt.Sprintf(`{"type":"bench.t","args":[],"queue":%q,"heartbeat_timeout":3600}`, queue)
				})
				// Let the enqueues' own aftermath pass before measuring: the
				// deferred lease writes (10 s after each claim), the GC
				// returning memory, and the ready stream forgetting the
				// message ids of its 2-minute duplicate window.
				time.Sleep(150 * time.Second)
				b.ReportMetric(cpuPerSecond(30*time.Second)*1000, "cpu_ms/s")
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cpuPerSecond is the process CPU (user + system) per second of wall time
// over d.
func cpuPerSecond(d time.Duration) float64 {
	c0, t0 := processCPU(), time.Now()
	time.Sleep(d)
	return (processCPU() - c0).Seconds() / time.Since(t0).Seconds()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
