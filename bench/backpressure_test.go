package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
)

// BenchmarkBackpressure measures what a bound costs (issue 5), on a whole
// jetgate with file storage:
//
//   - bounded_ratio: enqueue throughput into a queue bounded by max_depth
//     (well below its bound) over an unbounded queue, same producers. The
//     two run back to back in pairs, in alternating order (the second run
//     of a pair is measurably slower, whichever it is), and the ratio is
//     that of the summed times, so the order and load that drifts during
//     the run hit both sides alike (target >= 0.8);
//
//   - reject_p50_us / reject_p99_us: latency of an enqueue refused by a
//     full queue (reject strategy), one producer at a time, Go API;
//     http_reject_*: the same over HTTP (429 with its headers), measured
//     at the client.
//
//     go test -run '^$' -bench Backpressure -benchtime 1x -count 3 ./bench
func BenchmarkBackpressure(b *testing.B) {
	env := startEnv(b)
	srv := env.Server()
	e := srv.Service()
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	producers := max(*flagProducers, 1)
	const jobs, pairs = 4000, 8
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
	var total [2]time.Duration // unbounded, bounded
	var rejects, httpRejects []time.Duration
	b.ResetTimer()
	for range b.N {
		for pair := range pairs {
			var took [2]time.Duration
			for k := range 2 {
				bounded := (pair+k)%2 == 1
				q := fmt.Sprintf("bp-%d", nextRun())
				if bounded {
					if _, err := e.SetQueueBackpressure(ctx, q, &ojs.Backpressure{MaxDepth: 10 * jobs}); err != nil {
						b.Fatal(err)
					}
				}
				d, err := enqueueAll(ctx, e, q, jobs, producers)
				if err != nil {
					b.Fatal(err)
				}
				i := map[bool]int{false: 0, true: 1}[bounded]
				took[i] = d
				total[i] += d
			}
			b.Logf("pair %d: unbounded %6.0f/s  bounded %6.0f/s  ratio %.2f", pair,
				jobs/took[0].Seconds(), jobs/took[1].Seconds(), took[0].Seconds()/took[1].Seconds())
		}
		r, err := rejectLatencies(ctx, e, 2000)
		if err != nil {
			b.Fatal(err)
		}
		rejects = append(rejects, r...)
		r, err = httpRejectLatencies(ctx, e, hc, srv.URL(), 2000)
		if err != nil {
			b.Fatal(err)
		}
		httpRejects = append(httpRejects, r...)
	}
	b.StopTimer()
	slices.Sort(rejects)
	slices.Sort(httpRejects)
	pct := func(p float64) float64 {
		return float64(rejects[int(p*float64(len(rejects)-1))].Microseconds())
	}
	httpPct := func(p float64) float64 {
		return float64(httpRejects[int(p*float64(len(httpRejects)-1))].Microseconds())
	}
	runs := float64(b.N * pairs * jobs)
	b.ReportMetric(runs/total[0].Seconds(), "unbounded_enqueues/s")
	b.ReportMetric(runs/total[1].Seconds(), "bounded_enqueues/s")
	b.ReportMetric(total[0].Seconds()/total[1].Seconds(), "bounded_ratio")
	b.ReportMetric(pct(0.5), "reject_p50_us")
	b.ReportMetric(pct(0.99), "reject_p99_us")
	b.ReportMetric(httpPct(0.5), "http_reject_p50_us")
	b.ReportMetric(httpPct(0.99), "http_reject_p99_us")
}

// enqueueAll enqueues n jobs into queue from producers goroutines and
// returns how long it took.
func enqueueAll(ctx context.Context, svc *admission.Service, queue string, n, producers int) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				job, err := ojs.ParseJob(jobBody(queue, i, 200))
				if err == nil {
					_, err = svc.Enqueue(ctx, job)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}

// rejectLatencies fills a queue bounded at 100 and times n refused
// enqueues.
func rejectLatencies(ctx context.Context, svc *admission.Service, n int) ([]time.Duration, error) {
	q := fmt.Sprintf("bp-full-%d", nextRun())
	if _, err := svc.SetQueueBackpressure(ctx, q, &ojs.Backpressure{MaxDepth: 100}); err != nil {
		return nil, err
	}
	if _, err := enqueueAll(ctx, svc, q, 100, 4); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for i := range n {
		job, err := ojs.ParseJob(jobBody(q, i, 200))
		if err != nil {
			return nil, err
		}
		start := time.Now()
		_, err = svc.Enqueue(ctx, job)
		out = append(out, time.Since(start))
		if !errors.Is(err, ojs.ErrQueueFull) {
			return nil, fmt.Errorf("enqueue into a full queue: %v", err)
		}
	}
	return out, nil
}

// httpRejectLatencies fills a queue bounded at 100 and times n enqueues
// over HTTP answered 429.
func httpRejectLatencies(ctx context.Context, svc *admission.Service, hc *http.Client, base string, n int) ([]time.Duration, error) {
	q := fmt.Sprintf("bp-full-http-%d", nextRun())
	if _, err := svc.SetQueueBackpressure(ctx, q, &ojs.Backpressure{MaxDepth: 100}); err != nil {
		return nil, err
	}
	if _, err := enqueueAll(ctx, svc, q, 100, 4); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if err := post(ctx, hc, base+"/ojs/v1/jobs", jobBody(q, i, 200), http.StatusTooManyRequests, nil); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
