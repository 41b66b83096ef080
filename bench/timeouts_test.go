package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkTimeoutPrecision times out 10,000 active jobs whose execution
// timeouts are spread over 10 s (grace period 0, one attempt each) and
// reports the lateness discarded_at - (started_at + timeout), the timeouts
// issue's precision check (p99 within 1.5 s):
//
//	go test -run '^$' -bench TimeoutPrecision -benchtime 1x ./bench
func BenchmarkTimeoutPrecision(b *testing.B) {
	e := startEnv(b)
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
		s, err := e.GoTimeouts(ctx, Shape{Duration: 2 * time.Second}, 10_000)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range []string{"p50 late ms", "p99 late ms", "max late ms"} {
			b.ReportMetric(s.Metrics[m], m[:3]+"_late_ms")
		}
	}
}

// BenchmarkTimeoutIdleCPU reports the process CPU while 100 and 100,000
// active jobs wait on their timeouts, each in a jetgate of its own,
// measured over 30 s after a 150 s settle: the timeouts issue's no-scan
// check (the two about equal).
//
//	go test -run '^$' -bench TimeoutIdleCPU -benchtime 1x -timeout 30m ./bench
func BenchmarkTimeoutIdleCPU(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("active=%d", n), func(b *testing.B) {
			for range b.N {
				e := startEnv(b)
				ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout+3*time.Minute)
				s, err := e.GoIdleActive(ctx, n, 150*time.Second, 30*time.Second)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(s.Metrics["CPU ms/s"], "cpu_ms/s")
			}
		})
	}
}
