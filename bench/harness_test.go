package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Shape of a run. Flags win over the BENCH_* environment variables, which
// win over the defaults: go test -bench '^BenchmarkRatio$' ./bench -args -bench.jobs=50000
var (
	flagProducers = flag.Int("bench.producers", envInt("BENCH_PRODUCERS", 8), "producer goroutines per path (env BENCH_PRODUCERS)")
	flagWorkers   = flag.Int("bench.workers", envInt("BENCH_WORKERS", 32), "worker goroutines per path (env BENCH_WORKERS)")
	flagJobs      = flag.Int("bench.jobs", envInt("BENCH_JOBS", 20_000), "jobs per path in BenchmarkRatio (env BENCH_JOBS)")
	flagTimeout   = flag.Duration("bench.timeout", envDuration("BENCH_TIMEOUT", 5*time.Minute), "give up on one path run after this long (env BENCH_TIMEOUT)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// shape is what every path runs: jobs jobs, pushed by producers goroutines
// and completed by workers goroutines, all at once.
type shape struct {
	jobs, producers, workers int
}

func defaultShape(jobs int) shape {
	return shape{jobs: jobs, producers: max(*flagProducers, 1), workers: max(*flagWorkers, 1)}
}

// startJetgate starts a whole jetgate (embedded nats-server on file storage
// in a temp dir, admission, events, metrics, HTTP) on loopback ports, and
// stops it when tb ends.
func startJetgate(tb testing.TB) *app.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.Start(ctx, app.Config{
		DataDir:  tb.TempDir(),
		NatsAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0",
	}, nil)
	if err != nil {
		tb.Fatalf("start jetgate: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown jetgate: %v", err)
		}
	})
	return s
}

// runSeq numbers path runs so each uses its own queue or consumer.
var runSeq atomic.Int64

func nextRun() int64 { return runSeq.Add(1) }

// ledger checks that every job of a run was completed exactly once: done
// counts acks per job index (carried in the payload), ids collects the
// job ids acked.
type ledger struct {
	done  []atomic.Int32
	acked atomic.Int64
	// fetches and empty count worker fetches, to see how much of a path's
	// work is polling.
	fetches, empty atomic.Int64

	mu  sync.Mutex
	ids map[string]struct{}
	dup []string
}

func newLedger(n int) *ledger {
	return &ledger{done: make([]atomic.Int32, n), ids: make(map[string]struct{}, n)}
}

// complete records the ack of job i; id is the job id ("" for raw
// messages, whose index is their identity).
func (l *ledger) complete(i int, id string) error {
	if i < 0 || i >= len(l.done) {
		return fmt.Errorf("acked job index %d out of range [0,%d)", i, len(l.done))
	}
	l.done[i].Add(1)
	l.acked.Add(1)
	if id == "" {
		return nil
	}
	l.mu.Lock()
	if _, ok := l.ids[id]; ok {
		l.dup = append(l.dup, id)
	}
	l.ids[id] = struct{}{}
	l.mu.Unlock()
	return nil
}

// fetched records one worker fetch that returned n jobs.
func (l *ledger) fetched(n int) {
	l.fetches.Add(1)
	if n == 0 {
		l.empty.Add(1)
	}
}

// result is what a path run measured.
type result struct {
	elapsed        time.Duration // first enqueue to last ack
	fetches, empty int64         // worker fetches, and those that got nothing
}

func (l *ledger) result(d time.Duration) result {
	return result{elapsed: d, fetches: l.fetches.Load(), empty: l.empty.Load()}
}

// finished reports whether every job was acked (or more acks came in).
func (l *ledger) finished() bool { return l.acked.Load() >= int64(len(l.done)) }

// verify fails unless each index was acked exactly once and, when ids
// were recorded, as many distinct ids as jobs were acked.
func (l *ledger) verify(withIDs bool) error {
	var missing, twice int
	for i := range l.done {
		switch n := l.done[i].Load(); {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing > 0 || twice > 0 {
		return fmt.Errorf("%d jobs never completed, %d completed more than once (of %d)", missing, twice, len(l.done))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if withIDs && (len(l.ids) != len(l.done) || len(l.dup) > 0) {
		return fmt.Errorf("%d distinct job ids acked for %d jobs (%d ids acked twice)", len(l.ids), len(l.done), len(l.dup))
	}
	return nil
}

// crew runs goroutines and keeps the first error; the first error cancels
// the others through ctx.
type crew struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func newCrew(ctx context.Context) (*crew, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &crew{cancel: cancel}, ctx
}

func (c *crew) spawn(f func() error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(); err != nil {
			c.once.Do(func() { c.err = err; c.cancel() })
		}
	}()
}

func (c *crew) wait() error {
	c.wg.Wait()
	c.cancel()
	return c.err
}

// idle is how long a worker waits after an empty fetch.
const idle = time.Millisecond

// claimer hands out job indexes 0..n-1 to producers.
type claimer struct {
	next atomic.Int64
	n    int64
}

func (c *claimer) claim() (int, bool) {
	i := c.next.Add(1) - 1
	return int(i), i < c.n
}
