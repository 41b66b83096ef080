package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPFloor measures the ceiling every HTTP drain on this machine
// lives under (issue 17's drain-http goal): a bare net/http server whose
// handler does nothing but read the body and write an ack-sized answer,
// driven in-process by the client drain-http uses (bench.post, keep-alive
// connection per handler) at its 32 and 100 concurrent handlers. drain-http
// sends one such request per job (the ack) plus its share of fetches, on
// top of jetgate's and nats-server's work, so its jobs/s stays below this
// req/s.
//
//	go test -run '^$' -bench HTTPFloor -benchtime 200000x ./bench
func BenchmarkHTTPFloor(b *testing.B) {
	answer := []byte(`{"acknowledged":true,"job_id":"019ab5c2-7f3e-7c4d-9a1b-2c3d4e5f6a7b","state":"completed","completed_at":"2026-11-25T12:00:00.000Z"}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/openjobspec+json")
		_, _ = w.Write(answer)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	defer func() {
		_ = srv.Close()
		<-done
	}()
	url := "http://" + ln.Addr().String() + "/ojs/v1/workers/ack"
	body := []byte(`{"job_id":"019ab5c2-7f3e-7c4d-9a1b-2c3d4e5f6a7b"}`)
	for _, handlers := range []int{32, 100} {
		b.Run(fmt.Sprintf("%d_handlers", handlers), func(b *testing.B) {
			hc := keepAliveClient(handlers + 2)
			defer hc.CloseIdleConnections()
			ctx := context.Background()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			errs := make(chan error, handlers)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range handlers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if err := post(ctx, hc, url, body, http.StatusOK, nil); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}

// BenchmarkDrainHTTP is drain-http's jetgate side alone, one iteration per
// job, for CPU profiles of the drain (-cpuprofile): b.N jobs inserted over
// HTTP in batches of 100, then drained by the SDK-style worker with 100
// handlers. jobs/s is the drain's rate.
//
//	go test -run '^$' -bench DrainHTTP -benchtime 20000x -cpuprofile /tmp/drain.prof ./bench
func BenchmarkDrainHTTP(b *testing.B) {
	e := startEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	s, err := e.HTTPBatchDrain(ctx, fmt.Sprintf("bench-drain-%d", nextRun()), b.N, enqueueBatch, 100, 200, *flagInProcess)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(s.Metrics["jobs/s"], "jobs/s")
	b.ReportMetric(s.Metrics[insertPerSec.Name], "insert_jobs/s")
}
