package httpbind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
)

// BenchmarkWorkerPath counts what one job costs on the HTTP worker path,
// through the real binding, admission service and embedded JetStream
// server, over a keep-alive loopback connection: "fetch" is one POST
// /ojs/v1/workers/fetch of count 1 per job (the jobs enqueued before the
// timer starts), "ack" one POST /ojs/v1/workers/ack per job (enqueued and
// fetched before). allocs/op and B/op are per job and count the whole
// process (client and nats-server included): compare them between
// commits, not the timings, on a shared machine.
//
//	go test -run '^$' -bench WorkerPath -benchtime 3000x -benchmem ./httpbind
func BenchmarkWorkerPath(b *testing.B) {
	l := startBenchServer(b)
	b.Run("fetch", func(b *testing.B) {
		q := l.queue()
		l.enqueue(b, q, b.N)
		body := []byte(`{"queues":["` + q + `"],"count":1,"worker_id":"bench-worker"}`)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if got := l.post(b, "/ojs/v1/workers/fetch", body); !bytes.Contains(got, []byte(`"state":"active"`)) {
				b.Fatalf("fetch: %s", got)
			}
		}
	})
	b.Run("ack", func(b *testing.B) {
		q := l.queue()
		l.enqueue(b, q, b.N)
		ids := l.fetchAll(b, q, b.N)
		bodies := make([][]byte, len(ids))
		for i, id := range ids {
			bodies[i] = []byte(`{"job_id":"` + id + `","result":{"ok":true}}`)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if got := l.post(b, "/ojs/v1/workers/ack", bodies[i]); !bytes.Contains(got, []byte(`"state":"completed"`)) {
				b.Fatalf("ack: %s", got)
			}
		}
	})
}

type benchServer struct {
	url string
	svc *admission.Service
	hc  *http.Client
	n   atomic.Int64
}

func startBenchServer(tb testing.TB) *benchServer {
	tb.Helper()
	live := setupLiveCfg(tb, Config{})
	tr := &http.Transport{MaxIdleConnsPerHost: 2}
	tb.Cleanup(tr.CloseIdleConnections)
	return &benchServer{url: live.url, svc: live.svc, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// queue is a fresh queue name, one per run.
func (l *benchServer) queue() string { return fmt.Sprintf("bench-%d", l.n.Add(1)) }

// enqueue puts n jobs on queue q, a bench-sized payload each.
func (l *benchServer) enqueue(tb testing.TB, q string, n int) {
	tb.Helper()
	pad := strings.Repeat("x", 150)
	for i := range n {
		j, err := ojs.ParseJob(fmt.Appendf(nil, `{"type":"bench.noop","queue":%q,"args":[%d,%q]}`, q, i, pad))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := l.svc.Enqueue(context.Background(), j); err != nil {
			tb.Fatal(err)
		}
	}
}

// fetchAll fetches n jobs of queue q and returns their ids.
func (l *benchServer) fetchAll(tb testing.TB, q string, n int) []string {
	tb.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		jobs, err := l.svc.Fetch(context.Background(), ojs.FetchRequest{Queues: []string{q}, Count: min(n-len(ids), 100), WorkerID: "bench-worker"})
		if err != nil {
			tb.Fatal(err)
		}
		if len(jobs) == 0 {
			tb.Fatalf("fetched %d of %d jobs", len(ids), n)
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// post sends body to path and returns the 200 answer's body.
func (l *benchServer) post(tb testing.TB, path string, body []byte) []byte {
	req, err := http.NewRequest(http.MethodPost, l.url+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", MediaType)
	resp, err := l.hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %d %s %v", path, resp.StatusCode, got, err)
	}
	return got
}
