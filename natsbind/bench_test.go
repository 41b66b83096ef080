package natsbind_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// BenchmarkWorkerOverNATS measures a worker's fetch + ack over the NATS
// API (issue 19 "Batch worker operations": how a NATS worker goes faster
// than one request per job): fetches of 100 jobs, then one ack request per
// job, or one ackbatch per fetch. Jobs are enqueued before the timer runs.
//
//	go test ./natsbind -run '^$' -bench WorkerOverNATS -benchtime 5000x
func BenchmarkWorkerOverNATS(b *testing.B) {
	for _, mode := range []string{"ack-each", "ackbatch"} {
		b.Run(mode, func(b *testing.B) {
			f := benchSetup(b)
			queue := "bench-" + mode
			enqueueMany(b, f, queue, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			done := 0
			var fetching time.Duration
			for done < b.N {
				t0 := time.Now()
				ids := benchFetch(b, f, queue, min(100, b.N-done))
				fetching += time.Since(t0)
				if mode == "ack-each" {
					for _, id := range ids {
						benchReq(b, f.nc, "workers.ack", map[string]any{"job_id": id})
					}
				} else {
					acks := make([]any, len(ids))
					for i, id := range ids {
						acks[i] = map[string]any{"job_id": id}
					}
					benchReq(b, f.nc, "workers.ackbatch", map[string]any{"acks": acks})
				}
				done += len(ids)
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(b.N)/(elapsed-fetching).Seconds(), "acks/s")
		})
	}
}

type benchFixture struct{ nc *nats.Conn }

func benchSetup(b *testing.B) benchFixture {
	b.Helper()
	s, err := app.Start(b.Context(), app.Config{DataDir: b.TempDir(), HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(s.Embedded().ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		nc.Close()
		_ = s.Shutdown(b.Context())
	})
	return benchFixture{nc: nc}
}

func enqueueMany(b *testing.B, f benchFixture, queue string, n int) {
	for n > 0 {
		k := min(n, 500)
		jobs := make([]any, k)
		for i := range jobs {
			jobs[i] = map[string]any{"type": "bench.job", "queue": queue, "args": []any{i}}
		}
		benchReq(b, f.nc, "jobs.batch", map[string]any{"jobs": jobs})
		n -= k
	}
}

func benchFetch(b *testing.B, f benchFixture, queue string, n int) []string {
	var out struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	benchReqInto(b, f.nc, "workers.fetch", map[string]any{"queues": []string{queue}, "count": n, "wait_ms": 5000}, &out)
	ids := make([]string, len(out.Jobs))
	for i, j := range out.Jobs {
		ids[i] = j.ID
	}
	if len(ids) == 0 {
		b.Fatal("fetch returned no job")
	}
	return ids
}

func benchReq(b *testing.B, nc *nats.Conn, op string, body any) {
	benchReqInto(b, nc, op, body, nil)
}

func benchReqInto(b *testing.B, nc *nats.Conn, op string, body, into any) {
	data, _ := json.Marshal(body)
	res, err := nc.Request("ojs.v1."+op, data, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if code := res.Header.Get("Nats-Service-Error-Code"); code != "" {
		b.Fatal(fmt.Sprintf("%s: %s %s", op, code, res.Data))
	}
	if into != nil {
		if err := json.Unmarshal(res.Data, into); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueue compares one enqueue request at a time over NATS and
// over HTTP against the same jetgate.
//
//	go test ./natsbind -run '^$' -bench Enqueue -benchtime 3000x
func BenchmarkEnqueue(b *testing.B) {
	s, err := app.Start(b.Context(), app.Config{DataDir: b.TempDir(), HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(s.Embedded().ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		nc.Close()
		_ = s.Shutdown(b.Context())
	})
	body := []byte(`{"type":"bench.job","queue":"bench-enqueue","args":[1]}`)
	b.Run("nats", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			res, err := nc.Request("ojs.v1.jobs.enqueue", body, 10*time.Second)
			if err != nil || res.Header.Get("Nats-Service-Error-Code") != "" {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			res, err := http.Post(s.URL()+"/ojs/v1/jobs", "application/openjobspec+json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 201 {
				b.Fatal(res.Status)
			}
		}
	})
}
