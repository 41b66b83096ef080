package dashboard_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// BenchmarkSnapshot measures one dashboard snapshot of 20 queues (jobs at
// three priority levels each, every other one bounded) and 50 rate-limit
// keys (one running job each), the case the brief names. It
// reports the server-side time of the snapshot (took_us, what the feeder
// spends once per second) and the process's CPU time per snapshot
// (jetgate, its embedded NATS server and the client are one process here)
// next to the HTTP round trip (ns/op):
//
//	go test -run '^$' -bench Snapshot -benchtime 50x ./httpbind/dashboard
func BenchmarkSnapshot(b *testing.B) {
	for _, c := range []struct{ queues, keys int }{{20, 50}, {20, 0}, {0, 50}} {
		b.Run(fmt.Sprintf("queues=%d,keys=%d", c.queues, c.keys), func(b *testing.B) { benchSnapshot(b, c.queues, c.keys) })
	}
}

func benchSnapshot(b *testing.B, queues, keys int) {
	s := start(b, app.Config{})
	for q := range queues {
		name := fmt.Sprintf("queue-%02d", q)
		if q%2 == 0 {
			s.must(200, "PUT", "/ojs/v1/admin/queues/"+name+"/config",
				map[string]any{"backpressure": map[string]any{"max_depth": 100, "strategy": "reject"}})
		}
		for _, p := range []int{0, 3, 7} {
			s.enqueue(name, map[string]any{"priority": p})
		}
	}
	for k := range keys {
		s.enqueue("keyed", map[string]any{"rate_limit": map[string]any{
			"key": fmt.Sprintf("tenant:%02d", k), "concurrency": 2, "rate": map[string]any{"limit": 100, "period": "PT1M"}}})
		if s.fetch("keyed") == nil {
			b.Fatal("no keyed job fetched")
		}
	}
	snap := s.snapshot()
	wantQueues := queues
	if keys > 0 {
		wantQueues++ // queue keyed
	}
	if n, k := len(list(snap["queues"])), len(list(snap["rate_limits"])); n != wantQueues || k != keys {
		b.Fatalf("snapshot has %d queues and %d keys, want %d and %d", n, k, wantQueues, keys)
	}
	// The idle process's CPU (admission's timers, NATS housekeeping) over
	// one second, subtracted below.
	idle0 := cpuTime()
	time.Sleep(time.Second)
	idle := cpuTime() - idle0
	var took []int64
	began := time.Now()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		_, _, raw := s.call("GET", "/dashboard/snapshot", nil)
		var m struct {
			Took int64 `json:"took_us"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
		took = append(took, m.Took)
	}
	b.StopTimer()
	elapsed := time.Since(began)
	cpu := (cpuTime() - cpu0 - time.Duration(float64(idle)*elapsed.Seconds())) / time.Duration(b.N)
	slices.Sort(took)
	b.ReportMetric(float64(cpu.Microseconds()), "process-cpu-µs/snapshot")
	b.ReportMetric(float64(took[len(took)/2]), "server-µs/snapshot(p50)")
	b.ReportMetric(float64(took[len(took)*9/10]), "server-µs/snapshot(p90)")
	b.Logf("%d snapshots: took_us p50 %d, p90 %d, max %d; process CPU (jetgate, embedded NATS and the client) %s each",
		len(took), took[len(took)/2], took[len(took)*9/10], took[len(took)-1], cpu)
}

// cpuTime is the CPU time (user + system) of this process so far: jetgate,
// its embedded nats-server and the benchmark's client all run in it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
